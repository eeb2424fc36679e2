// kvtier's leaf-first orders over an engine's chunk slots (what vLLM's CPU
// tier calls through kvtier.vllm): uses apart from evictability, leaf first
// by the chains the engine gives, evictions of exactly n or none, spared and
// pinned chunks never victims, and bad calls that change nothing.
#include "kvtier/g1/chunk_eviction.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "kvtier/core/errors.hpp"

namespace kvtier::g1 {
namespace {

using Slots = std::vector<std::uint32_t>;

ChunkKey k(std::uint64_t n) { return {0, n}; }
const std::optional<ChunkKey> kRoot = std::nullopt;

/// Slots first_slot.. hold one chain (keys first_key+i, parent the one before), all evictable.
void store_chain(ChunkEviction& order, std::uint32_t first_slot, std::uint64_t first_key, std::uint32_t n) {
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::optional<ChunkKey> parent = i == 0 ? kRoot : std::optional<ChunkKey>(k(first_key + i - 1));
    order.stored(first_slot + i, k(first_key + i), parent);
  }
  for (std::uint32_t i = 0; i < n; ++i) order.evictable(first_slot + i);
}

std::vector<std::uint8_t> flags(std::size_t n, std::uint8_t value) { return std::vector<std::uint8_t>(n, value); }

TEST(ChunkEviction, OnlyLeavesLeaveAndAPinnedChildLeavesItsParentALeaf) {
  for (const EvictionBackend order : {EvictionBackend::Lru2, EvictionBackend::LfuDa, EvictionBackend::Arc,
                                      EvictionBackend::S3Fifo, EvictionBackend::Adaptive}) {
    SCOPED_TRACE(eviction_backend_name(order));
    ChunkEviction eviction(order, 8);
    store_chain(eviction, 0, 100, 3);  // 100 <- 101 <- 102
    eviction.pinned(2);                // a load reads the tail
    EXPECT_EQ(eviction.evict(1, {}), Slots{1});
    EXPECT_EQ(eviction.evict(1, {}), Slots{0});
    EXPECT_FALSE(eviction.evict(1, {}).has_value());
    eviction.evictable(2);
    EXPECT_EQ(eviction.evict(1, {}), Slots{2});
    EXPECT_EQ(eviction.evictable_count(), 0U);
  }
}

TEST(ChunkEviction, AllOrNothingAndNeverASparedChunk) {
  ChunkEviction eviction(EvictionBackend::Adaptive, 8);
  store_chain(eviction, 0, 100, 2);
  store_chain(eviction, 2, 200, 2);
  const Slots spared{1, 3};
  EXPECT_FALSE(eviction.evict(3, spared).has_value());
  EXPECT_EQ(eviction.evictable_count(), 4U);
  // The spared tails step aside: their parents become leaves for this choice.
  const auto victims = eviction.evict(2, spared);
  ASSERT_TRUE(victims.has_value());
  EXPECT_EQ(*victims, (Slots{0, 2}));
  EXPECT_TRUE(eviction.is_evictable(1) && eviction.is_evictable(3));
  EXPECT_EQ(eviction.evict(2, {}), (Slots{1, 3}));
}

TEST(ChunkEviction, AReusedChunkOutranksNewerChunksSeenOnceAndARenewalIsNoUse) {
  ChunkEviction eviction(EvictionBackend::Lru2, 8);
  eviction.stored(0, k(1), kRoot);
  eviction.stored(1, k(2), kRoot);
  const Slots both{0, 1};
  eviction.accessed(both, std::vector<std::uint8_t>{1, 0});  // slot 0 reused, slot 1 only renewed
  eviction.stored(2, k(3), kRoot);
  for (std::uint32_t slot = 0; slot < 3; ++slot) eviction.evictable(slot);
  EXPECT_EQ(eviction.evict(3, {}), (Slots{1, 2, 0}));
}

TEST(ChunkEviction, AKeyEvictedAndStoredAgainIsRecalledButARemovedOneIsForgotten) {
  ChunkEviction eviction(EvictionBackend::Lru2, 4);
  eviction.stored(0, k(7), kRoot);
  eviction.evictable(0);
  ASSERT_EQ(eviction.evict(1, {}), Slots{0});
  eviction.stored(3, k(7), kRoot);  // back in another slot: its second use
  eviction.stored(1, k(8), kRoot);
  eviction.removed(1);  // a failed store: slot 1 holds nothing, key 8 is forgotten
  EXPECT_FALSE(eviction.holds(1));
  eviction.stored(1, k(8), kRoot);  // seen once again, not twice
  eviction.evictable(3);
  eviction.evictable(1);
  EXPECT_EQ(eviction.evict(2, {}), (Slots{1, 3}));
}

TEST(ChunkEviction, ParentsInACircleStillLeaveAllOrNothing) {
  ChunkEviction eviction(EvictionBackend::Adaptive, 4);
  eviction.stored(0, k(1), k(2));  // chains an engine gave in two orders: no leaf among them
  eviction.stored(1, k(2), k(1));
  eviction.evictable(0);
  eviction.evictable(1);
  const auto victims = eviction.evict(2, {});
  ASSERT_TRUE(victims.has_value());
  EXPECT_EQ(victims->size(), 2U);
  EXPECT_EQ(eviction.evictable_count(), 0U);
}

TEST(ChunkEviction, ABadCallIsAContractErrorThatChangesNothing) {
  ChunkEviction eviction(EvictionBackend::Adaptive, 2);
  eviction.stored(0, k(1), kRoot);
  eviction.evictable(0);
  EXPECT_THROW(eviction.stored(0, k(2), kRoot), ContractError);  // holds key 1
  eviction.stored(1, k(3), kRoot);
  EXPECT_THROW(eviction.stored(1, k(4), kRoot), ContractError);  // holds key 3, not evictable
  eviction.removed(1);
  EXPECT_THROW(eviction.stored(2, k(2), kRoot), ContractError);  // outside the cache
  EXPECT_THROW(eviction.evictable(1), ContractError);            // holds nothing
  EXPECT_THROW(eviction.pinned(1), ContractError);
  EXPECT_THROW(eviction.removed(1), ContractError);
  const Slots held_and_not{0, 1};
  EXPECT_THROW(eviction.accessed(held_and_not, flags(2, 1)), ContractError);
  const Slots held{0};
  EXPECT_THROW(eviction.accessed(held, flags(2, 1)), ContractError);  // lengths differ
  EXPECT_EQ(eviction.evictable_count(), 1U);
  EXPECT_TRUE(eviction.holds(0) && !eviction.holds(1));
  EXPECT_EQ(eviction.evict(1, {}), Slots{0});
}

TEST(ChunkEviction, ClearForgetsChunksAndHistory) {
  ChunkEviction eviction(EvictionBackend::Lru2, 4);
  eviction.stored(0, k(5), kRoot);
  eviction.evictable(0);
  eviction.clear();
  EXPECT_FALSE(eviction.holds(0));
  EXPECT_EQ(eviction.evictable_count(), 0U);
  eviction.stored(1, k(5), kRoot);  // a stranger after clear: seen once
  eviction.stored(2, k(6), kRoot);
  eviction.evictable(1);
  eviction.evictable(2);
  EXPECT_EQ(eviction.evict(1, {}), Slots{1});
}

TEST(ChunkEviction, OnlyLeafFirstOrdersAndARealCapacity) {
  EXPECT_THROW(ChunkEviction(EvictionBackend::Lru, 4), ConfigError);
  EXPECT_THROW(ChunkEviction(EvictionBackend::Lineage, 4), ConfigError);
  EXPECT_THROW(ChunkEviction(EvictionBackend::MultiLru, 4), ConfigError);
  EXPECT_THROW(ChunkEviction(EvictionBackend::Adaptive, 0), ConfigError);
  const ChunkKey a = ChunkEviction::key_hash(std::as_bytes(std::span("a", 1)));
  EXPECT_NE(a, ChunkEviction::key_hash(std::as_bytes(std::span("b", 1))));
  EXPECT_EQ(a, ChunkEviction::key_hash(std::as_bytes(std::span("a", 1))));
}

}  // namespace
}  // namespace kvtier::g1
