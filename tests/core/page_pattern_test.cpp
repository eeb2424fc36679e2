#include "kvtier/core/page_pattern.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace kvtier {
namespace {

TEST(PagePattern, FillMatchesByteDefinitionAtAnyStart) {
  std::vector<std::byte> page(1003);
  fill_page_pattern(42, 5, page);
  for (std::size_t i = 0; i < page.size(); ++i) {
    ASSERT_EQ(page[i], static_cast<std::byte>(page_pattern_byte(42, 5 + i))) << i;
  }
  EXPECT_TRUE(matches_page_pattern(42, 5, page));
}

TEST(PagePattern, DetectsAnyChangedByteAndOtherIdentities) {
  std::vector<std::byte> page(9000);
  fill_page_pattern(7, 0, page);
  EXPECT_TRUE(matches_page_pattern(7, 0, page));
  EXPECT_FALSE(matches_page_pattern(8, 0, page));
  EXPECT_FALSE(matches_page_pattern(7, 8, page));
  page[8999] ^= std::byte{1};
  EXPECT_FALSE(matches_page_pattern(7, 0, page));
}

TEST(PagePattern, ZeroedPageNeverMatches) {
  const std::vector<std::byte> zeros(64);
  for (std::uint64_t identity : {0ULL, 1ULL, 7ULL, ~0ULL}) EXPECT_FALSE(matches_page_pattern(identity, 0, zeros));
}

}  // namespace
}  // namespace kvtier
