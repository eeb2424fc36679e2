#include "kvtier/core/active_sequence.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <string>

#include "kvtier/core/errors.hpp"

namespace kvtier {
namespace {

std::vector<TokenId> token_range(TokenId first, TokenId end) {
  std::vector<TokenId> tokens(end - first);
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

ActiveSequenceConfig config(std::size_t block_size, std::size_t max_output = 0, bool caching = true,
                            bool emit_token_ids = false) {
  return ActiveSequenceConfig{.block_size = block_size,
                              .max_output_tokens = max_output,
                              .enable_prefix_caching = caching,
                              .emit_token_ids = emit_token_ids,
                              .planned_output = {},
                              .seed = std::nullopt};
}

std::vector<std::string> kinds(const std::vector<MoveBlock>& signals) {
  std::vector<std::string> out;
  for (const auto& s : signals) out.push_back(signal_name(s));
  return out;
}

// P21 (a): creation, lazy promotion on the first token of a new block, final Deref.
TEST(ActiveSequence, P21aDecodeSignals) {
  ActiveSequence seq(token_range(0, 14), config(16, 5));
  const auto creation = seq.take_creation_signal();
  ASSERT_TRUE(creation.has_value());
  ASSERT_EQ(creation->blocks.size(), 1U);
  EXPECT_TRUE(creation->blocks[0].is_partial());
  const Uuid first_partial = creation->blocks[0].uuid();

  EXPECT_TRUE(seq.generate().empty());  // length 15
  EXPECT_TRUE(seq.generate().empty());  // length 16: full, promoted lazily
  const auto third = seq.generate();    // length 17
  ASSERT_EQ(kinds(third), (std::vector<std::string>{"promote", "use"}));
  const auto& promote = std::get<PromoteSignal>(third[0]);
  EXPECT_EQ(promote.uuid, first_partial);
  EXPECT_FALSE(promote.parent.has_value());
  EXPECT_EQ(promote.hash, seq.blocks()[0].hash());
  const auto& use = std::get<UseSignal>(third[1]);
  ASSERT_EQ(use.blocks.size(), 1U);
  EXPECT_TRUE(use.blocks[0].is_partial());
  EXPECT_FALSE(use.parent.has_value());
  EXPECT_TRUE(use.local_hashes.empty());

  EXPECT_TRUE(seq.generate().empty());  // #4
  const auto last = seq.generate();     // #5: final
  ASSERT_EQ(kinds(last), (std::vector<std::string>{"deref"}));
  const auto& deref = std::get<DerefSignal>(last[0]);
  ASSERT_EQ(deref.blocks.size(), 2U);
  EXPECT_TRUE(deref.blocks[0].is_partial());
  EXPECT_TRUE(deref.blocks[1].is_full());
  EXPECT_TRUE(seq.is_complete());
}

// P21 (b): prepare slices full and partial blocks and is stable until commit.
TEST(ActiveSequence, P21bPrepareAllocationSlices) {
  ActiveSequence seq(token_range(0, 10), config(4));
  const auto four = seq.prepare_allocation(4);
  ASSERT_TRUE(four);
  EXPECT_EQ(four->blocks, std::vector<UniqueBlock>(seq.blocks().begin(), seq.blocks().begin() + 1));
  EXPECT_EQ(four->local_hashes.size(), 1U);
  const auto eight = seq.prepare_allocation(8);
  EXPECT_EQ(eight->blocks.size(), 2U);
  EXPECT_EQ(eight->local_hashes.size(), 2U);
  const auto ten = seq.prepare_allocation(10);
  EXPECT_EQ(ten->blocks.size(), 3U);
  EXPECT_EQ(ten->local_hashes.size(), 2U);
  EXPECT_EQ(ten->plhs.size(), 2U);
  EXPECT_TRUE(ten->blocks[2].is_partial());
  EXPECT_EQ(seq.prepare_allocation(4), four);  // pure

  seq.commit_allocation(4);
  const auto next = seq.prepare_allocation(8);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->blocks, std::vector<UniqueBlock>(seq.blocks().begin() + 1, seq.blocks().begin() + 2));
  EXPECT_EQ(next->local_hashes, std::vector<LocalBlockHash>{seq.local_hash(1)});
  EXPECT_EQ(next->parent, seq.blocks()[0]);
  EXPECT_FALSE(seq.prepare_allocation(3).has_value());
}

TEST(ActiveSequence, ChunkEndingInsideABlockStillCountsItsFullBlock) {
  ActiveSequence seq(token_range(0, 10), config(4));
  const auto use = seq.prepare_allocation(6);
  ASSERT_TRUE(use);
  EXPECT_EQ(use->blocks.size(), 2U);
  EXPECT_EQ(use->full_block_count(), 2U);
  EXPECT_EQ(use->local_hashes.size(), 2U);
}

TEST(ActiveSequence, FullBlocksCarryDynamoHashesAndLinkedLineage) {
  ActiveSequence seq(token_range(0, 9), config(4));
  ASSERT_EQ(seq.blocks().size(), 3U);
  EXPECT_EQ(seq.blocks()[0].hash().value(), 9143094415614847814ULL);
  EXPECT_EQ(seq.local_hash(1).value(), 12124091508212882195ULL);
  EXPECT_EQ(seq.blocks()[1].hash().value(), 9510318385840434533ULL);
  EXPECT_EQ(seq.plh(0), PositionalLineageHash(seq.blocks()[0].hash(), std::nullopt, 0));
  EXPECT_EQ(seq.plh(1), PositionalLineageHash(seq.blocks()[1].hash(), seq.blocks()[0].hash(), 1));
  EXPECT_EQ(seq.plh(1).parent_fragment(), seq.plh(0).current_fragment());
  EXPECT_TRUE(seq.blocks()[2].is_partial());
}

TEST(ActiveSequence, EmitsTokenIdsPerFullBlockOnlyWhenAsked) {
  ActiveSequence with_ids(token_range(0, 9), config(4, 0, true, true));
  const auto use = with_ids.prepare_allocation(9);
  ASSERT_TRUE(use->token_ids.has_value());
  EXPECT_EQ(*use->token_ids, (BlockTokenIds{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  ActiveSequence without(token_range(0, 9), config(4));
  EXPECT_FALSE(without.prepare_allocation(9)->token_ids.has_value());
  ActiveSequence partial_only(token_range(0, 3), config(4, 0, true, true));
  EXPECT_FALSE(partial_only.prepare_allocation(3)->token_ids.has_value());
}

TEST(ActiveSequence, CachingOffUsesRandomIdentitiesAndNoLocalHashesOrTokenIds) {
  ActiveSequence a(token_range(0, 8), config(4, 0, false, true));
  ActiveSequence b(token_range(0, 8), config(4, 0, false, true));
  EXPECT_FALSE(a.emits_token_ids());
  EXPECT_NE(a.blocks()[0], b.blocks()[0]);
  EXPECT_NE(a.blocks()[0].hash().value(), 9143094415614847814ULL);
  const auto use = a.prepare_allocation(8);
  EXPECT_TRUE(use->local_hashes.empty());
  ASSERT_EQ(use->plhs.size(), 2U);
  EXPECT_EQ(use->plhs[1].position(), 1U);
  EXPECT_EQ(use->plhs[1].parent_fragment(), 0U);
  EXPECT_FALSE(use->token_ids.has_value());
}

TEST(ActiveSequence, CachingOffKeepsItsIdentitiesAcrossPreemption) {
  ActiveSequence seq(token_range(0, 8), config(4, 0, false));
  const auto first = seq.take_creation_signal();
  const auto deref = seq.reset_with_signal();
  ASSERT_TRUE(deref);
  EXPECT_EQ(seq.num_allocated_tokens(), 0U);
  EXPECT_EQ(seq.prepare_allocation(8), first);
}

TEST(ActiveSequence, FreeSignalListsAllocatedBlocksLeafFirst) {
  ActiveSequence seq(token_range(0, 10), config(4));
  EXPECT_FALSE(seq.free_signal().has_value());
  seq.commit_allocation(8);
  const auto deref = seq.free_signal();
  ASSERT_TRUE(deref);
  EXPECT_EQ(deref->blocks, (std::vector<UniqueBlock>{seq.blocks()[1], seq.blocks()[0]}));
  EXPECT_EQ(seq.reset_with_signal(), deref);
  EXPECT_EQ(seq.num_allocated_tokens(), 0U);
  EXPECT_FALSE(seq.free_signal().has_value());
}

TEST(ActiveSequence, PromoteComputedTailPromotesEagerlyOnlyWhenExactlyFull) {
  ActiveSequence seq(token_range(0, 6), config(4, 10));
  EXPECT_FALSE(seq.promote_computed_tail(6).has_value());  // not a block boundary
  EXPECT_TRUE(seq.push(6).empty());
  EXPECT_TRUE(seq.push(7).empty());
  EXPECT_FALSE(seq.promote_computed_tail(4).has_value());  // not the whole length
  const auto promote = seq.promote_computed_tail(8);
  ASSERT_TRUE(promote);
  EXPECT_EQ(promote->parent, seq.blocks()[0].hash());
  EXPECT_EQ(promote->hash, compute_sequence_hash(seq.blocks()[0].hash(), compute_local_block_hash(token_range(4, 8))));
  EXPECT_EQ(promote->plh, PositionalLineageHash(promote->hash, seq.blocks()[0].hash(), 1));
  EXPECT_TRUE(seq.blocks()[1].is_full());
  EXPECT_FALSE(seq.promote_computed_tail(8).has_value());
  // The next token only opens a new partial: the tail was promoted already.
  EXPECT_EQ(kinds(seq.push(8)), (std::vector<std::string>{"use"}));
}

TEST(ActiveSequence, PromoteCarriesTokenIdsWhenEmitting) {
  ActiveSequence seq(token_range(0, 3), config(4, 10, true, true));
  seq.push(3);
  const auto signals = seq.push(4);
  const auto& promote = std::get<PromoteSignal>(signals.at(0));
  EXPECT_EQ(promote.token_ids, (std::vector<TokenId>{0, 1, 2, 3}));
  EXPECT_EQ(promote.local, compute_local_block_hash(token_range(0, 4)));
}

TEST(ActiveSequence, AlignedPromptOpensNewPartialWithoutPromote) {
  ActiveSequence seq(token_range(0, 8), config(4, 3));
  EXPECT_EQ(seq.blocks().size(), 2U);
  EXPECT_EQ(kinds(seq.push(8)), (std::vector<std::string>{"use"}));
  EXPECT_EQ(seq.blocks().size(), 3U);
}

TEST(ActiveSequence, PopUndoesAGeneratedTokenAndDropsTheNewPartial) {
  ActiveSequenceConfig cfg = config(4, 5);
  cfg.planned_output = {100, 101, 102};
  ActiveSequence seq(token_range(0, 4), cfg);
  EXPECT_THROW(seq.pop(), ContractError);
  seq.generate();  // length 5 opens a partial
  EXPECT_EQ(seq.blocks().size(), 2U);
  EXPECT_EQ(seq.tokens().back(), 100U);
  seq.pop();
  EXPECT_EQ(seq.len(), 4U);
  EXPECT_EQ(seq.blocks().size(), 1U);
  EXPECT_EQ(seq.generated_tokens(), 0U);
  seq.generate();
  EXPECT_EQ(seq.tokens().back(), 100U);  // the planned token comes again
}

TEST(ActiveSequence, FootprintsCountBlocks) {
  ActiveSequence seq(token_range(0, 10), config(4, 7));
  EXPECT_EQ(seq.current_known_blocks(), 3U);
  EXPECT_EQ(seq.to_completion_blocks(), 5U);
}

TEST(ActiveSequence, RejectsBlockSizeBelowTwo) {
  EXPECT_THROW(ActiveSequence(token_range(0, 4), config(1)), ContractError);
  EXPECT_THROW(ActiveSequence(token_range(0, 4), config(0)), ContractError);
}

TEST(ActiveSequence, AnOutputLengthPastTheTokenLimitIsRefusedNotReservedOrWrapped) {
  // Regression (issue 23): 2^64 - 1 wrapped the footprint; 2^63 reserved beyond memory.
  for (const std::size_t output : {SIZE_MAX, SIZE_MAX - 2, std::size_t{1} << 63, kMaxSequenceTokens}) {
    EXPECT_THROW(ActiveSequence(token_range(0, 4), config(4, output)), ContractError) << output;
  }
  const ActiveSequence longest(token_range(0, 4), config(4, kMaxSequenceTokens - 4));
  EXPECT_EQ(longest.to_completion_blocks(), kMaxSequenceTokens / 4);
}

}  // namespace
}  // namespace kvtier
