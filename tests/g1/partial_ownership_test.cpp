// Regression tests of issue #13 at the library level, run on both backends:
// a partial block has one owner once; token id lists hold block_size tokens;
// a finalize whose tail Promote would be refused publishes nothing; audit()
// holds after each step.
#include <gtest/gtest.h>

#include "g1/g1_test_support.hpp"
#include "kvtier/core/errors.hpp"

namespace kvtier::g1 {
namespace {

using namespace testing;

const OwnerId kA(1), kB(2), kC(3);

class PartialOwnership : public ::testing::TestWithParam<G1Backend> {
 protected:
  G1ManagerConfig config(std::uint32_t capacity) const {
    return G1ManagerConfig{.capacity = capacity, .block_size = 4, .dp_rank = 0, .backend = GetParam()};
  }
  static UseSignal use_partial(const Uuid& uuid) {
    UseSignal use;
    use.blocks = {UniqueBlock::partial(uuid)};
    return use;
  }
};

TEST_P(PartialOwnership, SharedPartialPageHandedToTwoRequestsIsRefused) {
  // The reproduction: b's Use of a's live partial must be refused, or
  // a's Deref frees a page b's table still lists and c is handed it.
  ManagerWithSink m(config(2));
  const Uuid p = Uuid::random();
  ASSERT_EQ(m.manager.process_for_request(kA, use_partial(p)), G1Acquire::ready(1));
  const G1Metrics before = m.manager.metrics();
  try {
    m.manager.process_for_request(kB, use_partial(p));
    FAIL() << "a second holder of a live partial was accepted";
  } catch (const ContractError& error) {
    EXPECT_NE(std::string(error.what()).find("is already allocated"), std::string::npos) << error.what();
  }
  EXPECT_FALSE(m.manager.has_owner(kB));
  EXPECT_EQ(m.manager.metrics().active_block_refs, before.active_block_refs);
  m.manager.audit();

  m.manager.process_for_request(kA, DerefSignal{{UniqueBlock::partial(p)}});
  ASSERT_EQ(m.manager.process_for_request(kC, use_partial(Uuid::random())), G1Acquire::ready(1));
  EXPECT_FALSE(m.manager.has_owner(kB));
  EXPECT_EQ(m.manager.metrics().active_block_refs, 1U);
  m.manager.audit();
}

TEST_P(PartialOwnership, RepeatedPartialBySameOwnerAddsNoSecondTableEntry) {
  ManagerWithSink m(config(4));
  const Uuid p = Uuid::random();
  m.manager.process_for_request(kA, use_partial(p));
  EXPECT_THROW(m.manager.process_for_request(kA, use_partial(p)), ContractError);
  EXPECT_EQ(m.manager.block_table(kA).size(), 1U);
  m.manager.audit();
  m.manager.process_for_request(kA, DerefSignal{{UniqueBlock::partial(p)}});
  EXPECT_FALSE(m.manager.has_owner(kA));
  EXPECT_EQ(m.manager.metrics().active_blocks, 0U);
  m.manager.audit();
}

TEST_P(PartialOwnership, DecodeUseOfALivePartialIsRefusedAndKeepsTheReservation) {
  ManagerWithSink m(config(4));
  const Uuid p = Uuid::random();
  m.manager.process_for_request(kA, use_partial(p));
  auto reservation = m.manager.reserve_decode_blocks(1);
  ASSERT_TRUE(reservation);
  EXPECT_THROW(m.manager.process_decode_signal_for_request(kB, use_partial(p), *reservation), ContractError);
  m.manager.audit();
  // The reserved slot is still there for a fresh partial.
  EXPECT_EQ(m.manager.process_decode_signal_for_request(kB, use_partial(Uuid::random()), *reservation),
            G1Acquire::ready(1));
  m.manager.audit();
}

TEST_P(PartialOwnership, TokenIdListsMustHoldBlockSizeTokens) {
  ManagerWithSink m(config(4));
  UseSignal use = use_full({7, 8});
  use.token_ids = BlockTokenIds{{1, 2, 3, 4}, {5, 6}};
  EXPECT_THROW(m.manager.process_for_request(kA, use), ContractError);
  EXPECT_FALSE(m.manager.has_owner(kA));
  use.token_ids = BlockTokenIds{{1, 2, 3, 4}, {5, 6, 7, 8}};
  EXPECT_EQ(m.manager.process_for_request(kA, use), G1Acquire::ready(2));

  const Uuid p = Uuid::random();
  m.manager.process_for_request(kB, use_partial(p));
  m.sink->clear();
  const auto promote = [&](std::vector<TokenId> tokens) {
    return PromoteSignal{.uuid = p,
                         .hash = SequenceHash(9),
                         .parent = std::nullopt,
                         .local = LocalBlockHash(0),
                         .plh = PositionalLineageHash(SequenceHash(9), std::nullopt, 0),
                         .token_ids = std::move(tokens)};
  };
  EXPECT_THROW(m.manager.process_for_request(kB, promote({1, 2, 3, 4, 5})), ContractError);
  EXPECT_TRUE(m.manager.owned_blocks(kB)[0].is_partial());
  EXPECT_TRUE(m.sink->events().empty());
  m.manager.process_for_request(kB, promote({1, 2, 3, 4}));
  EXPECT_TRUE(m.manager.owned_blocks(kB)[0].is_full());
  m.manager.audit();
}

TEST_P(PartialOwnership, EmptyUseLeavesNoEmptyTableBehind) {
  // Found by the operation harness: an empty Use created an owner with an
  // empty table (has_owner true, nothing to Deref, and its first real
  // allocation could no longer reuse a prefix).
  ManagerWithSink m(config(4));
  EXPECT_EQ(m.manager.process_for_request(kA, UseSignal{}), G1Acquire::ready(0));
  EXPECT_FALSE(m.manager.has_owner(kA));
  m.manager.audit();
}

INSTANTIATE_TEST_SUITE_P(Backends, PartialOwnership, ::testing::Values(G1Backend::Native, G1Backend::Kvbm),
                         [](const auto& param_info) { return std::string(backend_name(param_info.param)); });

TEST(NativeFinalize, FinalizeWithSequenceRefusedBeforeAnythingIsPublished) {
  // The tail Promote of an unallocated sequence used to be refused after the
  // computed prefix had been published (its Stored event lost).
  ManagerWithSink m(G1ManagerConfig{.capacity = 8, .block_size = 4});
  ActiveSequence sequence(token_range(0, 6), ActiveSequenceConfig{.block_size = 4,
                                                                  .max_output_tokens = 0,
                                                                  .enable_prefix_caching = true,
                                                                  .emit_token_ids = false,
                                                                  .planned_output = {},
                                                                  .seed = std::nullopt});
  const auto use = sequence.prepare_allocation(4);  // the full block only: the tail is not allocated
  ASSERT_TRUE(use);
  m.manager.process_for_request(kA, *use);
  sequence.commit_allocation(4);
  sequence.push(6);
  sequence.push(7);  // len 8: the tail is computed, but not in kA's table
  const ActiveSequence before = sequence;
  EXPECT_THROW(m.manager.finalize_computed_prefix(kA, 0, 8, &sequence), ContractError);
  EXPECT_TRUE(m.sink->events().empty());
  EXPECT_FALSE(m.manager.is_cached(sequence.blocks()[0].hash()));
  EXPECT_TRUE(sequence.blocks().back().is_partial());
  EXPECT_EQ(sequence.blocks().back(), before.blocks().back());
  m.manager.audit();
}

}  // namespace
}  // namespace kvtier::g1
