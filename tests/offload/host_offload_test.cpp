// The offload contract on HostRuntime, plus what only the host runtime can
// do: inject copy faults, and corrupt G2 bytes to exercise verify_swaps.
#include <cstring>

#include "kvtier/memory/host_runtime.hpp"
#include "offload/offload_contract.hpp"

namespace kvtier::offload::testing {
namespace {

struct HostRuntimeTraits {
  static std::unique_ptr<memory::Runtime> make() { return std::make_unique<memory::HostRuntime>(); }
  static const char* unavailable() { return nullptr; }
};

using HostRuntimes = ::testing::Types<HostRuntimeTraits>;
INSTANTIATE_TYPED_TEST_SUITE_P(Host, OffloadContract, HostRuntimes);

class HostOffload : public OffloadContract<HostRuntimeTraits> {
 protected:
  void SetUp() override { OffloadContract<HostRuntimeTraits>::SetUp(); }
  /// Block 1 evicted to G2 (collected), G1 holding block 2 inactive.
  void block_one_in_g2() { push_to_g2(1, {1}, 2, {2}); }
  std::size_t host_stored_since(std::size_t first) const {
    std::size_t n = 0;
    for (const KvEvent& e : events_since(first)) {
      n += e.tier == StorageTier::HostPinned && std::holds_alternative<KvStored>(e.data);
    }
    return n;
  }
};

TEST_F(HostOffload, FailedSwapOutRegistersNothingReleasesTheSourceAndTellsNoStored) {
  build(1, 4);
  ASSERT_TRUE(use(1, use_chain({1})).is_ready());
  deref(1, {1});
  engine_->inject_copy_fault(1);
  const std::size_t before = event_count();
  const G1Acquire blocked = use(2, use_chain({2}));
  ASSERT_EQ(blocked.kind, G1Acquire::Kind::BlockedOnOffload);
  const auto progress = manager_->collect_offloads(true);
  EXPECT_EQ(progress.failed, std::vector<std::uint64_t>{blocked.offload_id});
  EXPECT_EQ(host_stored_since(before), 0U);
  EXPECT_FALSE(manager_->is_host_cached(SequenceHash(1)));
  const auto stats = manager_->offload_stats();
  EXPECT_EQ(stats.quarantined, 0U);
  EXPECT_EQ(stats.tier.used, 0U);
  EXPECT_EQ(stats.tier.failed_transfers, 1U);
  EXPECT_TRUE(use(2, use_chain({2})).is_ready());  // the retry goes through
  EXPECT_NO_THROW(manager_->audit());
}

TEST_F(HostOffload, OnlyTheFaultedBatchFails) {
  build(4, 8, OffloadConfig{.batch_blocks = 1});
  ASSERT_TRUE(use(1, use_chain({1, 2, 3, 4})).is_ready());
  deref(1, {4, 3, 2, 1});
  engine_->inject_copy_fault(2);
  ASSERT_EQ(use(2, use_chain({5, 6, 7, 8})).kind, G1Acquire::Kind::BlockedOnOffload);
  const auto progress = manager_->collect_offloads(true);
  EXPECT_EQ(progress.completed.size(), 4U);
  EXPECT_EQ(progress.failed.size(), 1U);
  EXPECT_EQ(manager_->offload_stats().tier.used, 3U);
  EXPECT_EQ(manager_->offload_stats().quarantined, 0U);
}

TEST_F(HostOffload, FailedSwapInRegistersNothingAndKeepsTheG2Copy) {
  build(1, 4);
  block_one_in_g2();
  auto start = manager_->try_batch_swap_in(chain_plhs({1}), manager_->try_pin_g1_prefix({}));
  ASSERT_EQ(start.status, SwapInStatus::BlockedOnG1Offload);
  manager_->collect_offloads(true);
  engine_->inject_copy_fault(1);
  start = manager_->try_batch_swap_in(chain_plhs({1}), manager_->try_pin_g1_prefix({}));
  ASSERT_EQ(start.status, SwapInStatus::Scheduled);
  const std::size_t before = event_count();
  const auto registration = manager_->register_completed_swap_in(start.swap_in_id);
  EXPECT_TRUE(registration.failed);
  EXPECT_EQ(registration.registered, 0U);
  EXPECT_TRUE(events_since(before).empty());
  EXPECT_FALSE(manager_->is_cached(SequenceHash(1)));
  EXPECT_TRUE(manager_->is_host_cached(SequenceHash(1)));
  EXPECT_EQ(manager_->metrics().active_blocks, 0U);
  // The G2 copy is unpinned again: a later swap-in of it works.
  start = manager_->try_batch_swap_in(chain_plhs({1}), manager_->try_pin_g1_prefix({}));
  ASSERT_EQ(start.status, SwapInStatus::Scheduled);
  EXPECT_EQ(manager_->register_completed_swap_in(start.swap_in_id).registered, 1U);
  EXPECT_NO_THROW(manager_->audit());
}

TEST_F(HostOffload, VerifySwapsDropsACorruptedG2BlockAndCountsIt) {
  build(1, 4, OffloadConfig{.verify_swaps = true});
  block_one_in_g2();
  auto start = manager_->try_batch_swap_in(chain_plhs({1}), manager_->try_pin_g1_prefix({}));
  ASSERT_EQ(start.status, SwapInStatus::BlockedOnG1Offload);
  manager_->collect_offloads(true);
  const auto page = engine_->host_page(chain_plhs({1})[0]);
  ASSERT_TRUE(page.has_value());
  *engine_->host_pool().chunk_address(PageId(page->value()), 0) ^= std::byte{1};  // one flipped bit
  const std::size_t before = event_count();
  start = manager_->try_batch_swap_in(chain_plhs({1}), manager_->try_pin_g1_prefix({}));
  EXPECT_EQ(start.status, SwapInStatus::NoHits);  // the request recomputes
  EXPECT_EQ(manager_->offload_stats().tier.verify_failures, 1U);
  EXPECT_FALSE(manager_->is_host_cached(SequenceHash(1)));
  const auto events = events_since(before);
  ASSERT_EQ(events.size(), 1U);
  EXPECT_EQ(events[0].tier, StorageTier::HostPinned);
  EXPECT_EQ(std::get<KvRemoved>(events[0].data), g1::testing::removed({1}));
  EXPECT_EQ(manager_->metrics().active_blocks, 0U);
  EXPECT_NO_THROW(manager_->audit());
}

TEST_F(HostOffload, VerifySwapsPassesIntactBlocks) {
  build(1, 4, OffloadConfig{.verify_swaps = true});
  block_one_in_g2();
  auto start = manager_->try_batch_swap_in(chain_plhs({1}), manager_->try_pin_g1_prefix({}));
  manager_->collect_offloads(true);
  start = manager_->try_batch_swap_in(chain_plhs({1}), manager_->try_pin_g1_prefix({}));
  ASSERT_EQ(start.status, SwapInStatus::Scheduled);
  EXPECT_EQ(manager_->register_completed_swap_in(start.swap_in_id).registered, 1U);
  EXPECT_EQ(manager_->offload_stats().tier.verify_failures, 0U);
  ASSERT_TRUE(manager_->process_for_request(g1::OwnerId(9), use_chain({1})).is_ready());
  expect_owner_bytes(9);
}

// Harness find (seed 894): a swap-in's blocks come from several Uses, some
// with token ids and some without; one Stored run held misaligned lists.
TEST_F(HostOffload, SwapInRegistrationSplitsRunsWhereTokenIdsStartOrStop) {
  build(2, 4);
  UseSignal first = use_chain({1});
  first.token_ids = BlockTokenIds{std::vector<TokenId>(4, 1)};
  ASSERT_TRUE(use(1, first).is_ready());
  ASSERT_TRUE(use(1, use_chain({2}, 1, 1)).is_ready());
  deref(1, {2, 1});
  ASSERT_EQ(use(2, use_chain({5, 6})).kind, G1Acquire::Kind::BlockedOnOffload);
  manager_->collect_offloads(true);
  ASSERT_TRUE(use(2, use_chain({5, 6})).is_ready());
  deref(2, {6, 5});
  auto start = manager_->try_batch_swap_in(chain_plhs({1, 2}), manager_->try_pin_g1_prefix({}));
  if (start.status == SwapInStatus::BlockedOnG1Offload) {
    manager_->collect_offloads(true);
    start = manager_->try_batch_swap_in(chain_plhs({1, 2}), manager_->try_pin_g1_prefix({}));
  }
  ASSERT_EQ(start.status, SwapInStatus::Scheduled);
  const std::size_t before = event_count();
  EXPECT_EQ(manager_->register_completed_swap_in(start.swap_in_id).registered, 2U);
  const auto events = events_since(before);
  ASSERT_EQ(events.size(), 2U);
  const auto& with_ids = std::get<KvStored>(events[0].data);
  ASSERT_TRUE(with_ids.token_ids.has_value());
  EXPECT_EQ(with_ids.token_ids->size(), with_ids.blocks.size());
  const auto& without = std::get<KvStored>(events[1].data);
  EXPECT_FALSE(without.token_ids.has_value());
  EXPECT_EQ(without.parent, SequenceHash(1));
}

TEST(OffloadEngineConfig, ImpossibleConfigurationsAreRefusedBeforeAllocating) {
  memory::HostRuntime runtime;
  memory::KvPool pool(runtime, KvLayout(KvGeometry{}, PageLayout::PageMajor, 4));
  EXPECT_THROW(OffloadEngine(runtime, pool, OffloadConfig{.host_blocks = 0}), ConfigError);
  EXPECT_THROW(OffloadEngine(runtime, pool, OffloadConfig{.host_blocks = 4, .batch_blocks = 0}), ConfigError);
  OffloadEngine engine(runtime, pool, OffloadConfig{.host_blocks = 4});
  EXPECT_EQ(engine.host_pool().layout().page_bytes(), pool.layout().page_bytes());
  EXPECT_THROW(engine.inject_copy_fault(0), ContractError);
}

TEST(OffloadEngineAttach, AnEngineServesOneManagerAndAManagerOneEngine) {
  memory::HostRuntime runtime;
  memory::KvPool pool(runtime, KvLayout(KvGeometry{}, PageLayout::PageMajor, 4));
  auto engine = std::make_shared<OffloadEngine>(runtime, pool, OffloadConfig{.host_blocks = 4});
  g1::G1Manager first(g1::G1ManagerConfig{.capacity = 4, .block_size = 16});
  g1::G1Manager second(g1::G1ManagerConfig{.capacity = 4, .block_size = 16});
  first.attach_offload_engine(engine);
  EXPECT_TRUE(first.has_offload_engine());
  EXPECT_THROW(second.attach_offload_engine(engine), ContractError);
  EXPECT_FALSE(second.has_offload_engine());
  EXPECT_THROW(
      first.attach_offload_engine(std::make_shared<OffloadEngine>(runtime, pool, OffloadConfig{.host_blocks = 2})),
      ContractError);
  EXPECT_THROW(first.attach_offload_engine(nullptr), ContractError);
}

}  // namespace
}  // namespace kvtier::offload::testing
