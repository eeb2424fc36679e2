// One contract for every KVBM inactive pool, then what only Lineage
// (leaves, ghosts, original ticks) and multi-LRU (frequency levels) promise.
#include <gtest/gtest.h>

#include "g1/eviction/adaptive_eviction_policy.hpp"
#include "g1/eviction/arc_eviction_policy.hpp"
#include "g1/eviction/lfu_da_eviction_policy.hpp"
#include "g1/eviction/lineage_eviction_policy.hpp"
#include "g1/eviction/lru2_eviction_policy.hpp"
#include "g1/eviction/lru_eviction_policy.hpp"
#include "g1/eviction/multi_lru_eviction_policy.hpp"
#include "kvtier/core/errors.hpp"

namespace kvtier::g1 {
namespace {

PositionalLineageHash root(std::uint64_t v) { return PositionalLineageHash(SequenceHash(v), std::nullopt, 0); }
PositionalLineageHash child(std::uint64_t v, std::uint64_t parent, std::uint64_t position) {
  return PositionalLineageHash(SequenceHash(v), SequenceHash(parent), position);
}

template <class Policy>
class EvictionPolicyContract : public ::testing::Test {
 protected:
  Policy policy_{16};
};
using Policies = ::testing::Types<LineageEvictionPolicy, LruEvictionPolicy, MultiLruEvictionPolicy, Lru2EvictionPolicy,
                                  LfuDaEvictionPolicy, ArcEvictionPolicy, AdaptiveEvictionPolicy>;
TYPED_TEST_SUITE(EvictionPolicyContract, Policies);

TYPED_TEST(EvictionPolicyContract, EmptyPoolEvictsNothing) {
  EXPECT_EQ(this->policy_.size(), 0U);
  EXPECT_FALSE(this->policy_.evict().has_value());
}

TYPED_TEST(EvictionPolicyContract, UnrelatedBlocksOfEqualFrequencyLeaveInInsertionOrder) {
  for (std::uint32_t page : {5U, 2U, 9U}) this->policy_.insert(PageId(page), root(100 + page));
  EXPECT_EQ(this->policy_.size(), 3U);
  EXPECT_TRUE(this->policy_.contains(PageId(2)));
  EXPECT_EQ(this->policy_.evict(), PageId(5));
  EXPECT_EQ(this->policy_.evict(), PageId(2));
  EXPECT_EQ(this->policy_.evict(), PageId(9));
  EXPECT_FALSE(this->policy_.evict().has_value());
  EXPECT_FALSE(this->policy_.contains(PageId(2)));
}

TYPED_TEST(EvictionPolicyContract, AMatchedBlockIsNeverEvictedAndReturnsAsNewest) {
  for (std::uint32_t page : {1U, 2U, 3U}) this->policy_.insert(PageId(page), root(page));
  this->policy_.remove(PageId(1));
  EXPECT_FALSE(this->policy_.contains(PageId(1)));
  EXPECT_EQ(this->policy_.size(), 2U);
  this->policy_.insert(PageId(1), root(1));
  EXPECT_EQ(this->policy_.evict(), PageId(2));
  EXPECT_EQ(this->policy_.evict(), PageId(3));
  EXPECT_EQ(this->policy_.evict(), PageId(1));
}

TYPED_TEST(EvictionPolicyContract, InsertingAnInactivePageAgainIsAContractError) {
  this->policy_.insert(PageId(1), root(1));
  EXPECT_THROW(this->policy_.insert(PageId(1), root(1)), ContractError);
  EXPECT_THROW(this->policy_.remove(PageId(2)), ContractError);
  EXPECT_EQ(this->policy_.size(), 1U);
}

// Lineage: the P15 graph (docs/semantics.md §7.3) on pages = block numbers.
class LineagePolicy : public ::testing::Test {
 protected:
  // Lineage of P15 (child <- parent): 1<-0, 2<-1, 3<-2, 4<-3, 5<-1, 6<-5.
  static PositionalLineageHash plh(std::uint64_t block) {
    switch (block) {
      case 0:
        return root(0);
      case 1:
        return child(1, 0, 1);
      case 2:
        return child(2, 1, 2);
      case 3:
        return child(3, 2, 3);
      case 4:
        return child(4, 3, 4);
      case 5:
        return child(5, 1, 2);
      default:
        return child(6, 5, 3);
    }
  }
  void insert(std::uint32_t block) { policy_.insert(PageId(block), plh(block)); }
  LineageEvictionPolicy policy_{16};
};

TEST_F(LineagePolicy, OnlyLeavesAreEvictedAndParentsKeepTheirOriginalTick) {
  for (std::uint32_t block : {4U, 3U, 2U, 6U, 5U, 1U, 0U}) insert(block);  // ticks as in P15
  EXPECT_EQ(policy_.size(), 7U);
  EXPECT_EQ(policy_.ghost_count(), 0U);
  policy_.remove(PageId(0));  // matched with children: ghosts keep the chain linked
  policy_.remove(PageId(1));
  policy_.remove(PageId(2));
  EXPECT_EQ(policy_.size(), 4U);
  EXPECT_EQ(policy_.ghost_count(), 3U);
  EXPECT_EQ(policy_.evict(), PageId(4));
  EXPECT_EQ(policy_.evict(), PageId(3));  // a leaf again with its old tick: ahead of 6
  EXPECT_EQ(policy_.evict(), PageId(6));
  EXPECT_EQ(policy_.ghost_count(), 2U);  // ghost 2 pruned once childless
  EXPECT_EQ(policy_.evict(), PageId(5));
  EXPECT_EQ(policy_.ghost_count(), 0U);  // ghosts 1 and 0 pruned upward
  EXPECT_FALSE(policy_.evict().has_value());
}

TEST_F(LineagePolicy, AParentWhoseChildrenAreAllActiveIsALeaf) {
  insert(0);
  insert(1);
  policy_.remove(PageId(1));  // the child became active again
  EXPECT_EQ(policy_.evict(), PageId(0));
}

TEST_F(LineagePolicy, AMissingParentIsAGhostThatTheRealParentFillsWithAFreshTick) {
  insert(2);  // parent 1 still active: ghost
  EXPECT_EQ(policy_.ghost_count(), 1U);
  insert(4);                             // parent 3 still active: ghost (3's own parent unknown until it arrives)
  insert(1);                             // fills ghost 1; it has a child, so it is no leaf
  EXPECT_EQ(policy_.ghost_count(), 2U);  // ghost 3, and ghost 0 for 1's parent
  EXPECT_EQ(policy_.evict(), PageId(2));
  EXPECT_EQ(policy_.evict(), PageId(4));
  EXPECT_EQ(policy_.evict(), PageId(1));
  EXPECT_EQ(policy_.ghost_count(), 0U);
}

TEST_F(LineagePolicy, DuplicateAndCollidingInsertionsAreErrors) {
  insert(1);
  EXPECT_THROW(policy_.insert(PageId(9), plh(1)), ContractError);  // same PLH on another page
  const PositionalLineageHash colliding = child(1, 77, 1);         // same (position, fragment)
  EXPECT_THROW(policy_.check_insertable(std::vector<PositionalLineageHash>{colliding}), ContractError);
  EXPECT_THROW(policy_.insert(PageId(10), colliding), ContractError);
  EXPECT_THROW(policy_.check_insertable(std::vector<PositionalLineageHash>{child(8, 2, 5), child(8, 3, 5)}),
               ContractError);
  EXPECT_EQ(policy_.size(), 1U);
}

TEST(MultiLruPolicy, LevelsFollowTheThresholds) {
  EXPECT_EQ(MultiLruEvictionPolicy::level_for(0), 0U);
  EXPECT_EQ(MultiLruEvictionPolicy::level_for(2), 0U);
  EXPECT_EQ(MultiLruEvictionPolicy::level_for(3), 1U);
  EXPECT_EQ(MultiLruEvictionPolicy::level_for(7), 1U);
  EXPECT_EQ(MultiLruEvictionPolicy::level_for(8), 2U);
  EXPECT_EQ(MultiLruEvictionPolicy::level_for(14), 2U);
  EXPECT_EQ(MultiLruEvictionPolicy::level_for(15), 3U);
}

TEST(MultiLruPolicy, ColderLevelsAreEvictedFirst) {
  MultiLruEvictionPolicy policy(64);
  for (int i = 0; i < 9; ++i) policy.touch(root(1));  // hot
  for (int i = 0; i < 4; ++i) policy.touch(root(2));  // warm
  policy.touch(root(3));                              // cold
  EXPECT_EQ(policy.frequency(root(1)), 9U);
  policy.insert(PageId(1), root(1));
  policy.insert(PageId(2), root(2));
  policy.insert(PageId(3), root(3));
  policy.insert(PageId(4), root(4));
  EXPECT_EQ(policy.evict(), PageId(3));
  EXPECT_EQ(policy.evict(), PageId(4));
  EXPECT_EQ(policy.evict(), PageId(2));
  EXPECT_EQ(policy.evict(), PageId(1));
}

TEST(TinyLfu, CountersSaturateAtFifteenAndAge) {
  TinyLfu sketch(8);  // ages after 80 increments
  for (int i = 0; i < 20; ++i) sketch.increment(root(1));
  EXPECT_EQ(sketch.estimate(root(1)), 15U);
  EXPECT_EQ(sketch.estimate(root(2)), 0U);
  for (int i = 0; i < 60; ++i) sketch.increment(root(2));
  EXPECT_LE(sketch.estimate(root(1)), 7U);  // halved
}

}  // namespace
}  // namespace kvtier::g1
