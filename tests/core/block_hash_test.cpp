#include "kvtier/core/block_hash.hpp"

#include <gtest/gtest.h>

#include <array>
#include <numeric>
#include <vector>

namespace kvtier {
namespace {

TEST(BlockHash, MatchesDynamoVectorsForTheFirstTwoBlocks) {
  const std::array<TokenId, 4> first{0, 1, 2, 3};
  const std::array<TokenId, 4> second{4, 5, 6, 7};
  const LocalBlockHash local0 = compute_local_block_hash(first);
  const SequenceHash seq0 = compute_sequence_hash(std::nullopt, local0);
  EXPECT_EQ(local0.value(), 9143094415614847814ULL);
  EXPECT_EQ(seq0.value(), 9143094415614847814ULL);
  const LocalBlockHash local1 = compute_local_block_hash(second);
  EXPECT_EQ(local1.value(), 12124091508212882195ULL);
  EXPECT_EQ(compute_sequence_hash(seq0, local1).value(), 9510318385840434533ULL);
}

TEST(BlockHash, SequenceHashEncodesThePrefix) {
  const std::array<TokenId, 4> a{0, 1, 2, 3};
  const std::array<TokenId, 4> b{9, 9, 9, 9};
  const LocalBlockHash local = compute_local_block_hash(a);
  EXPECT_NE(compute_sequence_hash(SequenceHash(1), local), compute_sequence_hash(SequenceHash(2), local));
  EXPECT_NE(compute_local_block_hash(a), compute_local_block_hash(b));
  const std::array<TokenId, 4> swapped{1, 0, 2, 3};
  EXPECT_NE(compute_local_block_hash(a), compute_local_block_hash(swapped));
}

TEST(BlockHash, HashFullBlocksChainsAndIgnoresTheTrailingPartial) {
  std::vector<TokenId> tokens(10);
  std::iota(tokens.begin(), tokens.end(), 0U);
  std::array<BlockHashes, 4> out{};
  ASSERT_EQ(hash_full_blocks(tokens, 4, std::nullopt, out), 2U);
  EXPECT_EQ(out[0].sequence.value(), 9143094415614847814ULL);
  EXPECT_EQ(out[1].local.value(), 12124091508212882195ULL);
  EXPECT_EQ(out[1].sequence.value(), 9510318385840434533ULL);
}

}  // namespace
}  // namespace kvtier
