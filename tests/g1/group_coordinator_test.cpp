// KV cache groups on one pool (docs/spec/model-geometry.md sections 2-4):
// the worked examples H2 (release order), H4 (full + two sliding windows),
// H5 (every combination hits), H6 (different block sizes) and H7 (Mamba align
// and the uncached common prefix) on the coordinator, and the rules that cross
// groups: the null page, atomic allocation, skipped releases that stand.
#include "g1/native/groups/group_coordinator.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "g1/support/group_prompts.hpp"
#include "kvtier/core/errors.hpp"

namespace kvtier::g1 {
namespace {

using test::block_hashes;
using test::prompt;

GroupSpec group(GroupKind kind, std::uint32_t block_size = 16, KvDtype dtype = KvDtype::Bf16) {
  GroupSpec g{.kind = kind, .layers = 1, .block_size = block_size, .kv_heads = 1, .head_dim = 8};
  g.dtype = dtype;
  if (kind == GroupKind::SlidingWindow) g.sliding_window = 32;
  if (kind == GroupKind::Mamba) {
    g = GroupSpec{.kind = GroupKind::Mamba, .layers = 1, .block_size = block_size, .state_bytes = 64};
  }
  return g;
}

GroupSpec mamba(MambaMode mode) {
  GroupSpec g = group(GroupKind::Mamba);
  g.mamba_mode = mode;
  return g;
}

std::vector<std::uint32_t> ids(std::span<const PageId> pages) {
  std::vector<std::uint32_t> out;
  for (const PageId page : pages) out.push_back(page.value());
  return out;
}

constexpr std::uint32_t kNull = 0;  // the null page is page 0: a fresh pool hands it out first

// H4: full + two sliding windows (W 32), bs 16, 21 pages including the null page.
TEST(GroupCoordinator, FullAndTwoSlidingWindowsShareOnePool) {
  GroupCoordinator c(
      ModelGeometry::resolve(
          {group(GroupKind::FullAttention), group(GroupKind::SlidingWindow), group(GroupKind::SlidingWindow)}, 16),
      21, true);
  EXPECT_EQ(c.null_page(), PageId(kNull));
  EXPECT_EQ(c.usable_capacity(), 20U);
  const auto tokens0 = prompt(55, 55, 1, 1);
  const auto hashes0 = block_hashes(tokens0, 16);
  ASSERT_TRUE(c.allocate(OwnerId(0), hashes0, 55));
  c.finalize(OwnerId(0), hashes0, 55);
  EXPECT_EQ(ids(c.table(OwnerId(0), 0)), (std::vector<std::uint32_t>{1, 2, 3, 4}));
  EXPECT_EQ(ids(c.table(OwnerId(0), 1)), (std::vector<std::uint32_t>{5, 6, 7, 8}));
  EXPECT_EQ(ids(c.table(OwnerId(0), 2)), (std::vector<std::uint32_t>{9, 10, 11, 12}));

  const auto tokens1 = prompt(53, 48, 1, 2);
  const auto hashes1 = block_hashes(tokens1, 16);
  const GroupHit hit = c.find_hit(hashes1, 53);
  EXPECT_EQ(hit.tokens, 48U);
  EXPECT_EQ(hit.uncached_common_prefix, 0U);
  ASSERT_TRUE(c.allocate(OwnerId(1), hashes1, 53, hit.tokens));
  EXPECT_EQ(ids(c.table(OwnerId(1), 0)), (std::vector<std::uint32_t>{1, 2, 3, 13}));
  EXPECT_EQ(ids(c.table(OwnerId(1), 1)), (std::vector<std::uint32_t>{kNull, 6, 7, 14}));
  EXPECT_EQ(ids(c.table(OwnerId(1), 2)), (std::vector<std::uint32_t>{kNull, 10, 11, 15}));
  EXPECT_EQ(c.computed_tokens(OwnerId(1)), 48U);
  c.audit();
  // Pages 1-3 are shared by both requests: counted once, in group 0.
  const auto usage = c.usage();
  EXPECT_EQ(usage[0], (GroupUsage{.active = 5, .inactive = 0}));
  EXPECT_EQ(usage[1], (GroupUsage{.active = 5, .inactive = 0}));
  EXPECT_EQ(c.free_pages(), 20U - 15U);
}

// H5: request 1 shares request 0's first 48 tokens and hits them whatever the groups.
TEST(GroupCoordinator, EveryCombinationOfKindsHitsTheSharedPrefix) {
  const std::vector<std::vector<GroupSpec>> combinations{
      {group(GroupKind::FullAttention), group(GroupKind::SlidingWindow)},
      {group(GroupKind::FullAttention), mamba(MambaMode::None)},
      {group(GroupKind::SlidingWindow), mamba(MambaMode::None)},
      {group(GroupKind::FullAttention), group(GroupKind::SlidingWindow), mamba(MambaMode::None)},
      {group(GroupKind::FullAttention), group(GroupKind::FullAttention), group(GroupKind::SlidingWindow)},
  };
  for (const auto& groups : combinations) {
    const auto count = static_cast<std::uint32_t>(groups.size());
    GroupCoordinator c(ModelGeometry::resolve(groups, 16), 10 * count + 1, true);
    const auto hashes0 = block_hashes(prompt(55, 55, 1, 1), 16);
    ASSERT_TRUE(c.allocate(OwnerId(0), hashes0, 55));
    c.finalize(OwnerId(0), hashes0, 55);
    c.begin_step();
    const auto hashes1 = block_hashes(prompt(53, 48, 1, 2), 16);
    const GroupHit hit = c.find_hit(hashes1, 53);
    EXPECT_EQ(hit.tokens, 48U) << ModelGeometry::resolve(groups, 16).describe();
    ASSERT_TRUE(c.allocate(OwnerId(1), hashes1, 53, hit.tokens));
    c.audit();
  }
}

// H6: full attention bs 32 fp16 and sliding window bs 16 fp32: hash unit 16, scheduler unit 32.
TEST(GroupCoordinator, GroupsOfDifferentBlockSizesHitOnTheSchedulerUnit) {
  GroupCoordinator c(
      ModelGeometry::resolve(
          {group(GroupKind::FullAttention, 32, KvDtype::Fp16), group(GroupKind::SlidingWindow, 16, KvDtype::Fp32)}, 16),
      64, true);
  const auto tokens = prompt(160, 160, 3, 3);
  const auto hashes = block_hashes(tokens, 16);
  ASSERT_TRUE(c.allocate(OwnerId(0), hashes, 112));
  c.finalize(OwnerId(0), hashes, 112);
  EXPECT_EQ(c.table(OwnerId(0), 0).size(), 4U);
  EXPECT_EQ(c.table(OwnerId(0), 1).size(), 7U);
  const std::vector<std::uint32_t> first113(tokens.begin(), tokens.begin() + 113);
  EXPECT_EQ(c.find_hit(block_hashes(first113, 16), 113).tokens, 96U);
}

// H7: [full, mamba align]: align caches no intermediate state, so a prompt
// that diverges in its last block hits nothing, and the 32 tokens full
// attention could have served are the uncached common prefix.
TEST(GroupCoordinator, MambaAlignReportsTheUncachedCommonPrefix) {
  GroupCoordinator c(ModelGeometry::resolve({group(GroupKind::FullAttention), mamba(MambaMode::Align)}, 16), 32, true);
  const auto tokens0 = prompt(48, 48, 5, 5);
  const auto hashes0 = block_hashes(tokens0, 16);
  ASSERT_TRUE(c.allocate(OwnerId(0), hashes0, 48));
  c.finalize(OwnerId(0), hashes0, 48);
  EXPECT_EQ(c.find_hit(block_hashes(prompt(55, 48, 5, 6), 16), 55).tokens, 0U)
      << "a state cached during this step is not yet a hit";
  c.begin_step();
  EXPECT_EQ(c.find_hit(block_hashes(prompt(55, 48, 5, 6), 16), 55).tokens, 48U);
  auto changed = tokens0;
  changed.back() += 1;
  const GroupHit hit = c.find_hit(block_hashes(changed, 16), 48);
  EXPECT_EQ(hit.tokens, 0U);
  EXPECT_EQ(hit.uncached_common_prefix, 32U);
}

// H2 through the coordinator: bs 2, W 4, released backwards from the last
// skipped block, stopping at the first null.
TEST(GroupCoordinator, SkippedBlocksAreReleasedLastFirstBeforeEachStep) {
  GroupSpec sliding = group(GroupKind::SlidingWindow, 2);
  sliding.sliding_window = 4;
  GroupCoordinator c(ModelGeometry::resolve({sliding}, 2), 32, true);
  ASSERT_TRUE(c.null_page().has_value()) << "a non-full group keeps a null page";
  const auto hashes = block_hashes(prompt(22, 22, 7, 7), 2);
  ASSERT_TRUE(c.allocate(OwnerId(0), hashes, 22));
  const std::vector<std::uint32_t> pages = ids(c.table(OwnerId(0), 0));
  const auto leading_nulls = [&] {
    std::size_t n = 0;
    for (const PageId page : c.table(OwnerId(0), 0)) {
      if (page.value() != kNull) break;
      ++n;
    }
    return n;
  };
  const std::vector<std::pair<std::size_t, std::size_t>> computed_to_nulls{{4, 0}, {5, 1}, {6, 1}, {7, 2}, {11, 4}};
  for (const auto& [computed, nulls] : computed_to_nulls) {
    c.finalize(OwnerId(0), hashes, computed);
    ASSERT_TRUE(c.allocate(OwnerId(0), hashes, 22));  // a step that needs no page still releases
    EXPECT_EQ(leading_nulls(), nulls) << "computed " << computed;
  }
  // Cached pages join the eviction order as released: 1, 0 at n = 7, then 3, 2 at n = 11.
  EXPECT_EQ(ids(c.eviction_order()), (std::vector<std::uint32_t>{pages[0], pages[1], pages[3], pages[2]}));
  c.audit();
}

TEST(GroupCoordinator, FreshPagesComeForEveryGroupOrNoneAndSkipsStand) {
  GroupCoordinator c(ModelGeometry::resolve({group(GroupKind::FullAttention), group(GroupKind::SlidingWindow)}, 16), 9,
                     false);
  const auto hashes = block_hashes(prompt(128, 128, 9, 9), 16);
  ASSERT_TRUE(c.allocate(OwnerId(0), hashes, 48));  // 3 pages each: 2 free
  c.finalize(OwnerId(0), hashes, 48);
  // 64 tokens need a 4th page in each group; the window (W 32) frees block 0 first.
  ASSERT_TRUE(c.allocate(OwnerId(0), hashes, 64));
  EXPECT_EQ(c.free_pages(), 1U);
  c.finalize(OwnerId(0), hashes, 64);
  // 96 tokens: 2 more pages in each group (4 in all) against 1 free + 1 released: refused...
  EXPECT_FALSE(c.allocate(OwnerId(0), hashes, 96));
  EXPECT_EQ(c.table(OwnerId(0), 0).size(), 4U) << "no group took a page";
  EXPECT_EQ(c.table(OwnerId(0), 1).size(), 4U);
  // ... but the window's block 1 release stands.
  EXPECT_EQ(ids(c.table(OwnerId(0), 1))[1], kNull);
  EXPECT_EQ(c.free_pages(), 2U);
  c.audit();
  c.free(OwnerId(0));
  EXPECT_EQ(c.free_pages(), 8U) << "without prefix caching every page is free again";
  EXPECT_EQ(c.usage()[0], GroupUsage{});
  c.audit();
}

TEST(GroupCoordinator, HashlessPagesAreReusedFirstAndCachedOnesEvictedInOrder) {
  GroupCoordinator c(ModelGeometry::resolve({group(GroupKind::FullAttention), group(GroupKind::SlidingWindow)}, 16), 9,
                     true);
  const auto a = block_hashes(prompt(40, 40, 11, 11), 16);
  ASSERT_TRUE(c.allocate(OwnerId(0), a, 40));  // 3 pages a group; blocks 0-1 cached at 40
  c.finalize(OwnerId(0), a, 40);
  c.free(OwnerId(0));
  // The two partial pages are free again (hashless), the four cached ones inactive.
  EXPECT_EQ(c.usage()[0], (GroupUsage{.active = 0, .inactive = 2}));
  EXPECT_EQ(c.usage()[1], (GroupUsage{.active = 0, .inactive = 2}));
  EXPECT_EQ(c.free_pages(), 4U);
  const auto b = block_hashes(prompt(32, 32, 12, 12), 16);
  ASSERT_TRUE(c.allocate(OwnerId(1), b, 32));  // 4 fresh pages: the free ones, no eviction
  EXPECT_EQ(c.find_hit(a, 40).tokens, 32U) << "a's blocks stay cached";
  c.free(OwnerId(1));
  const auto d = block_hashes(prompt(48, 48, 13, 13), 16);
  ASSERT_TRUE(c.allocate(OwnerId(2), d, 48));  // 6 pages: 4 free, then the LRU head's two (a's)
  EXPECT_EQ(c.find_hit(a, 40).tokens, 0U);
  // Group 0's table was released tail first, so its block 1 is the LRU head.
  EXPECT_EQ(c.take_removed(0), (std::vector<SequenceHash>{a[1], a[0]}));
  EXPECT_TRUE(c.take_removed(1).empty()) << "group 1's copies are still cached";
  c.audit();
}

TEST(GroupCoordinator, AReuseEveryGroupCannotServeIsRefused) {
  GroupCoordinator c(ModelGeometry::resolve({group(GroupKind::FullAttention), group(GroupKind::SlidingWindow)}, 16), 33,
                     true);
  const auto hashes = block_hashes(prompt(64, 64, 21, 21), 16);
  ASSERT_TRUE(c.allocate(OwnerId(0), hashes, 64));
  c.finalize(OwnerId(0), hashes, 64);
  EXPECT_THROW(c.allocate(OwnerId(1), hashes, 64, 80), ContractError);
  EXPECT_THROW(c.allocate(OwnerId(1), hashes, 64, 8), ContractError) << "not a scheduler-unit multiple";
  EXPECT_THROW(c.allocate(OwnerId(0), hashes, 80, 16), ContractError) << "a running owner";
  EXPECT_FALSE(c.has_owner(OwnerId(1)));
  ASSERT_TRUE(c.allocate(OwnerId(1), hashes, 64, 48));
  c.audit();
}

TEST(GroupCoordinator, OneFullAttentionGroupKeepsNoNullPageAndTheSeedsProbe) {
  GroupCoordinator c(ModelGeometry::resolve({group(GroupKind::FullAttention)}, 16), 8, true);
  EXPECT_FALSE(c.null_page().has_value());
  EXPECT_EQ(c.usable_capacity(), 8U);
  const auto hashes = block_hashes(prompt(32, 32, 4, 4), 16);
  ASSERT_TRUE(c.allocate(OwnerId(0), hashes, 32));
  c.finalize(OwnerId(0), hashes, 32);
  EXPECT_EQ(ids(c.table(OwnerId(0), 0)), (std::vector<std::uint32_t>{0, 1}));
  EXPECT_EQ(c.find_hit(hashes, 32).tokens, 32U) << "no `- 1` for a single full-attention group";
}

TEST(GroupCoordinator, ImpossibleConfigurationsAreRefused) {
  EXPECT_THROW(
      GroupCoordinator(ModelGeometry::resolve({group(GroupKind::FullAttention), group(GroupKind::SlidingWindow)}, 16),
                       1, true),
      ConfigError);
}

}  // namespace
}  // namespace kvtier::g1
