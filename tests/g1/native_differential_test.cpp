// Long random operation sequences on the native backend, checked step by step
// against NativeReferenceModel: results, counts, eviction victims, events,
// cached hashes and owner tables — plus the physical invariants the model
// cannot see: no page backs two live identities, and every owner's pages hold
// the bytes written for the blocks they back.
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <random>
#include <set>

#include "g1/g1_test_support.hpp"
#include "g1/native_reference_model.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/g1/g1_manager.hpp"
#include "kvtier/memory/host_runtime.hpp"
#include "kvtier/memory/kv_pool.hpp"

namespace kvtier::g1 {
namespace {

using testing::NativeReferenceModel;

constexpr int kPrompts = 5;
constexpr int kBlocksPerPrompt = 7;

/// Block i of prompt p: prompts share nothing, requests of one prompt share prefixes.
std::uint64_t prompt_hash(int prompt, std::size_t i) { return static_cast<std::uint64_t>(prompt) * 1000 + i + 1; }

class NativeDifferential : public ::testing::TestWithParam<std::tuple<std::uint32_t, bool>> {
 protected:
  void SetUp() override {
    const auto [seed, caching] = GetParam();
    rng_.seed(seed);
    caching_ = caching;
    sink_ = std::make_shared<RecordingEventSink>();
    manager_ = std::make_unique<G1Manager>(G1ManagerConfig{.capacity = kCapacity,
                                                           .block_size = 4,
                                                           .dp_rank = 0,
                                                           .backend = G1Backend::Native,
                                                           .enable_prefix_caching = caching},
                                           std::vector<std::shared_ptr<KvEventSink>>{sink_});
    model_ = std::make_unique<NativeReferenceModel>(kCapacity, 4, caching);
    const KvGeometry geometry{.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype = KvDtype::Fp32, .tokens_per_block = 4};
    pool_ = std::make_unique<memory::KvPool>(runtime_, KvLayout(geometry, PageLayout::PageMajor, kCapacity));
  }

  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

  static std::uint64_t identity(const UniqueBlock& b) { return testing::block_identity(b); }

  /// "Computes" the KV of an owner's blocks from position `first` on.
  void write_from(std::uint64_t owner, std::size_t first) {
    const auto pages = manager_->block_table(OwnerId(owner));
    const auto blocks = manager_->owned_blocks(OwnerId(owner));
    std::vector<PageId> write_pages(pages.begin() + static_cast<std::ptrdiff_t>(first), pages.end());
    std::vector<std::uint64_t> ids;
    for (std::size_t i = first; i < blocks.size(); ++i) ids.push_back(identity(blocks[i]));
    pool_->fill_pattern(write_pages, ids);
  }

  UseSignal make_use(int prompt, std::size_t first, std::size_t count, bool partial_tail) {
    UseSignal use;
    for (std::size_t i = first; i < first + count; ++i) {
      use.blocks.push_back(UniqueBlock::full(SequenceHash(prompt_hash(prompt, i))));
      use.local_hashes.emplace_back(prompt_hash(prompt, i) + 500);
      use.plhs.emplace_back(SequenceHash(prompt_hash(prompt, i)), std::nullopt, i);
    }
    if (partial_tail) use.blocks.push_back(UniqueBlock::partial(Uuid::random()));
    if (first > 0) use.parent = UniqueBlock::full(SequenceHash(prompt_hash(prompt, first - 1)));
    if (pick(4) == 0) use.local_hashes.clear();  // sometimes unknown local hashes
    return use;
  }

  void step() {
    const auto& owners = model_->owners();
    const int choice = pick(12);
    if (choice <= 2 || owners.empty()) return new_request();
    auto it = owners.begin();
    std::advance(it, pick(static_cast<int>(owners.size())));
    const std::uint64_t owner = it->first;
    const auto table = it->second;  // copy: the model changes below
    switch (choice) {
      case 3:
        return continue_request(owner, table);
      case 4:
      case 5:
        return finalize(owner, table);
      case 6:
        return deref(owner, table, false);
      case 7:
      case 8:
        return deref(owner, table, true);  // a request finishes
      case 9:
        return promote(owner, table);
      case 10:
        return decode(owner, table);
      default:
        return bad_deref(owner, table);
    }
  }

  void new_request() {
    const std::uint64_t owner = next_owner_++;
    const int prompt = pick(kPrompts);
    prompt_of_[owner] = prompt;
    const std::size_t count = 1 + static_cast<std::size_t>(pick(4));
    const UseSignal use = make_use(prompt, 0, count, pick(3) == 0);
    std::size_t reuse = 0;
    if (caching_) {
      while (reuse < count && model_->cached(prompt_hash(prompt, reuse))) ++reuse;
      reuse = static_cast<std::size_t>(pick(static_cast<int>(reuse) + 1));
      if (pick(8) == 0) reuse = count;  // sometimes claim a prefix that is not resident
    }
    apply_use(owner, use, reuse);
  }

  void apply_use(std::uint64_t owner, const UseSignal& use, std::size_t reuse) {
    const bool existed = manager_->has_owner(OwnerId(owner));
    const std::size_t before = existed ? manager_->block_table(OwnerId(owner)).size() : 0;
    std::optional<std::size_t> expected;
    bool model_refused = false;
    try {
      expected = model_->use(owner, use, reuse);
    } catch (const NativeReferenceModel::Refused&) {
      model_refused = true;
    }
    if (model_refused) {
      EXPECT_THROW(manager_->process_for_request(OwnerId(owner), use, reuse), ContractError);
      return;
    }
    const G1Acquire actual = manager_->process_for_request(OwnerId(owner), use, reuse);
    ASSERT_EQ(actual.is_ready(), expected.has_value());
    ++(actual.is_ready() ? seen_.ready : seen_.exhausted);
    if (reuse > 0 && actual.is_ready()) ++seen_.reused;
    if (!actual.is_ready()) return;
    check_owner_bytes(owner, reuse);  // reused pages hold what their first owner wrote
    write_from(owner, before + reuse);
  }

  void continue_request(std::uint64_t owner, const std::vector<NativeReferenceModel::Owned>& table) {
    if (table.back().block.is_partial() || table.size() >= kBlocksPerPrompt) return;
    const std::size_t count = 1 + static_cast<std::size_t>(pick(2));
    apply_use(owner,
              make_use(prompt_of_[owner], table.size(), std::min(count, kBlocksPerPrompt - table.size()), pick(3) == 0),
              0);
  }

  void finalize(std::uint64_t owner, const std::vector<NativeReferenceModel::Owned>& table) {
    const std::size_t before = static_cast<std::size_t>(pick(static_cast<int>(table.size() * 4) + 1));
    const std::size_t after = before + static_cast<std::size_t>(pick(10));
    model_->finalize(owner, before, after);
    manager_->finalize_computed_prefix(OwnerId(owner), before, after);
  }

  void deref(std::uint64_t owner, const std::vector<NativeReferenceModel::Owned>& table, bool all) {
    const std::size_t count = all ? table.size() : 1 + static_cast<std::size_t>(pick(static_cast<int>(table.size())));
    DerefSignal deref;
    for (std::size_t i = 0; i < count; ++i) deref.blocks.push_back(table[table.size() - 1 - i].block);
    model_->deref(owner, deref.blocks);
    manager_->process_for_request(OwnerId(owner), deref);
  }

  void bad_deref(std::uint64_t owner, const std::vector<NativeReferenceModel::Owned>& table) {
    if (table.size() < 2) return;
    DerefSignal wrong_order{{table.front().block, table.back().block}};
    EXPECT_THROW(model_->deref(owner, wrong_order.blocks), NativeReferenceModel::Refused);
    EXPECT_THROW(manager_->process_for_request(OwnerId(owner), wrong_order), ContractError);
  }

  void promote(std::uint64_t owner, const std::vector<NativeReferenceModel::Owned>& table) {
    if (!table.back().block.is_partial()) return;
    const std::size_t position = table.size() - 1;
    const std::uint64_t hash = prompt_hash(prompt_of_[owner], position);
    const std::optional<std::uint64_t> parent =
        position == 0 ? std::nullopt : std::optional<std::uint64_t>(table[position - 1].block.hash().value());
    model_->promote(owner, table.back().block.uuid(), hash, parent, hash + 500);
    manager_->process_for_request(
        OwnerId(owner),
        PromoteSignal{.uuid = table.back().block.uuid(),
                      .hash = SequenceHash(hash),
                      .parent = parent ? std::optional<SequenceHash>(SequenceHash(*parent)) : std::nullopt,
                      .local = LocalBlockHash(hash + 500),
                      .plh = PositionalLineageHash(SequenceHash(hash), std::nullopt, position),
                      .token_ids = std::nullopt});
    write_from(owner, position);  // the block's identity changed
  }

  void decode(std::uint64_t owner, const std::vector<NativeReferenceModel::Owned>& table) {
    const int n = pick(3);
    const bool model_ok = model_->reserve_decode(n);
    auto reservation = manager_->reserve_decode_blocks(static_cast<std::size_t>(n));
    ASSERT_EQ(reservation.has_value(), model_ok);
    if (!reservation) return;
    compare();
    if (n > 0 && !table.back().block.is_partial()) {
      UseSignal use;
      use.blocks.push_back(UniqueBlock::partial(Uuid::random()));
      use.parent = table.back().block;
      model_->decode_use(owner, use);
      const std::size_t before = manager_->block_table(OwnerId(owner)).size();
      ASSERT_TRUE(manager_->process_decode_signal_for_request(OwnerId(owner), use, *reservation).is_ready());
      write_from(owner, before);
    }
    model_->release_decode();
    manager_->release_decode_reservation(std::move(*reservation));
  }

  /// The first `count` pages of the owner (all by default) hold their blocks' bytes.
  void check_owner_bytes(std::uint64_t owner, std::size_t count = SIZE_MAX) {
    const auto all = manager_->block_table(OwnerId(owner));
    const auto pages = all.first(std::min(count, all.size()));
    std::vector<std::uint64_t> ids;
    for (const UniqueBlock& b : manager_->owned_blocks(OwnerId(owner)).first(pages.size())) ids.push_back(identity(b));
    EXPECT_TRUE(pool_->find_pattern_mismatches(pages, ids).empty()) << "owner " << owner;
  }

  void compare() {
    ASSERT_NO_FATAL_FAILURE(testing::expect_same_counts(*manager_, *model_));
    std::vector<NativeReferenceModel::EventData> actual;
    for (const KvEvent& event : sink_->events()) {
      actual.push_back(event.data);
      ++(std::holds_alternative<KvStored>(event.data) ? seen_.stored : seen_.removed);
    }
    sink_->clear();
    ASSERT_EQ(actual, model_->take_events());
    for (int p = 0; p < kPrompts; ++p) {
      for (std::size_t i = 0; i < kBlocksPerPrompt; ++i) {
        ASSERT_EQ(manager_->is_cached(SequenceHash(prompt_hash(p, i))), model_->cached(prompt_hash(p, i)));
      }
    }
    // Owner tables agree, and each page backs exactly one identity.
    ASSERT_EQ(manager_->owners().size(), model_->owners().size());
    for (const auto& [owner, table] : model_->owners()) {
      const auto blocks = manager_->owned_blocks(OwnerId(owner));
      ASSERT_EQ(blocks.size(), table.size());
      for (std::size_t i = 0; i < table.size(); ++i) ASSERT_EQ(blocks[i], table[i].block);
    }
    ASSERT_NO_FATAL_FAILURE(testing::expect_each_page_backs_one_identity(*manager_));
  }

  static constexpr std::uint32_t kCapacity = 12;
  std::mt19937 rng_;
  bool caching_ = true;
  memory::HostRuntime runtime_;
  std::unique_ptr<memory::KvPool> pool_;
  std::shared_ptr<RecordingEventSink> sink_;
  std::unique_ptr<G1Manager> manager_;
  std::unique_ptr<NativeReferenceModel> model_;
  std::map<std::uint64_t, int> prompt_of_;
  std::uint64_t next_owner_ = 1;
  struct {
    int ready = 0, exhausted = 0, reused = 0, stored = 0, removed = 0;
  } seen_;
};

TEST_P(NativeDifferential, AgreesWithTheReferenceModelForThousandsOfOperations) {
  for (int i = 0; i < 3000; ++i) {
    step();
    ASSERT_NO_FATAL_FAILURE(compare()) << "after operation " << i;
    if (HasFailure()) return;
    if (i % 50 == 0) {
      for (const OwnerId owner : manager_->owners()) check_owner_bytes(owner.value());
    }
  }
  // The run must have exercised what it claims to check.
  EXPECT_GT(seen_.ready, 500);
  EXPECT_GT(seen_.exhausted, 10);
  if (caching_) {
    EXPECT_GT(seen_.reused, 50);
    EXPECT_GT(seen_.stored, 100);
    EXPECT_GT(seen_.removed, 50);
  }
  std::cout << "ready " << seen_.ready << ", exhausted " << seen_.exhausted << ", reused " << seen_.reused
            << ", stored " << seen_.stored << ", removed " << seen_.removed << '\n';
}

INSTANTIATE_TEST_SUITE_P(Seeds, NativeDifferential,
                         ::testing::Combine(::testing::Values(1U, 2U, 3U, 4U, 5U, 6U), ::testing::Bool()));

}  // namespace
}  // namespace kvtier::g1
