// The per-tier block counts every front door's metrics take from KV events.
#include <gtest/gtest.h>

#include "kvtier/metrics/tier_event_counter.hpp"

namespace kvtier::metrics {
namespace {

KvEvent stored(StorageTier tier, std::size_t blocks) {
  KvStored data;
  for (std::size_t i = 0; i < blocks; ++i)
    data.blocks.push_back(StoredBlock{.hash = SequenceHash(i + 1), .local = LocalBlockHash(0)});
  return KvEvent{.id = 0, .dp_rank = 0, .tier = tier, .data = data};
}

KvEvent removed(StorageTier tier, std::size_t blocks) {
  KvRemoved data;
  for (std::size_t i = 0; i < blocks; ++i) data.hashes.push_back(SequenceHash(i + 1));
  return KvEvent{.id = 0, .dp_rank = 0, .tier = tier, .data = data};
}

TEST(TierEventCounter, CountsBlocksNotEventsPerTier) {
  TierEventCounter counter;
  counter.publish(stored(StorageTier::Device, 3));
  counter.publish(stored(StorageTier::Device, 2));
  counter.publish(removed(StorageTier::Device, 4));
  counter.publish(stored(StorageTier::HostPinned, 7));
  counter.publish(removed(StorageTier::HostPinned, 1));
  KvMetrics m;
  counter.add_to(m);
  EXPECT_EQ(m.tier(Tier::G1).stored_blocks, 5U);
  EXPECT_EQ(m.tier(Tier::G1).evicted_blocks, 4U);
  EXPECT_EQ(m.tier(Tier::G2).stored_blocks, 7U);
  EXPECT_EQ(m.tier(Tier::G2).evicted_blocks, 1U);
}

TEST(KvMetrics, AMissAtATierIsAMissAtEveryTierAboveIt) {
  KvMetrics m;
  m.query_blocks = 100;
  m.tier(Tier::G1).hit_blocks = 60;
  m.tier(Tier::G2).hit_blocks = 25;
  EXPECT_EQ(m.miss_blocks(Tier::G1), 40U);
  EXPECT_EQ(m.miss_blocks(Tier::G2), 15U);
  m.query_blocks = 10;  // counts read at different moments never wrap
  EXPECT_EQ(m.miss_blocks(Tier::G2), 0U);
}

}  // namespace
}  // namespace kvtier::metrics
