// get_computed_blocks handed to allocate_slots: G1Manager::computed_prefix and
// process_for_request(owner, use, computed). The Use must behave exactly as
// with the same reuse count — same pages, events, metrics and errors — and
// trust the probe's pages only while the pool's hash index is unchanged.
#include <gtest/gtest.h>

#include <random>

#include "g1/g1_test_support.hpp"
#include "kvtier/core/errors.hpp"

namespace kvtier::g1 {
namespace {

using namespace testing;

G1ManagerConfig config(G1Backend backend, std::uint32_t capacity) {
  return G1ManagerConfig{
      .capacity = capacity, .block_size = 4, .dp_rank = 0, .backend = backend, .enable_prefix_caching = true};
}

const OwnerId kA(1), kB(2), kC(3);

/// A request that used `hashes`, computed them and left: they sit inactive.
void cache_and_leave(G1Manager& manager, OwnerId owner, const std::vector<std::uint64_t>& hashes) {
  ASSERT_TRUE(manager.process_for_request(owner, use_full(hashes)).is_ready());
  manager.finalize_computed_prefix(owner, 0, hashes.size() * 4);
  std::vector<std::uint64_t> leaf_first(hashes.rbegin(), hashes.rend());
  manager.process_for_request(owner, deref_full(leaf_first));
}

std::vector<PageId> table(const G1Manager& manager, OwnerId owner) {
  const auto pages = manager.block_table(owner);
  return {pages.begin(), pages.end()};
}

/// On a native manager of 2 pages: block 1 cached, `use` probed (finding it),
/// then block 1 evicted by another request.
ComputedPrefix probe_then_evict(G1Manager& manager, const UseSignal& use) {
  cache_and_leave(manager, kA, {1});
  ComputedPrefix computed;
  manager.computed_prefix(use.blocks, computed);
  EXPECT_EQ(computed.blocks, 1U);
  cache_and_leave(manager, kC, {7, 8});
  EXPECT_FALSE(manager.is_cached(SequenceHash(1)));
  return computed;
}

TEST(ComputedPrefix, NativeFindsTheResidentRunAndTheUsePinsItsPages) {
  ManagerWithSink m(config(G1Backend::Native, 8));
  cache_and_leave(m.manager, kA, {1, 2, 3});
  ComputedPrefix computed;
  const UseSignal use = use_full({1, 2, 9, 3});  // 3 is resident, but after a miss: not in the run
  m.manager.computed_prefix(use.blocks, computed);
  ASSERT_EQ(computed.blocks, 2U);
  ASSERT_EQ(computed.pages.size(), 2U);

  ManagerWithSink counted(config(G1Backend::Native, 8));
  cache_and_leave(counted.manager, kA, {1, 2, 3});
  EXPECT_EQ(m.manager.process_for_request(kB, use, computed), G1Acquire::ready(4));
  EXPECT_EQ(counted.manager.process_for_request(kB, use, 2), G1Acquire::ready(4));
  EXPECT_EQ(table(m.manager, kB), table(counted.manager, kB));
  const std::vector<PageId> pages = table(m.manager, kB);
  EXPECT_EQ(std::vector<PageId>(pages.begin(), pages.begin() + 2), computed.pages);
  EXPECT_EQ(m.data(), counted.data());
  EXPECT_EQ(m.manager.metrics().active_blocks, counted.manager.metrics().active_blocks);
  m.manager.audit();
}

TEST(ComputedPrefix, AStaleProbeIsLookedUpAgain) {
  // Between the probe and the Use, block 1's only copy is evicted and cached
  // again on another page: the Use takes the page a lookup gives now.
  ManagerWithSink m(config(G1Backend::Native, 2));
  const UseSignal use = use_full({1, 5});
  const ComputedPrefix computed = probe_then_evict(m.manager, use);
  cache_and_leave(m.manager, kC, {1});  // back, on the LRU's other page
  ASSERT_TRUE(m.manager.is_cached(SequenceHash(1)));

  EXPECT_EQ(m.manager.process_for_request(kB, use, computed), G1Acquire::ready(2));
  const PageId now = m.manager.block_table(kB)[0];
  ComputedPrefix again;  // the page a lookup gives now
  m.manager.computed_prefix(use_full({1}).blocks, again);
  EXPECT_EQ(again.pages, std::vector<PageId>{now});
  m.manager.audit();
}

TEST(ComputedPrefix, AProbedBlockThatLeftIsRefusedAndNothingChanges) {
  ManagerWithSink m(config(G1Backend::Native, 2));
  const UseSignal use = use_full({1, 5});
  const ComputedPrefix computed = probe_then_evict(m.manager, use);
  const auto events = m.data().size();
  const G1Metrics before = m.manager.metrics();
  EXPECT_THROW(m.manager.process_for_request(kB, use, computed), ContractError);
  EXPECT_FALSE(m.manager.has_owner(kB));
  EXPECT_EQ(m.data().size(), events);
  EXPECT_EQ(m.manager.metrics().inactive_blocks, before.inactive_blocks);
  m.manager.audit();
}

TEST(ComputedPrefix, PagesThatDoNotHoldTheBlocksAreRefusedAndNothingChanges) {
  ManagerWithSink m(config(G1Backend::Native, 4));
  cache_and_leave(m.manager, kA, {1, 2});
  ComputedPrefix computed;
  const UseSignal use = use_full({1, 2});
  m.manager.computed_prefix(use.blocks, computed);
  std::swap(computed.pages[0], computed.pages[1]);  // a caller's mix-up, index unchanged
  const G1Metrics before = m.manager.metrics();
  EXPECT_THROW(m.manager.process_for_request(kB, use, computed), ContractError);
  EXPECT_FALSE(m.manager.has_owner(kB));
  EXPECT_EQ(m.manager.metrics().inactive_blocks, before.inactive_blocks);
  m.manager.audit();
  // A reuse the Use cannot take is refused as the count is.
  computed.blocks = 3;
  EXPECT_THROW(m.manager.process_for_request(kB, use, computed), ContractError);
}

TEST(ComputedPrefix, KvbmCountsTheRunAndKeepsNoPages) {
  G1Manager manager(config(G1Backend::Kvbm, 8));
  cache_and_leave(manager, kA, {1, 2, 3});
  ComputedPrefix computed;
  computed.pages.assign(3, PageId(0));  // what a previous probe left is cleared
  manager.computed_prefix(use_full({1, 2, 4}).blocks, computed);
  EXPECT_EQ(computed.blocks, 2U);
  EXPECT_TRUE(computed.pages.empty());
  EXPECT_EQ(manager.process_for_request(kB, use_full({1, 2, 4}), computed), G1Acquire::ready(3));
  EXPECT_EQ(manager.metrics().active_blocks, 3U);
  manager.audit();
}

TEST(ComputedPrefix, RandomStreamsMatchTheReuseCountStepByStep) {
  // Requests drawn from a few shared prompts through two native managers:
  // one handed each probe, one the probe's length. Tables and events agree.
  for (std::uint32_t seed = 1; seed <= 8; ++seed) {
    std::mt19937 rng(seed);
    ManagerWithSink handed(config(G1Backend::Native, 24));
    ManagerWithSink counted(config(G1Backend::Native, 24));
    std::vector<std::pair<OwnerId, std::vector<std::uint64_t>>> live;
    ComputedPrefix computed;
    for (std::uint64_t r = 1; r <= 200; ++r) {
      if (live.size() == 3) {
        auto [owner, hashes] = live.front();
        live.erase(live.begin());
        const DerefSignal deref = deref_full({hashes.rbegin(), hashes.rend()});
        handed.manager.process_for_request(owner, deref);
        counted.manager.process_for_request(owner, deref);
      }
      const std::uint64_t prompt = rng() % 4;
      const std::size_t length = 1 + rng() % 6;
      std::vector<std::uint64_t> hashes;
      for (std::size_t i = 0; i < length; ++i) hashes.push_back(prompt * 100 + i + 1);
      const UseSignal use = use_full(hashes);
      handed.manager.computed_prefix(use.blocks, computed);
      const OwnerId owner(r);
      const G1Acquire a = handed.manager.process_for_request(owner, use, computed);
      const G1Acquire b = counted.manager.process_for_request(owner, use, computed.blocks);
      ASSERT_EQ(a, b) << "seed " << seed << " request " << r;
      if (!a.is_ready()) continue;
      handed.manager.finalize_computed_prefix(owner, 0, length * 4);
      counted.manager.finalize_computed_prefix(owner, 0, length * 4);
      ASSERT_EQ(table(handed.manager, owner), table(counted.manager, owner)) << "seed " << seed << " request " << r;
      live.emplace_back(owner, hashes);
    }
    EXPECT_EQ(handed.data(), counted.data()) << "seed " << seed;
    handed.manager.audit();
  }
}

}  // namespace
}  // namespace kvtier::g1
