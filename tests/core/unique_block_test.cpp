#include "kvtier/core/unique_block.hpp"

#include <gtest/gtest.h>

#include <regex>
#include <unordered_set>

namespace kvtier {
namespace {

TEST(Uuid, RandomIsVersion4WithRfcVariantAndCanonicalText) {
  const Uuid uuid = Uuid::random();
  EXPECT_EQ((uuid.high() >> 12) & 0xF, 4U);
  EXPECT_EQ(uuid.low() >> 62, 2U);
  EXPECT_TRUE(std::regex_match(uuid.to_string(),
                               std::regex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")));
  EXPECT_EQ(Uuid(0x0123456789ABCDEFULL, 0xFEDCBA9876543210ULL).to_string(), "01234567-89ab-cdef-fedc-ba9876543210");
}

TEST(Uuid, RandomValuesDoNotRepeat) {
  std::unordered_set<Uuid> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(Uuid::random());
  EXPECT_EQ(seen.size(), 1000U);
}

TEST(UniqueBlock, FullAndPartialAreDistinctIdentities) {
  const Uuid uuid(1, 7);
  const UniqueBlock full = UniqueBlock::full(SequenceHash(7));
  const UniqueBlock partial = UniqueBlock::partial(uuid);
  EXPECT_TRUE(full.is_full());
  EXPECT_TRUE(partial.is_partial());
  EXPECT_EQ(full.hash(), SequenceHash(7));
  EXPECT_EQ(partial.uuid(), uuid);
  EXPECT_NE(full, partial);
  EXPECT_EQ(full, UniqueBlock::full(SequenceHash(7)));
  EXPECT_EQ(full.to_string(), "7");
  std::unordered_set<UniqueBlock> set{full, partial, UniqueBlock::full(SequenceHash(7))};
  EXPECT_EQ(set.size(), 2U);
}

}  // namespace
}  // namespace kvtier
