// The coordinator against a reference model of the spec's group rules
// (support/group_reference_model.hpp) on seeded random streams: requests with
// shared prefixes, chunked prefills, decode steps and frees, under pool
// pressure. After every operation: equal hits and uncached common prefixes,
// equal null positions in every table, equal active and inactive pages per
// group, and the coordinator's own audit (no page in two groups, the null
// page never counted or freed, held + cached + free = capacity).
#include <gtest/gtest.h>

#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "g1/native/groups/group_coordinator.hpp"
#include "g1/support/group_prompts.hpp"
#include "g1/support/group_reference_model.hpp"

namespace kvtier::g1 {
namespace {

GroupSpec kind_at(GroupKind kind, std::uint32_t block_size, MambaMode mode = MambaMode::None) {
  if (kind == GroupKind::Mamba) {
    return GroupSpec{.kind = kind, .layers = 1, .block_size = block_size, .mamba_mode = mode, .state_bytes = 64};
  }
  // Page bytes proportional to the block size: groups of different block sizes need different dtypes.
  GroupSpec g{.kind = kind, .layers = 1, .block_size = block_size, .kv_heads = 1, .head_dim = 512 / block_size};
  if (kind == GroupKind::SlidingWindow) g.sliding_window = 40;
  if (kind == GroupKind::ChunkedLocalAttention) g.attention_chunk_size = 64;
  return g;
}

struct Running {
  std::uint64_t id;
  std::vector<std::uint32_t> tokens;  // prompt and what it generated so far
  std::size_t prompt;
  std::size_t allocated;
};

class Stream {
 public:
  Stream(const std::vector<GroupSpec>& groups, std::uint32_t manager_block_size, std::uint32_t capacity,
         std::uint32_t seed)
      : geometry_(ModelGeometry::resolve(groups, manager_block_size)),
        coordinator_(geometry_, capacity, true),
        reference_(geometry_, capacity),
        rng_(seed) {}

  /// What a stream exercised: prompts that hit, that had an uncached common prefix, refused steps.
  struct Counts {
    std::size_t hits = 0;
    std::size_t uncached = 0;
    std::size_t refused = 0;
  };
  const Counts& counts() const { return counts_; }

  void run(int operations) {
    for (int op = 0; op < operations; ++op) {
      coordinator_.begin_step();
      reference_.begin_step();
      const auto roll = pick(0, 9);
      if (running_.empty() || roll < 3) {
        admit();
      } else if (roll < 8) {
        advance(pick(0, running_.size() - 1));
      } else {
        finish(pick(0, running_.size() - 1));
      }
      compare("operation " + std::to_string(op));
      if (::testing::Test::HasFailure()) return;
    }
  }

 private:
  std::size_t pick(std::size_t lo, std::size_t hi) { return std::uniform_int_distribution<std::size_t>(lo, hi)(rng_); }
  std::vector<SequenceHash> hashes(const std::vector<std::uint32_t>& tokens) const {
    return test::block_hashes(tokens, geometry_.hash_block_size());
  }

  void admit() {
    // Four families of prefixes; a prompt shares a random part of one.
    const std::size_t length = pick(8, 220);
    const auto family = static_cast<std::uint32_t>(pick(1, 4));
    Running r{next_id_, test::prompt(length, pick(0, length), family, static_cast<std::uint32_t>(100 + next_id_)),
              length, 0};
    ++next_id_;
    const auto h = hashes(r.tokens);
    const GroupHit hit = coordinator_.find_hit(h, r.prompt);
    const auto [ref_hit, ref_first] = reference_.hit(h, r.prompt);
    ASSERT_EQ(hit.tokens, ref_hit) << "request " << r.id;
    ASSERT_EQ(hit.tokens + hit.uncached_common_prefix, ref_first) << "request " << r.id;
    counts_.hits += hit.tokens > 0 ? 1 : 0;
    counts_.uncached += hit.uncached_common_prefix > 0 ? 1 : 0;
    // A chunked prefill: the hit plus up to 96 tokens.
    const std::size_t first_chunk = std::min(r.prompt, hit.tokens + pick(1, 96));
    const bool ok = coordinator_.allocate(OwnerId(r.id), h, first_chunk, hit.tokens);
    ASSERT_EQ(ok, reference_.allocate(r.id, h, first_chunk, hit.tokens)) << "request " << r.id;
    if (ok) {
      r.allocated = first_chunk;
      running_.push_back(std::move(r));
    }
  }

  void advance(std::size_t index) {
    Running& r = running_[index];
    // What was allocated is computed; then the next chunk, or one decode token.
    auto h = hashes(r.tokens);
    coordinator_.finalize(OwnerId(r.id), h, r.allocated);
    reference_.finalize(r.id, h, r.allocated);
    compare("finalize " + std::to_string(r.id));
    std::size_t next = r.allocated < r.prompt ? std::min(r.prompt, r.allocated + pick(1, 96)) : r.allocated + 1;
    if (next > r.tokens.size()) r.tokens.push_back(static_cast<std::uint32_t>(pick(1, 50000)));
    h = hashes(r.tokens);
    const bool ok = coordinator_.allocate(OwnerId(r.id), h, next);
    ASSERT_EQ(ok, reference_.allocate(r.id, h, next, 0)) << "request " << r.id << " to " << next;
    if (ok) r.allocated = next;
    counts_.refused += ok ? 0 : 1;
  }

  void finish(std::size_t index) {
    coordinator_.free(OwnerId(running_[index].id));
    reference_.free(running_[index].id);
    running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(index));
  }

  void compare(const std::string& where) {
    coordinator_.audit();
    const auto usage = coordinator_.usage();
    for (std::size_t g = 0; g < coordinator_.group_count(); ++g) {
      ASSERT_EQ(usage[g].active, reference_.active(g)) << where << ", group " << g;
      ASSERT_EQ(usage[g].inactive, reference_.inactive(g)) << where << ", group " << g;
      for (const Running& r : running_) {
        std::vector<bool> nulls;
        for (const PageId page : coordinator_.table(OwnerId(r.id), g))
          nulls.push_back(page == coordinator_.null_page());
        ASSERT_EQ(nulls, reference_.nulls(r.id, g)) << where << ", request " << r.id << ", group " << g;
      }
    }
  }

  ModelGeometry geometry_;
  GroupCoordinator coordinator_;
  test::GroupReferenceModel reference_;
  std::mt19937_64 rng_;
  std::vector<Running> running_;
  std::uint64_t next_id_ = 1;
  Counts counts_;
};

struct Case {
  std::string name;
  std::vector<GroupSpec> groups;
  std::uint32_t manager_block_size;
};

std::vector<Case> cases() {
  using K = GroupKind;
  std::vector<Case> out;
  for (const std::uint32_t bs : {16U, 32U}) {
    const std::string at = " bs" + std::to_string(bs);
    out.push_back({"full+sliding" + at, {kind_at(K::FullAttention, bs), kind_at(K::SlidingWindow, bs)}, bs});
    out.push_back({"full+chunked" + at, {kind_at(K::FullAttention, bs), kind_at(K::ChunkedLocalAttention, bs)}, bs});
    out.push_back({"full+mamba none" + at, {kind_at(K::FullAttention, bs), kind_at(K::Mamba, bs)}, bs});
    out.push_back(
        {"full+mamba align" + at, {kind_at(K::FullAttention, bs), kind_at(K::Mamba, bs, MambaMode::Align)}, bs});
    out.push_back({"sliding+mamba" + at, {kind_at(K::SlidingWindow, bs), kind_at(K::Mamba, bs, MambaMode::All)}, bs});
    out.push_back({"full+full+sliding" + at,
                   {kind_at(K::FullAttention, bs), kind_at(K::FullAttention, bs), kind_at(K::SlidingWindow, bs)},
                   bs});
  }
  // Two block sizes in one manager: hash unit 16, scheduler unit 32.
  out.push_back({"full bs32+sliding bs16", {kind_at(K::FullAttention, 32), kind_at(K::SlidingWindow, 16)}, 16});
  // A window of one block in 32-token segments: only each segment's last block is cached.
  GroupSpec narrow = kind_at(K::SlidingWindow, 16);
  narrow.sliding_window = 16;
  out.push_back({"full bs32+sliding bs16 W16", {kind_at(K::FullAttention, 32), narrow}, 16});
  out.push_back({"full bs16+chunked bs32", {kind_at(K::FullAttention, 16), kind_at(K::ChunkedLocalAttention, 32)}, 16});
  return out;
}

TEST(GroupDifferential, CoordinatorMatchesTheReferenceModelUnderPressure) {
  for (const Case& c : cases()) {
    Stream::Counts total;
    for (const std::uint32_t capacity : {24U, 64U}) {
      for (std::uint32_t seed = 1; seed <= 6; ++seed) {
        SCOPED_TRACE(c.name + ", capacity " + std::to_string(capacity) + ", seed " + std::to_string(seed));
        Stream stream(c.groups, c.manager_block_size, capacity, seed);
        stream.run(250);
        if (HasFailure()) return;
        total.hits += stream.counts().hits;
        total.uncached += stream.counts().uncached;
        total.refused += stream.counts().refused;
      }
    }
    // The streams reach what the test is for: prefix hits and a full pool.
    EXPECT_GT(total.hits, 10U) << c.name;
    EXPECT_GT(total.refused, 20U) << c.name;
    std::cout << c.name << ": " << total.hits << " hits, " << total.uncached << " with an uncached common prefix, "
              << total.refused << " refused steps\n";
  }
}

}  // namespace
}  // namespace kvtier::g1
