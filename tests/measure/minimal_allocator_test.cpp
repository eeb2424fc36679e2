// The bench floor is an allocator in its own right: if it cut corners, every
// fraction measured against it would flatter nothing and mean nothing.
#include <gtest/gtest.h>

#include <vector>

#include "kvtier/measure/minimal_allocator.hpp"

namespace kvtier::measure {
namespace {

std::vector<UniqueBlock> blocks(std::initializer_list<std::uint64_t> hashes) {
  std::vector<UniqueBlock> out;
  for (const std::uint64_t h : hashes) out.push_back(UniqueBlock::full(SequenceHash(h * 0x9E3779B97F4A7C15ULL)));
  return out;
}

TEST(MinimalAllocator, ACachedPrefixReusesItsPagesAndTheRestGetsFreshOnes) {
  MinimalAllocator floor(8);
  std::vector<std::uint32_t> a, b;
  ASSERT_TRUE(floor.use(blocks({1, 2, 3}), a));
  ASSERT_TRUE(floor.use(blocks({1, 2, 4}), b));
  EXPECT_EQ(b[0], a[0]);
  EXPECT_EQ(b[1], a[1]);
  EXPECT_NE(b[2], a[2]);
}

TEST(MinimalAllocator, TheProbeStopsAtTheFirstMiss) {
  MinimalAllocator floor(8);
  std::vector<std::uint32_t> a, b;
  ASSERT_TRUE(floor.use(blocks({1, 2}), a));
  ASSERT_TRUE(floor.use(blocks({9, 2}), b));  // 2 is cached, but after a miss: a fresh copy
  EXPECT_NE(b[1], a[1]);
}

TEST(MinimalAllocator, ReleasedPagesAreEvictedLeastRecentlyUsedLeafFirst) {
  MinimalAllocator floor(4);
  std::vector<std::uint32_t> a, b, c;
  ASSERT_TRUE(floor.use(blocks({1, 2}), a));
  ASSERT_TRUE(floor.use(blocks({3, 4}), b));
  floor.release(a);
  floor.release(b);
  ASSERT_TRUE(floor.use(blocks({5}), c));  // takes a's leaf (released first, leaf first)
  EXPECT_EQ(c[0], a[1]);
  std::vector<std::uint32_t> again;
  ASSERT_TRUE(floor.use(blocks({1}), again));  // a's root is still cached
  EXPECT_EQ(again[0], a[0]);
}

TEST(MinimalAllocator, AUseThatDoesNotFitChangesNothing) {
  MinimalAllocator floor(3);
  std::vector<std::uint32_t> a, b;
  ASSERT_TRUE(floor.use(blocks({1, 2}), a));
  EXPECT_FALSE(floor.use(blocks({7, 8}), b));
  EXPECT_TRUE(b.empty());
  ASSERT_TRUE(floor.use(blocks({9}), b));  // the one free page is still free
  floor.release(a);
  std::vector<std::uint32_t> c;
  ASSERT_TRUE(floor.use(blocks({1, 2}), c));  // and a's pages are still cached
  EXPECT_EQ(c, a);
}

}  // namespace
}  // namespace kvtier::measure
