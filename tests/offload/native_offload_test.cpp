// The native backend's offload path (docs/offload.md): a cached block's last
// copy evicted from G1 goes to G2 the same lazy way as on KVBM; swap-in
// registers cached, inactive G1 blocks. Keys are sequence hashes.
#include <gtest/gtest.h>

#include "g1/g1_test_support.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/memory/host_runtime.hpp"
#include "kvtier/offload/offload_engine.hpp"

namespace kvtier::offload {
namespace {

using g1::G1Acquire;
using g1::SwapInStatus;
using g1::testing::deref_full;
using g1::testing::use_full;

std::vector<PositionalLineageHash> keys(std::vector<std::uint64_t> hashes) {
  std::vector<PositionalLineageHash> out;
  for (std::uint64_t h : hashes) out.push_back(g1::native_tier_key(SequenceHash(h)));
  return out;
}

class NativeOffload : public ::testing::Test {
 protected:
  static constexpr std::uint32_t kBlockSize = 4;
  void build(std::uint32_t capacity, std::uint32_t host_blocks) {
    const KvGeometry geometry{
        .layers = 2, .kv_heads = 2, .head_dim = 16, .dtype = KvDtype::Bf16, .tokens_per_block = kBlockSize};
    pool_ = std::make_unique<memory::KvPool>(runtime_, KvLayout(geometry, PageLayout::PageMajor, capacity));
    engine_ = std::make_shared<OffloadEngine>(runtime_, *pool_, OffloadConfig{.host_blocks = host_blocks});
    manager_ = std::make_unique<g1::G1Manager>(g1::G1ManagerConfig{.capacity = capacity, .block_size = kBlockSize},
                                               std::vector<std::shared_ptr<KvEventSink>>{sink_});
    manager_->attach_offload_engine(engine_);
  }
  /// Use + write the pattern + finalize (the blocks become cached), like a prefill.
  G1Acquire prefill(std::uint64_t owner, std::vector<std::uint64_t> hashes, std::size_t reuse = 0,
                    std::optional<std::uint64_t> parent = std::nullopt) {
    const auto result = manager_->process_for_request(g1::OwnerId(owner), use_full(hashes, parent), reuse);
    if (!result.is_ready()) return result;
    const auto table = manager_->block_table(g1::OwnerId(owner));
    std::vector<PageId> pages(table.end() - static_cast<std::ptrdiff_t>(hashes.size() - reuse), table.end());
    std::vector<std::uint64_t> ids(hashes.begin() + static_cast<std::ptrdiff_t>(reuse), hashes.end());
    pool_->fill_pattern(pages, ids);
    manager_->finalize_computed_prefix(g1::OwnerId(owner), 0, table.size() * kBlockSize);
    return result;
  }
  void release(std::uint64_t owner, std::vector<std::uint64_t> leaf_first) {
    manager_->process_for_request(g1::OwnerId(owner), deref_full(std::move(leaf_first)));
  }
  std::vector<KvEvent> host_events_since(std::size_t first) const {
    std::vector<KvEvent> out;
    const auto all = sink_->events();
    for (std::size_t i = first; i < all.size(); ++i) {
      if (all[i].tier == StorageTier::HostPinned) out.push_back(all[i]);
    }
    return out;
  }

  memory::HostRuntime runtime_;
  std::unique_ptr<memory::KvPool> pool_;
  std::shared_ptr<OffloadEngine> engine_;
  std::shared_ptr<RecordingEventSink> sink_ = std::make_shared<RecordingEventSink>();
  std::unique_ptr<g1::G1Manager> manager_;
};

TEST_F(NativeOffload, EvictedLastCopyIsQuarantinedUntilItsCopyCompletes) {
  build(1, 4);
  ASSERT_TRUE(prefill(1, {1}).is_ready());
  release(1, {1});
  EXPECT_EQ(manager_->metrics().inactive_blocks, 1U);
  const G1Acquire blocked = manager_->process_for_request(g1::OwnerId(2), use_full({2}));
  ASSERT_EQ(blocked.kind, G1Acquire::Kind::BlockedOnOffload);
  EXPECT_FALSE(manager_->has_owner(g1::OwnerId(2)));
  EXPECT_FALSE(manager_->is_cached(SequenceHash(1)));  // it left G1: Removed was published
  EXPECT_EQ(manager_->metrics().active_blocks, 1U);
  EXPECT_EQ(manager_->offload_stats().quarantined, 1U);
  EXPECT_EQ(manager_->process_for_request(g1::OwnerId(3), use_full({3})).kind, G1Acquire::Kind::CapacityExhausted);
  ASSERT_NO_THROW(manager_->audit());
  const std::size_t before = sink_->events().size();
  manager_->collect_offloads(true);
  const auto host = host_events_since(before);
  ASSERT_EQ(host.size(), 1U);
  EXPECT_EQ(std::get<KvStored>(host[0].data), g1::testing::stored(std::nullopt, {{1, 101}}));
  EXPECT_EQ(manager_->metrics().active_blocks, 0U);
  EXPECT_TRUE(prefill(2, {2}).is_ready());
  EXPECT_TRUE(manager_->is_host_cached(SequenceHash(1)));
  ASSERT_NO_THROW(manager_->audit());
}

TEST_F(NativeOffload, SwapInRegistersCachedInactiveBlocksThatAReuseFindsWithTheirBytes) {
  build(2, 8);
  ASSERT_TRUE(prefill(1, {1, 2}).is_ready());
  release(1, {2, 1});
  ASSERT_EQ(manager_->process_for_request(g1::OwnerId(2), use_full({5, 6})).kind, G1Acquire::Kind::BlockedOnOffload);
  manager_->collect_offloads(true);
  const auto host = host_events_since(0);
  ASSERT_EQ(host.size(), 2U);  // leaf first: 2 (parent 1), then 1
  EXPECT_EQ(std::get<KvStored>(host[0].data), g1::testing::stored(1, {{2, 102}}));
  ASSERT_TRUE(prefill(2, {5, 6}).is_ready());
  release(2, {6, 5});
  auto start = manager_->try_batch_swap_in(keys({1, 2}), manager_->try_pin_g1_prefix({}));
  if (start.status == SwapInStatus::BlockedOnG1Offload) {
    manager_->collect_offloads(true);
    start = manager_->try_batch_swap_in(keys({1, 2}), manager_->try_pin_g1_prefix({}));
  }
  ASSERT_EQ(start.status, SwapInStatus::Scheduled);
  const std::size_t before = sink_->events().size();
  EXPECT_EQ(manager_->register_completed_swap_in(start.swap_in_id).registered, 2U);
  const auto events = sink_->events();
  ASSERT_EQ(events.size(), before + 1);
  EXPECT_EQ(std::get<KvStored>(events.back().data), g1::testing::stored(std::nullopt, {{1, 101}, {2, 102}}));
  EXPECT_TRUE(manager_->is_cached(SequenceHash(1)) && manager_->is_cached(SequenceHash(2)));
  EXPECT_EQ(manager_->metrics().inactive_blocks, 2U);
  // A request reusing both finds the bytes written before they went to G2.
  ASSERT_TRUE(manager_->process_for_request(g1::OwnerId(3), use_full({1, 2}), 2).is_ready());
  const auto table = manager_->block_table(g1::OwnerId(3));
  EXPECT_TRUE(
      pool_->find_pattern_mismatches(std::vector<PageId>(table.begin(), table.end()), std::vector<std::uint64_t>{1, 2})
          .empty());
  ASSERT_NO_THROW(manager_->audit());
}

TEST_F(NativeOffload, AnEvictedDuplicateIsNotOffloadedWhileAnotherCopyStaysInG1) {
  build(3, 4);
  ASSERT_TRUE(prefill(1, {1}).is_ready());
  ASSERT_TRUE(prefill(2, {1}).is_ready());  // a duplicate copy of 1 (no reuse)
  release(2, {1});                          // the duplicate goes inactive
  ASSERT_TRUE(prefill(3, {7}).is_ready());  // the free page
  const auto result = manager_->process_for_request(g1::OwnerId(4), use_full({8}));
  EXPECT_TRUE(result.is_ready());  // evicting a non-last copy never blocks
  EXPECT_EQ(manager_->offload_stats().tier.used, 0U);
  EXPECT_TRUE(manager_->is_cached(SequenceHash(1)));
  ASSERT_NO_THROW(manager_->audit());
}

TEST_F(NativeOffload, PinnedG1PrefixAndSwapInParentTheRun) {
  build(3, 8);
  ASSERT_TRUE(prefill(1, {1, 2, 3}).is_ready());
  release(1, {3, 2});  // 1 stays active with owner 1
  ASSERT_EQ(manager_->process_for_request(g1::OwnerId(2), use_full({5, 6})).kind, G1Acquire::Kind::BlockedOnOffload);
  manager_->collect_offloads(true);
  ASSERT_TRUE(prefill(2, {5, 6}).is_ready());
  release(2, {6, 5});
  auto pins = manager_->try_pin_g1_prefix(keys({1}));
  ASSERT_TRUE(pins.has_value());
  EXPECT_FALSE(manager_->try_pin_g1_prefix(keys({1, 2})).has_value());
  EXPECT_THROW(
      (void)manager_->try_pin_g1_prefix(std::vector{PositionalLineageHash(SequenceHash(1), SequenceHash(9), 3)}),
      ContractError);  // a lineage key, not a native one
  auto start = manager_->try_batch_swap_in(keys({2, 3}), pins);
  if (start.status == SwapInStatus::BlockedOnG1Offload) {
    manager_->collect_offloads(true);
    start = manager_->try_batch_swap_in(keys({2, 3}), manager_->try_pin_g1_prefix(keys({1})));
  }
  ASSERT_EQ(start.status, SwapInStatus::Scheduled);
  const std::size_t before = sink_->events().size();
  EXPECT_EQ(manager_->register_completed_swap_in(start.swap_in_id).registered, 2U);
  EXPECT_EQ(std::get<KvStored>(sink_->events().at(before).data), g1::testing::stored(1, {{2, 102}, {3, 103}}));
  ASSERT_NO_THROW(manager_->audit());
}

TEST_F(NativeOffload, FaultsInEachDirectionLeaveNothingBehind) {
  build(1, 4);
  ASSERT_TRUE(prefill(1, {1}).is_ready());
  release(1, {1});
  engine_->inject_copy_fault(1);
  ASSERT_EQ(manager_->process_for_request(g1::OwnerId(2), use_full({2})).kind, G1Acquire::Kind::BlockedOnOffload);
  EXPECT_EQ(manager_->collect_offloads(true).failed.size(), 1U);
  EXPECT_FALSE(manager_->is_host_cached(SequenceHash(1)));
  EXPECT_EQ(manager_->offload_stats().quarantined, 0U);
  ASSERT_TRUE(prefill(2, {2}).is_ready());
  release(2, {2});
  ASSERT_EQ(manager_->process_for_request(g1::OwnerId(3), use_full({3})).kind, G1Acquire::Kind::BlockedOnOffload);
  manager_->collect_offloads(true);
  ASSERT_TRUE(manager_->is_host_cached(SequenceHash(2)));
  ASSERT_TRUE(prefill(3, {3}).is_ready());
  release(3, {3});
  auto start = manager_->try_batch_swap_in(keys({2}), manager_->try_pin_g1_prefix({}));
  ASSERT_EQ(start.status, SwapInStatus::BlockedOnG1Offload);
  manager_->collect_offloads(true);
  engine_->inject_copy_fault(1);
  start = manager_->try_batch_swap_in(keys({2}), manager_->try_pin_g1_prefix({}));
  ASSERT_EQ(start.status, SwapInStatus::Scheduled);
  const auto registration = manager_->register_completed_swap_in(start.swap_in_id);
  EXPECT_TRUE(registration.failed);
  EXPECT_FALSE(manager_->is_cached(SequenceHash(2)));
  EXPECT_TRUE(manager_->is_host_cached(SequenceHash(2)));
  EXPECT_EQ(manager_->metrics().active_blocks, 0U);
  ASSERT_NO_THROW(manager_->audit());
}

TEST_F(NativeOffload, WithoutPrefixCachingNothingIsOffloaded) {
  const KvGeometry geometry{.tokens_per_block = kBlockSize};
  pool_ = std::make_unique<memory::KvPool>(runtime_, KvLayout(geometry, PageLayout::PageMajor, 1));
  engine_ = std::make_shared<OffloadEngine>(runtime_, *pool_, OffloadConfig{.host_blocks = 4});
  manager_ = std::make_unique<g1::G1Manager>(
      g1::G1ManagerConfig{.capacity = 1, .block_size = kBlockSize, .enable_prefix_caching = false});
  manager_->attach_offload_engine(engine_);
  ASSERT_TRUE(manager_->process_for_request(g1::OwnerId(1), use_full({1})).is_ready());
  release(1, {1});
  EXPECT_TRUE(manager_->process_for_request(g1::OwnerId(2), use_full({2})).is_ready());
  EXPECT_EQ(manager_->offload_stats().tier.used, 0U);
}

}  // namespace
}  // namespace kvtier::offload
