// The hybrid request cycle `kvtier bench alloc` reports beside the
// single-group ones: it runs the whole stream through two KV cache groups,
// hits the shared half in both, and refuses a stream its pages cannot hold.
#include <gtest/gtest.h>

#include "kvtier/core/errors.hpp"
#include "kvtier/measure/hybrid_cycle.hpp"

namespace kvtier::measure {
namespace {

TEST(HybridCycle, TheSharedHalfIsCachedOnceAndEveryRequestRuns) {
  // 20 prompts of 512 tokens (32 blocks), the first 16 blocks shared, 4 held at once.
  const RequestStream stream = shared_half_stream(20, 512, 16, 4, 1024);
  const AllocatorCycleResult r = measure_hybrid_cycle(stream, full_and_sliding_groups(), 1);
  EXPECT_EQ(r.allocator, "native/hybrid");
  EXPECT_EQ(r.blocks, 20U * 32U);
  EXPECT_GT(r.blocks_per_second, 0.0);
  EXPECT_GT(r.fraction_of_floor, 0.0);
  // Stored events, one per group a request caches in, the first request's in both groups:
  // the shared half is stored once, so fewer than two events per request and group.
  EXPECT_GE(r.events_per_round, 2U);
  EXPECT_LT(r.events_per_round, 20U * 2U * 2U);
}

TEST(HybridCycle, AStreamItsPagesCannotHoldIsRefused) {
  const RequestStream stream = shared_half_stream(20, 512, 16, 4, 40);
  EXPECT_THROW(measure_hybrid_cycle(stream, full_and_sliding_groups(), 1), ConfigError);
}

}  // namespace
}  // namespace kvtier::measure
