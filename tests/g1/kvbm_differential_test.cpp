// Long random operation sequences on the KVBM backend, for each eviction
// policy, checked step by step against KvbmReferenceModel: results, counts,
// eviction victims, events, cached hashes, owner tables; plus what only the
// implementation has: pages backing one identity each and bytes that survive.
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <random>
#include <string>

#include "g1/g1_test_support.hpp"
#include "g1/kvbm_reference_model.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/g1/g1_manager.hpp"
#include "kvtier/memory/host_runtime.hpp"
#include "kvtier/memory/kv_pool.hpp"

namespace kvtier::g1 {
namespace {

using testing::KvbmReferenceModel;

constexpr int kPrompts = 4;
constexpr std::size_t kBlocksPerPrompt = 8;
constexpr std::uint32_t kCapacity = 14;

std::uint64_t prompt_hash(int prompt, std::size_t i) { return static_cast<std::uint64_t>(prompt) * 1000 + i + 1; }
PositionalLineageHash prompt_plh(int prompt, std::size_t i) {
  return PositionalLineageHash(
      SequenceHash(prompt_hash(prompt, i)),
      i == 0 ? std::nullopt : std::optional<SequenceHash>(SequenceHash(prompt_hash(prompt, i - 1))), i);
}

class KvbmDifferential : public ::testing::TestWithParam<std::tuple<EvictionBackend, std::uint32_t>> {
 protected:
  void SetUp() override {
    const auto [policy, seed] = GetParam();
    rng_.seed(seed);
    sink_ = std::make_shared<RecordingEventSink>();
    manager_ = std::make_unique<G1Manager>(G1ManagerConfig{.capacity = kCapacity,
                                                           .block_size = 4,
                                                           .dp_rank = 0,
                                                           .backend = G1Backend::Kvbm,
                                                           .enable_prefix_caching = true,
                                                           .eviction = policy},
                                           std::vector<std::shared_ptr<KvEventSink>>{sink_});
    model_ = std::make_unique<KvbmReferenceModel>(static_cast<int>(kCapacity), policy);
    const KvGeometry geometry{.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype = KvDtype::Fp32, .tokens_per_block = 4};
    pool_ = std::make_unique<memory::KvPool>(runtime_, KvLayout(geometry, PageLayout::LayerMajor, kCapacity));
  }

  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  static std::uint64_t identity(const UniqueBlock& b) { return testing::block_identity(b); }

  /// Pages of the owner's blocks [first, end) get their blocks' bytes ("computed KV").
  void write_range(std::uint64_t owner, std::size_t first) {
    const auto pages = manager_->block_table(OwnerId(owner));
    const auto blocks = manager_->owned_blocks(OwnerId(owner));
    std::vector<PageId> to_write;
    std::vector<std::uint64_t> ids;
    for (std::size_t i = first; i < pages.size(); ++i) {
      if (written_.contains(pages[i].value()) && written_[pages[i].value()] == identity(blocks[i])) continue;
      to_write.push_back(pages[i]);
      ids.push_back(identity(blocks[i]));
      written_[pages[i].value()] = identity(blocks[i]);
    }
    pool_->fill_pattern(to_write, ids);
  }

  void check_bytes(std::uint64_t owner) {
    const auto pages = manager_->block_table(OwnerId(owner));
    std::vector<std::uint64_t> ids;
    for (const UniqueBlock& b : manager_->owned_blocks(OwnerId(owner))) ids.push_back(identity(b));
    EXPECT_TRUE(pool_->find_pattern_mismatches(pages, ids).empty()) << "owner " << owner;
  }

  UseSignal make_use(int prompt, std::size_t first, std::size_t count, bool partial_tail) {
    UseSignal use;
    for (std::size_t i = first; i < first + count; ++i) {
      use.blocks.push_back(UniqueBlock::full(SequenceHash(prompt_hash(prompt, i))));
      use.local_hashes.emplace_back(prompt_hash(prompt, i) + 500);
      use.plhs.push_back(prompt_plh(prompt, i));
    }
    if (partial_tail) use.blocks.push_back(UniqueBlock::partial(Uuid::random()));
    if (first > 0) use.parent = UniqueBlock::full(SequenceHash(prompt_hash(prompt, first - 1)));
    return use;
  }

  void apply_use(std::uint64_t owner, const UseSignal& use) {
    const std::size_t before = manager_->has_owner(OwnerId(owner)) ? manager_->block_table(OwnerId(owner)).size() : 0;
    const auto expected = model_->use(owner, use);
    const G1Acquire actual = manager_->process_for_request(OwnerId(owner), use);
    ASSERT_EQ(actual.is_ready(), expected.has_value());
    ++(actual.is_ready() ? seen_.ready : seen_.exhausted);
    if (actual.is_ready()) write_range(owner, before);
  }

  void step() {
    const auto& owners = model_->owners();
    const int choice = pick(12);
    if (choice <= 2 || owners.empty()) {
      const std::uint64_t owner = next_owner_++;
      const int prompt = pick(kPrompts);
      prompt_of_[owner] = prompt;
      // Sometimes a scattered slice: KVBM matches registered blocks after a miss.
      const std::size_t first = pick(4) == 0 ? static_cast<std::size_t>(pick(3)) : 0;
      return apply_use(owner, make_use(prompt, first, 1 + static_cast<std::size_t>(pick(4)), pick(3) == 0));
    }
    auto it = owners.begin();
    std::advance(it, pick(static_cast<int>(owners.size())));
    const std::uint64_t owner = it->first;
    const std::vector<UniqueBlock> table = it->second;
    const int prompt = prompt_of_[owner];
    switch (choice) {
      case 3: {
        if (table.back().is_partial() || table.size() >= kBlocksPerPrompt) return;
        const std::size_t next = table.back().hash().value() - prompt_hash(prompt, 0) + 1;
        if (next >= kBlocksPerPrompt) return;
        return apply_use(owner, make_use(prompt, next, 1, pick(2) == 0));
      }
      case 4:
      case 5: {
        const std::size_t count = 1 + static_cast<std::size_t>(pick(static_cast<int>(table.size())));
        return deref(owner,
                     std::vector<UniqueBlock>(table.rbegin(), table.rbegin() + static_cast<std::ptrdiff_t>(count)));
      }
      case 6:
      case 7:
        return deref(owner, std::vector<UniqueBlock>(table.rbegin(), table.rend()));
      case 8:
        return promote(owner, table, prompt);
      case 9:
        return decode(owner, table);
      case 10: {
        if (table.size() < 2) return;
        const std::vector<UniqueBlock> wrong{table.front(), table.back()};
        EXPECT_THROW(model_->deref(owner, wrong), KvbmReferenceModel::Refused);
        EXPECT_THROW(manager_->process_for_request(OwnerId(owner), DerefSignal{wrong}), ContractError);
        return;
      }
      default:
        return check_bytes(owner);
    }
  }

  void deref(std::uint64_t owner, const std::vector<UniqueBlock>& leaf_first) {
    model_->deref(owner, leaf_first);
    manager_->process_for_request(OwnerId(owner), DerefSignal{leaf_first});
  }

  void promote(std::uint64_t owner, const std::vector<UniqueBlock>& table, int prompt) {
    if (!table.back().is_partial() || table.size() < 2 || table.size() > kBlocksPerPrompt) return;
    const std::size_t position = table[table.size() - 2].hash().value() - prompt_hash(prompt, 0) + 1;
    if (position >= kBlocksPerPrompt) return;
    const PromoteSignal promote{.uuid = table.back().uuid(),
                                .hash = SequenceHash(prompt_hash(prompt, position)),
                                .parent = table[table.size() - 2].hash(),
                                .local = LocalBlockHash(prompt_hash(prompt, position) + 500),
                                .plh = prompt_plh(prompt, position),
                                .token_ids = std::nullopt};
    model_->promote(owner, promote);
    manager_->process_for_request(OwnerId(owner), promote);
    ++seen_.promoted;
    write_range(owner, manager_->block_table(OwnerId(owner)).size() - 1);
  }

  void decode(std::uint64_t owner, const std::vector<UniqueBlock>& table) {
    const int n = pick(3);
    const bool model_ok = model_->reserve_decode(n);
    auto reservation = manager_->reserve_decode_blocks(static_cast<std::size_t>(n));
    ASSERT_EQ(reservation.has_value(), model_ok);
    if (!reservation) return;
    if (n > 0 && !table.back().is_partial()) {
      UseSignal use;
      use.blocks.push_back(UniqueBlock::partial(Uuid::random()));
      use.parent = table.back();
      model_->decode_use(owner, use);
      const std::size_t before = manager_->block_table(OwnerId(owner)).size();
      ASSERT_TRUE(manager_->process_decode_signal_for_request(OwnerId(owner), use, *reservation).is_ready());
      write_range(owner, before);
    }
    model_->release_decode();
    manager_->release_decode_reservation(std::move(*reservation));
  }

  void compare() {
    ASSERT_NO_FATAL_FAILURE(testing::expect_same_counts(*manager_, *model_));
    std::vector<KvbmReferenceModel::EventData> actual;
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
    ASSERT_EQ(manager_->owners().size(), model_->owners().size());
    for (const auto& [owner, table] : model_->owners()) {
      const auto blocks = manager_->owned_blocks(OwnerId(owner));
      ASSERT_EQ(std::vector<UniqueBlock>(blocks.begin(), blocks.end()), table);
    }
    ASSERT_NO_FATAL_FAILURE(testing::expect_each_page_backs_one_identity(*manager_));
  }

  std::mt19937 rng_;
  memory::HostRuntime runtime_;
  std::unique_ptr<memory::KvPool> pool_;
  std::map<std::uint32_t, std::uint64_t> written_;  // page -> identity last written
  std::shared_ptr<RecordingEventSink> sink_;
  std::unique_ptr<G1Manager> manager_;
  std::unique_ptr<KvbmReferenceModel> model_;
  std::map<std::uint64_t, int> prompt_of_;
  std::uint64_t next_owner_ = 1;
  struct {
    int ready = 0, exhausted = 0, promoted = 0, stored = 0, removed = 0;
  } seen_;
};

TEST_P(KvbmDifferential, AgreesWithTheReferenceModelForThousandsOfOperations) {
  for (int i = 0; i < 3000; ++i) {
    step();
    ASSERT_NO_FATAL_FAILURE(compare()) << "after operation " << i;
    if (HasFailure()) return;
  }
  for (const OwnerId owner : manager_->owners()) check_bytes(owner.value());
  EXPECT_GT(seen_.ready, 500);
  EXPECT_GT(seen_.exhausted, 10);
  EXPECT_GT(seen_.promoted, 20);
  EXPECT_GT(seen_.stored, 100);
  EXPECT_GT(seen_.removed, 50);
  std::cout << "ready " << seen_.ready << ", exhausted " << seen_.exhausted << ", promoted " << seen_.promoted
            << ", stored " << seen_.stored << ", removed " << seen_.removed << '\n';
}

INSTANTIATE_TEST_SUITE_P(Policies, KvbmDifferential,
                         ::testing::Combine(::testing::Values(EvictionBackend::Lineage, EvictionBackend::Lru,
                                                              EvictionBackend::MultiLru),
                                            ::testing::Values(1U, 2U, 3U, 4U)),
                         [](const auto& param_info) {
                           return std::string(eviction_backend_name(std::get<0>(param_info.param))) + "_seed" +
                                  std::to_string(std::get<1>(param_info.param));
                         });

}  // namespace
}  // namespace kvtier::g1
