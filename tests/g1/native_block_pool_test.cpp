// Worked examples P1–P5 of the spec (§7.1) and the pool's own invariants.
#include "g1/native/native_block_pool.hpp"

#include <gtest/gtest.h>

#include "kvtier/core/errors.hpp"

namespace kvtier::g1 {
namespace {

SequenceHash h(std::uint64_t v) { return SequenceHash(v); }

// Reserves one fresh page, allocates it privately and caches it as `hash`.
std::pair<PageId, bool> cached_copy(NativeBlockPool& pool, std::uint64_t hash) {
  auto outcome = pool.reserve_fresh(1);
  EXPECT_TRUE(outcome.has_value());
  return pool.allocate_cached(outcome->reservation, h(hash));
}

TEST(NativeBlockPool, P1ExactPrefixMustBeResident) {
  NativeBlockPool pool(1);
  const std::vector<SequenceHash> prefix{h(9)};
  try {
    (void)pool.reserve_exact_prefix(prefix, 1);
    FAIL();
  } catch (const ContractError& error) {
    EXPECT_STREQ(error.what(), "authorized prefix hash 9 is no longer resident");
  }
  EXPECT_EQ(pool.reserved(), 0U);
}

TEST(NativeBlockPool, P2DuplicatesConsumeCapacityButShareVisibility) {
  NativeBlockPool pool(2);
  const auto [c1, first_visible] = cached_copy(pool, 7);
  const auto [c2, second_visible] = cached_copy(pool, 7);
  EXPECT_TRUE(first_visible);
  EXPECT_FALSE(second_visible);
  EXPECT_NE(c1, c2);
  EXPECT_EQ(pool.active_blocks(), 2U);
  pool.release(c1);
  pool.release(c2);
  EXPECT_EQ(pool.inactive_len(), 2U);
  EXPECT_EQ(pool.active_blocks(), 0U);
}

TEST(NativeBlockPool, P3PrefixPinIsNotEvictableCapacity) {
  NativeBlockPool pool(1);
  pool.release(cached_copy(pool, 9).first);
  const std::vector<SequenceHash> prefix{h(9)};
  EXPECT_FALSE(pool.reserve(prefix, 1).has_value());
  EXPECT_EQ(pool.active_blocks(), 0U);
  EXPECT_EQ(pool.inactive_len(), 1U);
  EXPECT_TRUE(pool.prefix_hit(h(9)).has_value());
  EXPECT_FALSE(pool.prefix_hit(h(9))->is_active);
}

TEST(NativeBlockPool, P4RemovedOnlyForTheLastCopyAndPrimaryPromotion) {
  NativeBlockPool pool(4);
  const PageId f = cached_copy(pool, 3).first;
  const PageId d0 = cached_copy(pool, 3).first;
  const PageId d1 = cached_copy(pool, 3).first;
  const PageId d2 = cached_copy(pool, 3).first;
  for (PageId page : {f, d0, d1, d2}) pool.release(page);
  EXPECT_EQ(pool.inactive_order(), (std::vector<PageId>{f, d0, d1, d2}));

  auto step1 = pool.reserve_fresh(1);  // evicts F
  EXPECT_TRUE(step1->removed.empty());
  pool.cancel(step1->reservation);

  const std::vector<SequenceHash> prefix{h(3)};
  auto step2 = pool.reserve_exact_prefix(prefix, 1);
  ASSERT_EQ(step2->reservation.prefix.size(), 1U);
  EXPECT_EQ(step2->reservation.prefix[0].page, d0);  // D0 became primary
  pool.cancel(step2->reservation);
  EXPECT_EQ(pool.inactive_order(), (std::vector<PageId>{d1, d2, d0}));

  auto step3 = pool.reserve_fresh(2);  // one page is free: evicts D1 only
  EXPECT_TRUE(step3->removed.empty());
  pool.cancel(step3->reservation);
  auto step4 = pool.reserve_fresh(3);  // evicts D2
  EXPECT_TRUE(step4->removed.empty());
  pool.cancel(step4->reservation);
  auto step5 = pool.reserve_fresh(4);  // evicts D0, the last copy
  EXPECT_EQ(step5->removed, std::vector<SequenceHash>{h(3)});
  pool.cancel(step5->reservation);
  EXPECT_FALSE(pool.is_resident(h(3)));
}

TEST(NativeBlockPool, P5CancelledPrefixAgesLeafFirst) {
  NativeBlockPool pool(2);
  const PageId parent = cached_copy(pool, 7).first;
  const PageId leaf = cached_copy(pool, 8).first;
  pool.release(leaf);
  pool.release(parent);
  const std::vector<SequenceHash> prefix{h(7), h(8)};
  auto pinned = pool.reserve(prefix, 0);
  ASSERT_TRUE(pinned);
  EXPECT_TRUE(pinned->removed.empty());
  pool.cancel(pinned->reservation);
  auto fresh = pool.reserve_fresh(1);
  EXPECT_EQ(fresh->removed, std::vector<SequenceHash>{h(8)});
  EXPECT_TRUE(pool.prefix_hit(h(7)).has_value());
  EXPECT_FALSE(pool.prefix_hit(h(8)).has_value());
}

TEST(NativeBlockPool, FreePagesAreUsedBeforeEvicting) {
  NativeBlockPool pool(3);
  pool.release(cached_copy(pool, 1).first);
  auto outcome = pool.reserve_fresh(2);
  ASSERT_TRUE(outcome);
  EXPECT_TRUE(outcome->removed.empty());
  EXPECT_EQ(pool.inactive_len(), 1U);
  EXPECT_EQ(pool.reserved(), 2U);
  EXPECT_EQ(pool.free_capacity(), 0U);
  EXPECT_FALSE(pool.reserve_fresh(2).has_value());  // only one evictable
  EXPECT_EQ(pool.reserved(), 2U);
  pool.cancel(outcome->reservation);
  EXPECT_EQ(pool.reserved(), 0U);
}

TEST(NativeBlockPool, DuplicatePinnedHitCountsOnceAgainstEvictableCapacity) {
  NativeBlockPool pool(2);
  const PageId a = cached_copy(pool, 1).first;
  const PageId b = cached_copy(pool, 2).first;
  pool.release(a);
  pool.release(b);
  const std::vector<PrefixPin> hits{{h(1), a}, {h(1), a}};
  auto outcome = pool.reserve_hits(hits, 1);  // needs 1 eviction: b is still evictable
  ASSERT_TRUE(outcome);
  EXPECT_EQ(outcome->removed, std::vector<SequenceHash>{h(2)});
  pool.cancel(outcome->reservation);
  EXPECT_EQ(pool.inactive_len(), 1U);
}

TEST(NativeBlockPool, PrivateReleaseFreesAtOnceAndCachedRefsAreCounted) {
  NativeBlockPool pool(2);
  auto outcome = pool.reserve_fresh(2);
  const PageId p = pool.allocate_private(outcome->reservation);
  const PageId c = pool.allocate_cached(outcome->reservation, h(5)).first;
  EXPECT_EQ(pool.active_block_refs(), 2U);
  EXPECT_EQ(pool.copies(), 2U);
  pool.release(p);
  EXPECT_EQ(pool.copies(), 1U);
  EXPECT_EQ(pool.free_capacity(), 1U);
  EXPECT_THROW(pool.cache_private(c, h(6)), ContractError);
  pool.release(c);
  EXPECT_THROW(pool.release(c), ContractError);  // double release
  EXPECT_EQ(pool.inactive_len(), 1U);
  EXPECT_THROW(pool.allocate_private(outcome->reservation), ContractError);
}

}  // namespace
}  // namespace kvtier::g1
