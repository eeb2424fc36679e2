#include "kvtier/core/lineage_hash.hpp"

#include <gtest/gtest.h>

#include <unordered_set>

#include "kvtier/core/errors.hpp"

namespace kvtier {
namespace {

constexpr std::uint64_t kCurrent = 0xF123456789ABCDEFULL;
constexpr std::uint64_t kParent = 0xFEDCBA9876543210ULL;

std::uint64_t low(std::uint64_t v, unsigned bits) { return v & ((std::uint64_t{1} << bits) - 1); }

TEST(PositionalLineageHash, PicksTheNarrowestModeForThePosition) {
  EXPECT_EQ(PositionalLineageHash(SequenceHash(1), std::nullopt, 0).mode(), 0);
  EXPECT_EQ(PositionalLineageHash(SequenceHash(1), SequenceHash(2), 255).mode(), 0);
  EXPECT_EQ(PositionalLineageHash(SequenceHash(1), SequenceHash(2), 256).mode(), 1);
  EXPECT_EQ(PositionalLineageHash(SequenceHash(1), SequenceHash(2), 65535).mode(), 1);
  EXPECT_EQ(PositionalLineageHash(SequenceHash(1), SequenceHash(2), 65536).mode(), 2);
  EXPECT_EQ(PositionalLineageHash(SequenceHash(1), SequenceHash(2), (1U << 24) - 1).mode(), 2);
}

TEST(PositionalLineageHash, Mode0Packs8BitPositionAnd59BitFragments) {
  const PositionalLineageHash plh(SequenceHash(kCurrent), SequenceHash(kParent), 7);
  EXPECT_EQ(plh.position(), 7U);
  EXPECT_EQ(plh.parent_fragment(), low(kParent, 59));
  EXPECT_EQ(plh.current_fragment(), low(kCurrent, 59));
  // [mode:2][position:8][parent:59][current:59]: the position sits in bits 118..125.
  EXPECT_EQ(plh.high() >> 62, 0U);
  EXPECT_EQ((plh.high() >> 54) & 0xFF, 7U);
}

TEST(PositionalLineageHash, Mode1Packs16BitPositionAnd55BitFragments) {
  const PositionalLineageHash plh(SequenceHash(kCurrent), SequenceHash(kParent), 1000);
  EXPECT_EQ(plh.mode(), 1);
  EXPECT_EQ(plh.position(), 1000U);
  EXPECT_EQ(plh.parent_fragment(), low(kParent, 55));
  EXPECT_EQ(plh.current_fragment(), low(kCurrent, 55));
  EXPECT_EQ((plh.high() >> 46) & 0xFFFF, 1000U);
}

TEST(PositionalLineageHash, Mode2Packs24BitPositionAnd51BitFragments) {
  const PositionalLineageHash plh(SequenceHash(kCurrent), SequenceHash(kParent), 100000);
  EXPECT_EQ(plh.mode(), 2);
  EXPECT_EQ(plh.position(), 100000U);
  EXPECT_EQ(plh.parent_fragment(), low(kParent, 51));
  EXPECT_EQ(plh.current_fragment(), low(kCurrent, 51));
}

TEST(PositionalLineageHash, ChildParentFragmentEqualsParentCurrentFragmentAcrossModeBoundaries) {
  for (std::uint64_t position : {0ULL, 1ULL, 254ULL, 255ULL, 256ULL, 65534ULL, 65535ULL, 65536ULL, 16777214ULL}) {
    const PositionalLineageHash parent(SequenceHash(kParent), SequenceHash(kCurrent), position);
    const PositionalLineageHash child(SequenceHash(kCurrent), SequenceHash(kParent), position + 1);
    EXPECT_EQ(child.parent_fragment(), parent.current_fragment()) << "position " << position;
  }
  // The last position of a mode keeps only as many bits as its child's parent field.
  EXPECT_EQ(PositionalLineageHash(SequenceHash(kCurrent), std::nullopt, 255).current_fragment(), low(kCurrent, 55));
  EXPECT_EQ(PositionalLineageHash(SequenceHash(kCurrent), std::nullopt, 65535).current_fragment(), low(kCurrent, 51));
}

TEST(PositionalLineageHash, RootHasZeroParentFragment) {
  const PositionalLineageHash root(SequenceHash(kCurrent), std::nullopt, 0);
  EXPECT_EQ(root.parent_fragment(), 0U);
  EXPECT_EQ(root.position(), 0U);
  EXPECT_EQ(root, PositionalLineageHash(SequenceHash(kCurrent), std::nullopt, 0));
}

TEST(PositionalLineageHash, DistinguishesPositionParentAndCurrent) {
  std::unordered_set<PositionalLineageHash> seen;
  seen.insert(PositionalLineageHash(SequenceHash(5), std::nullopt, 0));
  seen.insert(PositionalLineageHash(SequenceHash(5), std::nullopt, 1));
  seen.insert(PositionalLineageHash(SequenceHash(5), SequenceHash(6), 1));
  seen.insert(PositionalLineageHash(SequenceHash(7), SequenceHash(6), 1));
  EXPECT_EQ(seen.size(), 4U);
}

TEST(PositionalLineageHash, RejectsPositionsAtOrPast2To24) {
  EXPECT_NO_THROW(PositionalLineageHash(SequenceHash(1), std::nullopt, (1U << 24) - 1));
  EXPECT_THROW(PositionalLineageHash(SequenceHash(1), std::nullopt, 1U << 24), ContractError);
  EXPECT_THROW(PositionalLineageHash(SequenceHash(1), std::nullopt, ~0ULL), ContractError);
}

}  // namespace
}  // namespace kvtier
