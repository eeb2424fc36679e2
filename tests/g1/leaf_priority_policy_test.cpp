// The history-aware inactive pools on leaves (LRU-2, LFU-DA, ARC, S3-FIFO,
// adaptive): only leaves leave, a parent follows its last child with the
// priority it had, a block's history outlives its eviction for a bounded
// while (second sight); then what each policy adds.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "g1/eviction/adaptive_eviction_policy.hpp"
#include "g1/eviction/arc_eviction_policy.hpp"
#include "g1/eviction/lfu_da_eviction_policy.hpp"
#include "g1/eviction/lru2_eviction_policy.hpp"
#include "g1/eviction/s3_fifo_eviction_policy.hpp"
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
  policy.insert(PageId(0), top(1));          // the parent is the older access...
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

TEST(ArcPolicy, SeenOnceLeavesFirstWhileAboveItsTarget) {
  ArcEvictionPolicy policy(8);
  access(policy, 0, top(1), 2);      // seen again: T2, the older access
  policy.insert(PageId(1), top(2));  // seen once: T1
  EXPECT_EQ(policy.target(), 0U);
  EXPECT_EQ(policy.evict(), PageId(1));
  EXPECT_EQ(policy.evict(), PageId(0));
}

TEST(ArcPolicy, AGhostHitMovesTheTarget) {
  ArcEvictionPolicy policy(8);
  policy.insert(PageId(0), top(1));
  ASSERT_EQ(policy.evict(), PageId(0));  // block 1 is a ghost of T1
  policy.insert(PageId(0), top(1));      // recency would have kept it: T1 may grow
  EXPECT_EQ(policy.target(), 1U);
  policy.remove(PageId(0));
  policy.insert(PageId(0), top(1));
  ASSERT_EQ(policy.evict(), PageId(0));  // now a ghost of T2
  policy.insert(PageId(0), top(1));      // frequency would have kept it: T1 shrinks
  EXPECT_EQ(policy.target(), 0U);
}

TEST(S3FifoPolicy, AHitInTheSmallQueueMovesTheBlockToMain) {
  S3FifoEvictionPolicy policy(10);  // the small queue is preferred while it holds >= 1
  policy.insert(PageId(0), top(1));
  policy.insert(PageId(1), top(2));
  policy.remove(PageId(0));
  policy.insert(PageId(0), top(1));      // a hit: frequency 1, still first in line
  EXPECT_EQ(policy.evict(), PageId(1));  // block 1 was spared into main
  EXPECT_EQ(policy.evict(), PageId(0));
}

TEST(S3FifoPolicy, ABlockBackFromTheGhostTableEntersMain) {
  S3FifoEvictionPolicy policy(10);
  policy.insert(PageId(0), top(1));
  ASSERT_EQ(policy.evict(), PageId(0));
  policy.insert(PageId(0), top(1));      // back: main queue, the older entry
  policy.insert(PageId(1), top(2));      // new: small queue
  EXPECT_EQ(policy.evict(), PageId(1));  // the small queue goes first
  EXPECT_EQ(policy.evict(), PageId(0));
}

TEST(S3FifoPolicy, TheMainQueueSparesABlockOnceForEachHit) {
  S3FifoEvictionPolicy policy(100);  // the small queue is preferred only from 10 blocks
  policy.insert(PageId(1), top(2));
  ASSERT_EQ(policy.evict(), PageId(1));
  policy.insert(PageId(0), top(1));
  ASSERT_EQ(policy.evict(), PageId(0));
  policy.insert(PageId(0), top(1));  // both back from the ghost table: main
  policy.remove(PageId(0));
  policy.insert(PageId(0), top(1));  // a hit: frequency 1
  policy.insert(PageId(1), top(2));
  EXPECT_EQ(policy.evict(), PageId(1));  // the older block was spared, behind the newer
  EXPECT_EQ(policy.evict(), PageId(0));
  EXPECT_FALSE(policy.evict().has_value());
}

/// Drives a pool as a G1 would: a resident block is taken back and released
/// (a hit), a new one takes a free page or the victim's.
class PoolDriver {
 public:
  explicit PoolDriver(EvictionPolicy& policy, std::uint32_t pages) : policy_(policy) {
    for (std::uint32_t p = pages; p-- > 0;) free_.push_back(p);
  }
  bool access(std::uint64_t block) {
    if (const auto it = page_of_.find(block); it != page_of_.end()) {
      policy_.remove(PageId(it->second));
      policy_.insert(PageId(it->second), top(block));
      return true;
    }
    if (free_.empty()) {
      const std::uint32_t victim = policy_.evict().value().value();
      std::erase_if(page_of_, [&](const auto& entry) { return entry.second == victim; });
      free_.push_back(victim);
    }
    const std::uint32_t page = free_.back();
    free_.pop_back();
    page_of_[block] = page;
    policy_.insert(PageId(page), top(block));
    return false;
  }

 private:
  EvictionPolicy& policy_;
  std::vector<std::uint32_t> free_;
  std::map<std::uint64_t, std::uint32_t> page_of_;
};

TEST(AdaptivePolicy, TurnsToRecencyWhenOldFrequentBlocksStopPayingBack) {
  constexpr std::uint32_t kPages = 320;
  AdaptiveEvictionPolicy policy(kPages);
  PoolDriver pool(policy, kPages);
  EXPECT_EQ(policy.cap(), 2U);
  for (std::uint64_t b = 0; b < kPages; ++b) pool.access(b);  // seen twice, then never again
  for (std::uint64_t b = 0; b < kPages; ++b) pool.access(b);
  std::size_t hits = 0;
  for (std::uint64_t b = 1000; b < 5000; ++b) {  // each new block is wanted again three accesses later
    pool.access(b);
    if (b >= 1003) hits += pool.access(b - 3) ? 1 : 0;
  }
  EXPECT_EQ(policy.cap(), 1U);
  EXPECT_GT(hits, 3900U);  // under recency every re-access hits
}

}  // namespace
}  // namespace kvtier::g1
