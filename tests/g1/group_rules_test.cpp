// Each KV cache group kind's own rules (docs/spec/model-geometry.md
// sections 3-4): the worked examples H1 (sliding-window hits), H2 (what a
// sliding window frees), H3 (what chunked local attention frees), H6's
// sliding-window hit rounded to the scheduler unit, and Mamba's.
#include <gtest/gtest.h>

#include <vector>

#include "g1/native/groups/chunked_local_rule.hpp"
#include "g1/native/groups/full_attention_rule.hpp"
#include "g1/native/groups/mamba_rule.hpp"
#include "g1/native/groups/sliding_window_rule.hpp"

namespace kvtier::g1 {
namespace {

class Cached final : public CachedBlocks {
 public:
  explicit Cached(std::vector<bool> blocks) : blocks_(std::move(blocks)) {}
  bool cached(std::size_t block) const override { return block < blocks_.size() && blocks_[block]; }
  std::size_t size() const { return blocks_.size(); }

 private:
  std::vector<bool> blocks_;
};

constexpr bool T = true;
constexpr bool F = false;

// H1: bs 2, W 4 — two contiguous cached blocks, or a shorter run from block 0.
TEST(GroupRules, SlidingWindowHitNeedsContiguousBlocksWithinTheWindow) {
  const SlidingWindowRule rule(2, 2, 4);
  const auto hit_blocks = [&](std::vector<bool> blocks) {
    const Cached cached(std::move(blocks));
    return rule.longest_hit(cached, cached.size() * 2) / 2;
  };
  EXPECT_EQ(hit_blocks({F, F, F, F, F, F, F, F, F, F}), 0U);
  EXPECT_EQ(hit_blocks({T}), 1U);
  EXPECT_EQ(hit_blocks({T, F}), 1U);
  EXPECT_EQ(hit_blocks({T, T}), 2U);
  EXPECT_EQ(hit_blocks({T, T, F}), 2U);
  EXPECT_EQ(hit_blocks({T, T, T, F}), 3U);
  EXPECT_EQ(hit_blocks({T, T, F, T, F, F, T, T, F, T, T, T}), 12U);
  EXPECT_EQ(hit_blocks({T, T, F, T, F, F, T, T, F, F, F}), 8U);
  // Every position of a hit but the last two is the null page.
  EXPECT_EQ(rule.first_hit_block(24), 10U);
  EXPECT_EQ(rule.first_hit_block(16), 6U);
  EXPECT_EQ(rule.first_hit_block(4), 0U);
  EXPECT_EQ(rule.first_hit_block(2), 0U);
}

// H2: bs 2, W 4 and a table of 11 blocks.
TEST(GroupRules, SlidingWindowSkipsWhatTheNextTokenNoLongerSees) {
  const SlidingWindowRule rule(2, 2, 4);
  const std::vector<std::pair<std::size_t, std::size_t>> computed_to_nulls{{0, 0}, {4, 0}, {5, 1},
                                                                           {6, 1}, {7, 2}, {11, 4}};
  for (const auto& [computed, nulls] : computed_to_nulls) {
    EXPECT_EQ(rule.skipped_blocks(computed, 11), nulls) << "computed " << computed;
  }
  EXPECT_EQ(rule.skipped_blocks(11, 3), 3U) << "never more than the table holds";
}

// H3: bs 2, C 4.
TEST(GroupRules, ChunkedLocalSkipsEveryChunkBeforeTheCurrentOne) {
  const ChunkedLocalRule rule(2, 2, 4);
  const std::vector<std::pair<std::size_t, std::size_t>> computed_to_nulls{{0, 0}, {4, 2}, {6, 2}, {12, 6}};
  for (const auto& [computed, nulls] : computed_to_nulls) {
    EXPECT_EQ(rule.skipped_blocks(computed, 100), nulls) << "computed " << computed;
  }
}

TEST(GroupRules, ChunkedLocalHitIsNullUpToItsChunkThenALeadingRun) {
  const ChunkedLocalRule rule(2, 2, 4);
  // Blocks 0-1 are chunk 0, 2-3 chunk 1, 4-5 chunk 2. Chunk 2 holds block 4 only.
  const Cached cached({F, F, T, F, T, F});
  EXPECT_EQ(rule.longest_hit(cached, 11), 10U);
  EXPECT_EQ(rule.first_hit_block(10), 4U);
  // A chunk boundary needs nothing before it.
  EXPECT_EQ(rule.longest_hit(Cached({F, F, F, F}), 8), 8U);
  // Within chunk 1 only block 2 is cached: the hit stops at its end.
  EXPECT_EQ(rule.longest_hit(Cached({F, F, T, F}), 7), 6U);
}

// H6: sliding bs 16, W 32, in a manager whose scheduler unit is 32: blocks 5
// and 6 gone, the window alone gives 80 tokens, rounded down to 64.
TEST(GroupRules, SlidingWindowHitLandsOnTheSchedulerUnit) {
  const SlidingWindowRule rule(16, 32, 32);
  EXPECT_EQ(rule.longest_hit(Cached({T, T, T, T, T, F, F}), 96), 64U);
  EXPECT_EQ(rule.longest_hit(Cached({T, T, T, T, T, T, T}), 96), 96U);
  // The last ceil((W - 1) / bs) = 2 blocks of each 32-token segment are cached: both.
  EXPECT_TRUE(rule.caches(4, 96));
  EXPECT_TRUE(rule.caches(5, 96));
  const SlidingWindowRule narrow(16, 64, 16);  // W 16: one block of each 64-token segment
  EXPECT_FALSE(narrow.caches(0, 64));
  EXPECT_FALSE(narrow.caches(2, 64));
  EXPECT_TRUE(narrow.caches(3, 64));
}

// H4's miss: full attention allows 2 blocks, and a window of 2 blocks cannot
// find them contiguous below 32 tokens when block 0 is gone.
TEST(GroupRules, FullAttentionIsTheLeadingRunAndBoundsTheWindow) {
  const FullAttentionRule full(16, 16);
  EXPECT_EQ(full.longest_hit(Cached({T, T, F}), 48), 32U);
  EXPECT_EQ(full.longest_hit(Cached({F, T, T}), 48), 0U);
  const SlidingWindowRule sliding(16, 16, 32);
  EXPECT_EQ(sliding.longest_hit(Cached({F, T, T}), 32), 0U);
  EXPECT_EQ(sliding.longest_hit(Cached({F, T, T}), 48), 48U);
}

TEST(GroupRules, MambaHitsItsLastAlignedStateAndKeepsOnlyTheLive) {
  const MambaRule all(16, 16, MambaMode::All);
  EXPECT_EQ(all.longest_hit(Cached({T, F, T, F}), 64), 48U);
  EXPECT_EQ(all.first_hit_block(48), 2U);
  EXPECT_EQ(all.skipped_blocks(48, 3), 2U);
  EXPECT_EQ(all.skipped_blocks(49, 4), 3U);
  EXPECT_TRUE(all.caches(0, 48));
  const MambaRule align(16, 16, MambaMode::Align);
  EXPECT_EQ(align.skipped_blocks(49, 4), 2U) << "align keeps the previous step's state block";
  EXPECT_TRUE(align.caches(2, 48)) << "the state the schedule landed on";
  EXPECT_FALSE(align.caches(1, 48)) << "no intermediate state";
}

}  // namespace
}  // namespace kvtier::g1
