// The native pool under one of kvtier's inactive orders (docs/policies.md):
// the order picks among each hash's primary copies, redundant duplicates go
// first, KVBM's pools are refused; and a manager driven through random
// requests with shared prefixes, duplicates and an offload tier keeps every
// invariant under every order.
#include <gtest/gtest.h>

#include <random>

#include "g1/native/native_block_pool.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/g1/g1_manager.hpp"

namespace kvtier::g1 {
namespace {

SequenceHash h(std::uint64_t v) { return SequenceHash(v); }

NativeBlockPool::Holders no_holders(std::uint32_t capacity) {
  return {.refs = std::vector<std::uint32_t>(capacity, 0), .pins = std::vector<std::uint32_t>(capacity, 0)};
}

/// Caches `hash` on a fresh page with its lineage, then releases it (inactive).
PageId cache_and_release(NativeBlockPool& pool, std::uint64_t hash, std::optional<std::uint64_t> parent,
                         std::uint64_t position) {
  auto outcome = pool.reserve_fresh(1);
  EXPECT_TRUE(outcome.has_value());
  const PageId page = pool.allocate_cached(outcome->reservation, h(hash)).first;
  pool.set_lineage(page, PositionalLineageHash(h(hash), parent ? std::optional(h(*parent)) : std::nullopt, position));
  pool.release(page);
  return page;
}

TEST(NativeInactiveOrder, TheOrderDecidesAndAParentOutlivesItsChild) {
  NativeBlockPool pool(4, EvictionBackend::Lru2);
  const PageId parent = cache_and_release(pool, 1, std::nullopt, 0);  // the oldest release...
  const PageId child = cache_and_release(pool, 2, 1, 1);              // ...but its child is inactive
  const PageId other = cache_and_release(pool, 3, std::nullopt, 0);
  EXPECT_EQ(pool.inactive_len(), 3U);
  EXPECT_EQ(pool.evict_one(), h(2));  // LRU would take the parent
  EXPECT_EQ(pool.evict_one(), h(1));
  EXPECT_EQ(pool.evict_one(), h(3));
  (void)parent;
  (void)child;
  (void)other;
  pool.audit(no_holders(4));
}

TEST(NativeInactiveOrder, RedundantDuplicatesLeaveFirstAndNoHashIsLostForThem) {
  NativeBlockPool pool(4, EvictionBackend::Arc);
  auto a = pool.reserve_fresh(2);
  ASSERT_TRUE(a.has_value());
  const PageId primary = pool.allocate_cached(a->reservation, h(7)).first;
  const PageId duplicate = pool.allocate_cached(a->reservation, h(7)).first;
  pool.release(primary);
  pool.release(duplicate);
  cache_and_release(pool, 8, std::nullopt, 0);
  EXPECT_EQ(pool.inactive_order(), std::vector<PageId>{duplicate});  // the LRU holds the duplicate only
  EXPECT_EQ(pool.evict_one(), std::nullopt);                         // the duplicate: hash 7 is still resident
  EXPECT_TRUE(pool.is_resident(h(7)));
  pool.audit(no_holders(4));
}

TEST(NativeInactiveOrder, KvbmPoolsAreRefused) {
  for (const EvictionBackend order : {EvictionBackend::Lineage, EvictionBackend::Lru, EvictionBackend::MultiLru}) {
    EXPECT_THROW(NativeBlockPool(4, order), ConfigError) << eviction_backend_name(order);
  }
  EXPECT_THROW(
      G1Manager(G1ManagerConfig{
          .capacity = 8, .block_size = 4, .backend = G1Backend::Kvbm, .native_eviction = EvictionBackend::Arc}),
      ConfigError);
}

/// Random requests one after another and overlapping: shared prefixes (a few
/// system prompts), the same prompt twice before either is finalized
/// (duplicates), some never finalized; the audit after every operation.
void drive_randomly(G1Manager& manager, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::pair<OwnerId, DerefSignal>> live;
  std::uint64_t next_owner = 1;
  for (int step = 0; step < 400; ++step) {
    if (!live.empty() && (live.size() > 3 || rng() % 3 == 0)) {
      const std::size_t i = rng() % live.size();
      manager.process_for_request(live[i].first, live[i].second);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      manager.audit();
      continue;
    }
    UseSignal use;
    std::optional<SequenceHash> parent;
    const std::uint64_t root = rng() % 3;
    const std::size_t length = 1 + rng() % 6;
    for (std::size_t b = 0; b < length; ++b) {
      const std::uint64_t id = b < 2 ? root * 100 + b : 1000 + (rng() % 40) * 10 + b;
      const SequenceHash hash(parent ? parent->value() * 31 + id : id + 7);
      use.blocks.push_back(UniqueBlock::full(hash));
      use.local_hashes.push_back(LocalBlockHash(id));
      use.plhs.emplace_back(hash, parent, b);
      parent = hash;
    }
    std::size_t prefix = 0;
    while (prefix < use.blocks.size() && manager.is_cached(use.blocks[prefix].hash())) ++prefix;
    const OwnerId owner(next_owner++);
    if (!manager.process_for_request(owner, use, prefix).is_ready()) continue;
    if (rng() % 4 != 0) manager.finalize_computed_prefix(owner, 0, use.blocks.size() * 4);
    DerefSignal deref;
    deref.blocks.assign(use.blocks.rbegin(), use.blocks.rend());
    live.emplace_back(owner, std::move(deref));
    manager.audit();
  }
}

TEST(NativeInactiveOrder, EveryOrderKeepsEveryInvariantUnderRandomRequests) {
  for (const EvictionBackend order : {EvictionBackend::Lru2, EvictionBackend::LfuDa, EvictionBackend::Arc,
                                      EvictionBackend::S3Fifo, EvictionBackend::Adaptive}) {
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
      G1Manager manager(
          G1ManagerConfig{.capacity = 24, .block_size = 4, .backend = G1Backend::Native, .native_eviction = order});
      SCOPED_TRACE(std::string(eviction_backend_name(order)) + " seed " + std::to_string(seed));
      drive_randomly(manager, seed);
    }
  }
}

}  // namespace
}  // namespace kvtier::g1
