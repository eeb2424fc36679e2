// The history-aware inactive pools (LRU-2, LFU-DA): only leaves leave, a
// parent follows its last child with the priority it had, a block's history
// outlives its eviction for a bounded while (second sight), and LFU-DA ages.
#include <gtest/gtest.h>

#include "g1/eviction/lfu_da_eviction_policy.hpp"
#include "g1/eviction/lru2_eviction_policy.hpp"
#include "kvtier/core/errors.hpp"

namespace kvtier::g1 {
namespace {

PositionalLineageHash top(std::uint64_t v) { return PositionalLineageHash(SequenceHash(v), std::nullopt, 0); }
PositionalLineageHash below(std::uint64_t v, std::uint64_t parent, std::uint64_t position) {
  return PositionalLineageHash(SequenceHash(v), SequenceHash(parent), position);
}

/// A page inserted and taken back `times` times: that many accesses.
void access(EvictionPolicy& policy, std::uint32_t page, const PositionalLineageHash& plh, int times) {
  for (int i = 0; i < times; ++i) {
    policy.insert(PageId(page), plh);
    if (i + 1 < times) policy.remove(PageId(page));
  }
}

TEST(LeafPriorityPolicy, AnOlderParentWaitsForItsChild) {
  Lru2EvictionPolicy policy(8);
  policy.insert(PageId(0), top(1));         // the parent is the older access...
  policy.insert(PageId(1), below(2, 1, 1));  // ...but its child is inactive
  policy.insert(PageId(2), top(9));
  EXPECT_EQ(policy.leaf_count(), 2U);
  EXPECT_EQ(policy.evict(), PageId(1));
  EXPECT_EQ(policy.evict(), PageId(0));  // a leaf now, with its original (oldest) priority
  EXPECT_EQ(policy.evict(), PageId(2));
  EXPECT_FALSE(policy.evict().has_value());
}

TEST(LeafPriorityPolicy, AParentWithAnActiveChildIsALeaf) {
  LfuDaEvictionPolicy policy(8);
  policy.insert(PageId(1), below(2, 1, 1));
  policy.insert(PageId(0), top(1));
  EXPECT_EQ(policy.leaf_count(), 1U);
  policy.remove(PageId(1));  // the child is matched: its parent may go
  EXPECT_EQ(policy.leaf_count(), 1U);
  EXPECT_EQ(policy.evict(), PageId(0));
}

TEST(LeafPriorityPolicy, ABlockSeenAgainSoonIsKeptOverOneSeenOnce) {
  Lru2EvictionPolicy policy(8);
  policy.insert(PageId(0), top(1));
  ASSERT_EQ(policy.evict(), PageId(0));
  policy.insert(PageId(3), top(1));  // the same block back on another page: its first access is remembered
  policy.insert(PageId(4), top(2));  // newer, but seen once
  EXPECT_EQ(policy.evict(), PageId(4));
  EXPECT_EQ(policy.evict(), PageId(3));
}

TEST(LeafPriorityPolicy, HistoryIsForgottenAfterTheBoundedGhostTable) {
  Lru2EvictionPolicy policy(2);  // two generations of four ghosts
  policy.insert(PageId(0), top(1));
  ASSERT_EQ(policy.evict(), PageId(0));
  for (std::uint64_t other = 100; other < 120; ++other) {
    policy.insert(PageId(0), top(other));
    ASSERT_EQ(policy.evict(), PageId(0));
  }
  policy.insert(PageId(0), top(1));  // a stranger again: plain recency puts it first
  policy.insert(PageId(1), top(2));
  EXPECT_EQ(policy.evict(), PageId(0));
  EXPECT_EQ(policy.evict(), PageId(1));
}

TEST(LeafPriorityPolicy, LfuDaAgesAFrequentBlockOut) {
  LfuDaEvictionPolicy policy(8);
  access(policy, 0, top(1), 3);  // key 0 + 3
  policy.insert(PageId(1), top(2));
  EXPECT_EQ(policy.evict(), PageId(1));  // key 1: the age is 1 now
  policy.insert(PageId(2), top(3));
  EXPECT_EQ(policy.evict(), PageId(2));  // key 2: the age is 2 now
  policy.insert(PageId(3), top(4));      // key 3, as the frequent block's, and newer
  EXPECT_EQ(policy.evict(), PageId(0));
  EXPECT_EQ(policy.evict(), PageId(3));
}

TEST(LeafPriorityPolicy, ACollidingOrRepeatedInsertIsRefusedAndChangesNothing) {
  Lru2EvictionPolicy policy(8);
  policy.insert(PageId(0), top(1));
  const PositionalLineageHash same = top(1);
  EXPECT_TRUE(policy.insert_refusal(std::span(&same, 1)).has_value());
  EXPECT_THROW(policy.insert(PageId(1), top(1)), ContractError);
  EXPECT_THROW(policy.insert(PageId(0), top(5)), ContractError);
  EXPECT_THROW(policy.insert(PageId(8), top(6)), ContractError);
  EXPECT_THROW(policy.remove(PageId(3)), ContractError);
  const PositionalLineageHash pair[] = {top(7), top(7)};
  EXPECT_TRUE(policy.insert_refusal(pair).has_value());
  EXPECT_EQ(policy.size(), 1U);
  EXPECT_FALSE(policy.contains(PageId(1)));
  EXPECT_EQ(policy.evict(), PageId(0));
  EXPECT_GT(policy.metadata_bytes(), 0U);
}

}  // namespace
}  // namespace kvtier::g1
