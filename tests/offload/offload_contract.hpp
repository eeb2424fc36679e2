#pragma once
// The offload contract (docs/semantics.md §5.2–5.5, docs/offload.md), written
// once and instantiated per runtime (DESIGN.md rule 3): the KVBM manager over
// a real G1 KvPool with an OffloadEngine, checking decisions, events and bytes.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "g1/g1_test_support.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/memory/kv_pool.hpp"
#include "kvtier/offload/offload_engine.hpp"

namespace kvtier::offload::testing {

using g1::G1Acquire;
using g1::SwapInStatus;
using g1::testing::deref_full;

/// A Use of a chain of full blocks, PLHs at their real positions (local = hash + 100).
inline UseSignal use_chain(std::vector<std::uint64_t> hashes, std::size_t first_position = 0,
                           std::optional<std::uint64_t> parent = std::nullopt) {
  UseSignal use;
  std::optional<SequenceHash> previous;
  if (parent) previous = SequenceHash(*parent);
  for (std::size_t i = 0; i < hashes.size(); ++i) {
    use.blocks.push_back(UniqueBlock::full(SequenceHash(hashes[i])));
    use.local_hashes.emplace_back(hashes[i] + 100);
    use.plhs.emplace_back(SequenceHash(hashes[i]), previous, first_position + i);
    previous = SequenceHash(hashes[i]);
  }
  if (parent) use.parent = UniqueBlock::full(SequenceHash(*parent));
  return use;
}

inline std::vector<PositionalLineageHash> chain_plhs(std::vector<std::uint64_t> hashes, std::size_t first_position = 0,
                                                     std::optional<std::uint64_t> parent = std::nullopt) {
  return use_chain(std::move(hashes), first_position, parent).plhs;
}

template <class Traits>
class OffloadContract : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* reason = Traits::unavailable()) GTEST_SKIP() << reason;
    runtime_ = Traits::make();
  }

  /// A KVBM manager with `capacity` G1 pages and an engine of `host_blocks`.
  void build(std::uint32_t capacity, std::uint32_t host_blocks, OffloadConfig config = {}) {
    const KvGeometry geometry{
        .layers = 2, .kv_heads = 2, .head_dim = 16, .dtype = KvDtype::Bf16, .tokens_per_block = 4};
    g1_pool_ = std::make_unique<memory::KvPool>(*runtime_, KvLayout(geometry, PageLayout::LayerMajor, capacity));
    config.host_blocks = host_blocks;
    engine_ = std::make_shared<OffloadEngine>(*runtime_, *g1_pool_, config);
    sink_ = std::make_shared<RecordingEventSink>();
    manager_ = std::make_unique<g1::G1Manager>(
        g1::G1ManagerConfig{.capacity = capacity, .block_size = 4, .backend = g1::G1Backend::Kvbm},
        std::vector<std::shared_ptr<KvEventSink>>{sink_});
    manager_->attach_offload_engine(engine_);
  }

  g1::G1Acquire use(std::uint64_t owner, const UseSignal& signal) {
    const auto result = manager_->process_for_request(g1::OwnerId(owner), signal);
    if (result.is_ready()) {  // every block written gets its pattern, as a prefill would
      const auto table = manager_->block_table(g1::OwnerId(owner));
      const auto blocks = manager_->owned_blocks(g1::OwnerId(owner));
      std::vector<PageId> pages(table.end() - static_cast<std::ptrdiff_t>(signal.blocks.size()), table.end());
      std::vector<std::uint64_t> identities;
      for (auto it = blocks.end() - static_cast<std::ptrdiff_t>(signal.blocks.size()); it != blocks.end(); ++it) {
        identities.push_back(g1::testing::block_identity(*it));
      }
      g1_pool_->fill_pattern(pages, identities);
    }
    return result;
  }
  void deref(std::uint64_t owner, std::vector<std::uint64_t> hashes_leaf_first) {
    manager_->process_for_request(g1::OwnerId(owner), deref_full(std::move(hashes_leaf_first)));
  }
  /// The pages of `owner` hold the patterns of their blocks.
  void expect_owner_bytes(std::uint64_t owner) {
    const auto table = manager_->block_table(g1::OwnerId(owner));
    const auto blocks = manager_->owned_blocks(g1::OwnerId(owner));
    std::vector<PageId> pages(table.begin(), table.end());
    std::vector<std::uint64_t> identities;
    for (const UniqueBlock& b : blocks) identities.push_back(g1::testing::block_identity(b));
    EXPECT_TRUE(g1_pool_->find_pattern_mismatches(pages, identities).empty());
  }
  /// The chain `hashes` (owner `owner`, written, released) is pushed to G2 by
  /// `evictor` taking its pages; the evictor then holds `evicted` in G1, released
  /// too when `release_evictor` (so its blocks are inactive).
  void push_to_g2(std::uint64_t owner, std::vector<std::uint64_t> hashes, std::uint64_t evictor,
                  std::vector<std::uint64_t> evicted, bool release_evictor = true) {
    ASSERT_TRUE(use(owner, use_chain(hashes)).is_ready());
    deref(owner, std::vector<std::uint64_t>(hashes.rbegin(), hashes.rend()));
    ASSERT_EQ(use(evictor, use_chain(evicted)).kind, G1Acquire::Kind::BlockedOnOffload);
    manager_->collect_offloads(true);
    ASSERT_TRUE(use(evictor, use_chain(evicted)).is_ready());
    if (release_evictor) deref(evictor, std::vector<std::uint64_t>(evicted.rbegin(), evicted.rend()));
  }
  /// try_batch_swap_in after a G1 prefix pin, waiting once for the swap-outs
  /// that make room in G1.
  g1::SwapInStart swap_in(std::span<const PositionalLineageHash> plhs,
                          std::span<const PositionalLineageHash> prefix = {}) {
    auto start = manager_->try_batch_swap_in(plhs, manager_->try_pin_g1_prefix(prefix));
    if (start.status != SwapInStatus::BlockedOnG1Offload) return start;
    manager_->collect_offloads(true);
    return manager_->try_batch_swap_in(plhs, manager_->try_pin_g1_prefix(prefix));
  }
  std::vector<KvEvent> events_since(std::size_t first) const {
    const auto all = sink_->events();
    return std::vector<KvEvent>(all.begin() + static_cast<std::ptrdiff_t>(first), all.end());
  }
  std::size_t event_count() const { return sink_->events().size(); }

  std::unique_ptr<memory::Runtime> runtime_;
  std::unique_ptr<memory::KvPool> g1_pool_;
  std::shared_ptr<OffloadEngine> engine_;
  std::shared_ptr<RecordingEventSink> sink_;
  std::unique_ptr<g1::G1Manager> manager_;
};

TYPED_TEST_SUITE_P(OffloadContract);

// P19: cap 1; the evicted registered block's page stays active until its copy ends.
TYPED_TEST_P(OffloadContract, SourceSlotIsQuarantinedUntilItsCopyCompletes) {
  this->build(1, 4);
  ASSERT_TRUE(this->use(1, use_chain({1})).is_ready());
  this->deref(1, {1});
  EXPECT_EQ(this->manager_->metrics().active_blocks, 0U);
  EXPECT_EQ(this->manager_->metrics().inactive_blocks, 1U);
  const G1Acquire blocked = this->use(2, use_chain({2}));
  ASSERT_EQ(blocked.kind, G1Acquire::Kind::BlockedOnOffload);
  EXPECT_NE(blocked.offload_id, 0U);
  EXPECT_EQ(this->manager_->metrics().active_blocks, 1U);   // the quarantined source
  EXPECT_FALSE(this->manager_->has_owner(g1::OwnerId(2)));  // nothing committed
  EXPECT_TRUE(this->manager_->earliest_offload_deadline().has_value());
  EXPECT_EQ(this->manager_->offload_stats().quarantined, 1U);
  EXPECT_NO_THROW(this->manager_->audit());
  const auto progress = this->manager_->collect_offloads(true);
  EXPECT_EQ(progress.completed, std::vector<std::uint64_t>{blocked.offload_id});
  EXPECT_EQ(this->manager_->metrics().active_blocks, 0U);
  EXPECT_FALSE(this->manager_->earliest_offload_deadline().has_value());
  EXPECT_TRUE(this->use(2, use_chain({2})).is_ready());
  EXPECT_EQ(this->manager_->metrics().active_blocks, 1U);
  EXPECT_TRUE(this->manager_->is_host_cached(SequenceHash(1)));
  EXPECT_NO_THROW(this->manager_->audit());
}

TYPED_TEST_P(OffloadContract, QuarantinedSourceIsNeverHandedOut) {
  this->build(1, 4);
  ASSERT_TRUE(this->use(1, use_chain({1})).is_ready());
  this->deref(1, {1});
  ASSERT_EQ(this->use(2, use_chain({2})).kind, G1Acquire::Kind::BlockedOnOffload);
  // Before anything is collected the only page is still read by the copy.
  EXPECT_EQ(this->use(3, use_chain({3})).kind, G1Acquire::Kind::CapacityExhausted);
  EXPECT_FALSE(this->manager_->reserve_decode_blocks(1).has_value());
  EXPECT_EQ(this->manager_->metrics().active_blocks, 1U);
}

TYPED_TEST_P(OffloadContract, HostPinnedStoredCarriesTheG1ParentAndEvictionFromG2IsRemoved) {
  this->build(2, 2);
  ASSERT_TRUE(this->use(1, use_chain({10, 11})).is_ready());
  this->deref(1, {11, 10});
  const std::size_t before = this->event_count();
  ASSERT_EQ(this->use(2, use_chain({20, 21})).kind, G1Acquire::Kind::BlockedOnOffload);
  this->manager_->collect_offloads(true);
  std::vector<KvEvent> host;
  for (const KvEvent& e : this->events_since(before)) {
    if (e.tier == StorageTier::HostPinned) host.push_back(e);
  }
  ASSERT_EQ(host.size(), 2U);  // one Stored per block, in batch order
  std::vector<std::uint64_t> stored_hashes;
  for (const KvEvent& e : host) {
    const auto& s = std::get<KvStored>(e.data);
    ASSERT_EQ(s.blocks.size(), 1U);
    stored_hashes.push_back(s.blocks[0].hash.value());
    if (s.blocks[0].hash.value() == 11) {
      EXPECT_EQ(s.parent, SequenceHash(10));
      EXPECT_EQ(s.blocks[0].local, LocalBlockHash(111));
    } else {
      EXPECT_FALSE(s.parent.has_value());
    }
  }
  std::sort(stored_hashes.begin(), stored_hashes.end());
  EXPECT_EQ(stored_hashes, (std::vector<std::uint64_t>{10, 11}));
  // G2 holds two blocks; two more evictions make room by evicting from G2.
  ASSERT_TRUE(this->use(2, use_chain({20, 21})).is_ready());
  this->deref(2, {21, 20});
  const std::size_t mark = this->event_count();
  ASSERT_EQ(this->use(3, use_chain({30, 31})).kind, G1Acquire::Kind::BlockedOnOffload);
  std::size_t removed = 0;
  for (const KvEvent& e : this->events_since(mark)) {
    if (e.tier == StorageTier::HostPinned && std::holds_alternative<KvRemoved>(e.data)) {
      removed += std::get<KvRemoved>(e.data).hashes.size();
    }
  }
  EXPECT_EQ(removed, 2U);
  this->manager_->collect_offloads(true);
  EXPECT_TRUE(this->manager_->is_host_cached(SequenceHash(20)));
  EXPECT_FALSE(this->manager_->is_host_cached(SequenceHash(10)));
}

TYPED_TEST_P(OffloadContract, SwapInRestoresTheBytesAndRegistersInactiveBlocksWithTheirParent) {
  this->build(3, 8);
  this->push_to_g2(1, {1, 2, 3}, 2, {7, 8, 9});  // G1: 7, 8, 9 inactive; G2: 1, 2, 3
  ASSERT_TRUE(this->manager_->try_pin_g1_prefix({}).has_value());
  const auto plhs = chain_plhs({1, 2, 3});
  const auto start = this->swap_in(plhs);  // the whole chain, no G1 prefix
  ASSERT_EQ(start.status, SwapInStatus::Scheduled);
  EXPECT_EQ(start.count, 3U);
  const std::size_t before = this->event_count();
  const auto registration = this->manager_->register_completed_swap_in(start.swap_in_id);
  EXPECT_FALSE(registration.failed);
  EXPECT_EQ(registration.registered, 3U);
  const auto events = this->events_since(before);
  ASSERT_EQ(events.size(), 1U);
  EXPECT_EQ(events[0].tier, StorageTier::Device);
  EXPECT_EQ(std::get<KvStored>(events[0].data), g1::testing::stored(std::nullopt, {{1, 101}, {2, 102}, {3, 103}}));
  EXPECT_EQ(this->manager_->metrics().inactive_blocks, 3U);
  // The next Use finds inactive hits (no second Stored) and the bytes written long ago.
  const std::size_t mark = this->event_count();
  ASSERT_TRUE(this->manager_->process_for_request(g1::OwnerId(3), use_chain({1, 2, 3})).is_ready());
  for (const KvEvent& e : this->events_since(mark)) EXPECT_FALSE(std::holds_alternative<KvStored>(e.data));
  this->expect_owner_bytes(3);
  EXPECT_NO_THROW(this->manager_->audit());
}

TYPED_TEST_P(OffloadContract, SwapInAfterAPinnedG1PrefixParentsTheRunOnThePrefix) {
  this->build(3, 8);
  ASSERT_TRUE(this->use(1, use_chain({1, 2, 3})).is_ready());
  this->deref(1, {3, 2, 1});
  // Block 1 is reused at once; 2 and 3 (least recent under Lineage: the leaves) go to G2.
  ASSERT_TRUE(this->use(2, use_chain({1})).is_ready());
  const G1Acquire blocked = this->use(3, use_chain({5, 6}));
  ASSERT_EQ(blocked.kind, G1Acquire::Kind::BlockedOnOffload);
  this->manager_->collect_offloads(true);
  ASSERT_TRUE(this->manager_->is_host_cached(SequenceHash(2)) && this->manager_->is_host_cached(SequenceHash(3)));
  ASSERT_TRUE(this->use(3, use_chain({5, 6})).is_ready());
  this->deref(3, {6, 5});
  const auto all = chain_plhs({1, 2, 3});
  auto pins = this->manager_->try_pin_g1_prefix(std::span(all).first(1));
  ASSERT_TRUE(pins.has_value());
  EXPECT_EQ(pins->blocks, 1U);
  this->manager_->release_g1_prefix_pins(std::move(*pins));
  const auto start = this->swap_in(std::span(all).subspan(1), std::span(all).first(1));
  ASSERT_EQ(start.status, SwapInStatus::Scheduled);
  const std::size_t before = this->event_count();
  EXPECT_EQ(this->manager_->register_completed_swap_in(start.swap_in_id).registered, 2U);
  const auto events = this->events_since(before);
  ASSERT_EQ(events.size(), 1U);
  EXPECT_EQ(std::get<KvStored>(events[0].data), g1::testing::stored(1, {{2, 102}, {3, 103}}));
  this->deref(2, {1});
  ASSERT_TRUE(this->manager_->process_for_request(g1::OwnerId(4), use_chain({1, 2, 3})).is_ready());
  this->expect_owner_bytes(4);
  EXPECT_NO_THROW(this->manager_->audit());
}

TYPED_TEST_P(OffloadContract, EverythingPresentInG2IsARetryThatNeverBlocks) {
  this->build(1, 4);
  this->push_to_g2(1, {1}, 2, {2});
  // Swap 1 back in (evicting 2 goes to G2 first), then evict 1 again: G2 has it.
  const auto start = this->swap_in(chain_plhs({1}));
  ASSERT_EQ(start.status, SwapInStatus::Scheduled);
  ASSERT_EQ(this->manager_->register_completed_swap_in(start.swap_in_id).registered, 1U);
  const auto result = this->use(3, use_chain({3}));
  EXPECT_TRUE(result.is_ready());  // the victim (1) is in G2 already: filtered, no copy, no quarantine
  EXPECT_EQ(this->manager_->offload_stats().quarantined, 0U);
  EXPECT_EQ(this->manager_->offload_stats().tier.in_flight, 0U);
}

TYPED_TEST_P(OffloadContract, VictimsWithNoRoomInG2AreDroppedAndNeverBlock) {
  this->build(1, 1);
  this->push_to_g2(1, {1}, 2, {2});
  // Swapping 1 in evicts 2 from G1, and G2's only page is pinned by that very
  // swap-in: 2 has no room, is dropped, and the swap-in does not block.
  const auto start = this->manager_->try_batch_swap_in(chain_plhs({1}), this->manager_->try_pin_g1_prefix({}));
  ASSERT_EQ(start.status, SwapInStatus::Scheduled);
  EXPECT_FALSE(this->manager_->is_host_cached(SequenceHash(2)));
  EXPECT_EQ(this->manager_->offload_stats().quarantined, 0U);
  EXPECT_EQ(this->manager_->register_completed_swap_in(start.swap_in_id).registered, 1U);
  EXPECT_TRUE(this->manager_->is_host_cached(SequenceHash(1)));
  EXPECT_NO_THROW(this->manager_->audit());
}

TYPED_TEST_P(OffloadContract, CancelledSwapInReleasesItsPagesAfterTheCopyStopped) {
  this->build(2, 4);
  ASSERT_TRUE(this->use(2, use_chain({2})).is_ready());  // stays active
  this->push_to_g2(1, {1}, 3, {3});                      // G1: 2 active, 3 inactive; 1 in G2
  const auto start = this->swap_in(chain_plhs({1}));
  ASSERT_EQ(start.status, SwapInStatus::Scheduled);
  EXPECT_EQ(this->manager_->metrics().active_blocks, 2U);  // owner 2 and the destination
  EXPECT_TRUE(this->manager_->cancel_swap_in(start.swap_in_id));
  EXPECT_FALSE(this->manager_->cancel_swap_in(start.swap_in_id));
  this->manager_->collect_offloads(true);
  EXPECT_EQ(this->manager_->offload_stats().swap_ins, 0U);
  EXPECT_EQ(this->manager_->metrics().active_blocks, 1U);
  EXPECT_THROW(this->manager_->register_completed_swap_in(start.swap_in_id), ContractError);
  EXPECT_TRUE(this->manager_->is_host_cached(SequenceHash(1)));  // G2 keeps its copy
  EXPECT_NO_THROW(this->manager_->audit());
}

TYPED_TEST_P(OffloadContract, MissingG1PrefixPinsNothingAndNoHitsReleasesPins) {
  this->build(2, 4);
  ASSERT_TRUE(this->use(1, use_chain({1})).is_ready());
  EXPECT_FALSE(this->manager_->try_pin_g1_prefix(chain_plhs({1, 2})).has_value());
  auto pins = this->manager_->try_pin_g1_prefix(chain_plhs({1}));
  ASSERT_TRUE(pins.has_value());
  this->deref(1, {1});
  EXPECT_EQ(this->manager_->metrics().inactive_blocks, 0U);  // pinned: out of the inactive pool
  const auto start = this->manager_->try_batch_swap_in(chain_plhs({2}, 1, 1), pins);
  EXPECT_EQ(start.status, SwapInStatus::NoHits);
  EXPECT_EQ(this->manager_->metrics().inactive_blocks, 1U);  // the pins went with the answer
  EXPECT_NO_THROW(this->manager_->audit());
}

REGISTER_TYPED_TEST_SUITE_P(OffloadContract, SourceSlotIsQuarantinedUntilItsCopyCompletes,
                            QuarantinedSourceIsNeverHandedOut,
                            HostPinnedStoredCarriesTheG1ParentAndEvictionFromG2IsRemoved,
                            SwapInRestoresTheBytesAndRegistersInactiveBlocksWithTheirParent,
                            SwapInAfterAPinnedG1PrefixParentsTheRunOnThePrefix,
                            EverythingPresentInG2IsARetryThatNeverBlocks, VictimsWithNoRoomInG2AreDroppedAndNeverBlock,
                            CancelledSwapInReleasesItsPagesAfterTheCopyStopped,
                            MissingG1PrefixPinsNothingAndNoHitsReleasesPins);

}  // namespace kvtier::offload::testing
