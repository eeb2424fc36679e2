// A pinned slab too large for one allocation is split into pieces of whole
// pages (issue #8: one huge pinned allocation fails or takes minutes); pages
// behave the same whichever piece holds them.
#include <gtest/gtest.h>

#include <numeric>

#include "kvtier/core/errors.hpp"
#include "kvtier/memory/host_runtime.hpp"
#include "kvtier/memory/kv_pool.hpp"
#include "kvtier/memory/page_copy_plan.hpp"

namespace kvtier::memory {
namespace {

TEST(KvPoolPieces, APinnedSlabOverThePieceLimitIsSplitIntoWholePages) {
  HostRuntime runtime;
  const KvLayout layout(KvGeometry{}, PageLayout::PageMajor, 8);
  KvPool pool(runtime, layout, PoolMemory::PinnedHost, 3 * layout.page_bytes() + 100);
  EXPECT_EQ(pool.pieces(), 3U);  // 3 + 3 + 2 pages
  std::vector<PageId> pages;
  std::vector<std::uint64_t> identities;
  for (std::uint32_t p = 0; p < 8; ++p) {
    pages.emplace_back(p);
    identities.push_back(1000 + p);
  }
  pool.fill_pattern(pages, identities);
  EXPECT_TRUE(pool.find_pattern_mismatches(pages, identities).empty());

  // Through a device pool and back, crossing the piece boundaries.
  KvPool device(runtime, KvLayout(KvGeometry{}, PageLayout::LayerMajor, 8));
  std::vector<PageId> reversed(pages.rbegin(), pages.rend());
  Stream stream = runtime.create_stream();
  stream.copy_async(page_copy_plan(pool, pages, device, reversed));
  stream.synchronize();
  EXPECT_TRUE(device.find_pattern_mismatches(reversed, identities).empty());
  KvPool back(runtime, layout, PoolMemory::PinnedHost, 2 * layout.page_bytes());
  stream.copy_async(page_copy_plan(device, reversed, back, pages));
  stream.synchronize();
  EXPECT_EQ(back.pieces(), 4U);
  EXPECT_TRUE(back.find_pattern_mismatches(pages, identities).empty());
}

TEST(KvPoolPieces, OnlyPageMajorSlabsOfPagesThatFitCanBeSplit) {
  HostRuntime runtime;
  const KvLayout layer_major(KvGeometry{}, PageLayout::LayerMajor, 8);
  EXPECT_THROW(KvPool(runtime, layer_major, PoolMemory::PinnedHost, layer_major.page_bytes()), ConfigError);
  const KvLayout page_major(KvGeometry{}, PageLayout::PageMajor, 8);
  EXPECT_THROW(KvPool(runtime, page_major, PoolMemory::PinnedHost, page_major.page_bytes() - 1), ConfigError);
  EXPECT_EQ(KvPool(runtime, page_major, PoolMemory::PinnedHost).pieces(), 1U);
}

}  // namespace
}  // namespace kvtier::memory
