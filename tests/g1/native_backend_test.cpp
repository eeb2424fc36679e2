// The native backend through the G1Manager facade: worked examples P6–P10
// (docs/semantics.md §7.2, in their N1 form) and the validation rules of §2.4.
#include <gtest/gtest.h>

#include "g1/g1_test_support.hpp"
#include "kvtier/core/errors.hpp"

namespace kvtier::g1 {
namespace {

using namespace testing;
using Data = std::variant<KvStored, KvRemoved>;

G1ManagerConfig native(std::uint32_t capacity, std::uint32_t block_size = 4, bool caching = true) {
  return G1ManagerConfig{.capacity = capacity,
                         .block_size = block_size,
                         .dp_rank = 0,
                         .backend = G1Backend::Native,
                         .enable_prefix_caching = caching};
}

const OwnerId kA(1), kB(2), kC(3);

TEST(NativeBackend, P6DuplicateFullHashesConsumePhysicalCapacity) {
  ManagerWithSink m(native(2));
  for (OwnerId owner : {kA, kB}) {
    EXPECT_EQ(m.manager.process_for_request(owner, use_full({7})), G1Acquire::ready(1));
    m.manager.finalize_computed_prefix(owner, 0, 4);
  }
  EXPECT_EQ(m.manager.num_active_blocks(), 2U);
  EXPECT_EQ(m.manager.process_for_request(kC, use_full({8})), G1Acquire::capacity_exhausted());
  EXPECT_FALSE(m.manager.has_owner(kC));
  EXPECT_EQ(m.data(), (std::vector<Data>{stored(std::nullopt, {{7, 107}})}));
  EXPECT_NE(m.manager.block_table(kA)[0], m.manager.block_table(kB)[0]);
}

TEST(NativeBackend, P7aFullBlockIsHiddenUntilComputed) {
  G1Manager manager(native(2));
  manager.process_for_request(kA, use_full({7}));
  EXPECT_FALSE(manager.is_cached(SequenceHash(7)));
  manager.finalize_computed_prefix(kA, 0, 4);
  EXPECT_TRUE(manager.is_cached(SequenceHash(7)));
}

TEST(NativeBackend, P7bFinalizationOnlyVisitsBlocksCompletedByThisDecision) {
  G1Manager manager(native(2));
  manager.process_for_request(kA, use_full({7, 8}));
  manager.finalize_computed_prefix(kA, 0, 4);
  EXPECT_TRUE(manager.is_cached(SequenceHash(7)));
  EXPECT_FALSE(manager.is_cached(SequenceHash(8)));
  manager.finalize_computed_prefix(kA, 4, 8);
  EXPECT_TRUE(manager.is_cached(SequenceHash(8)));
}

TEST(NativeBackend, P7cFinalizationHandlesUnalignedDecisionBoundaries) {
  G1Manager manager(native(3));
  manager.process_for_request(kA, use_full({7, 8, 9}));
  manager.finalize_computed_prefix(kA, 3, 9);
  EXPECT_TRUE(manager.is_cached(SequenceHash(7)));
  EXPECT_TRUE(manager.is_cached(SequenceHash(8)));
  EXPECT_FALSE(manager.is_cached(SequenceHash(9)));
}

TEST(NativeBackend, P8RequestReleaseEvictsLeafBeforeParent) {
  ManagerWithSink m(native(2));
  m.manager.process_for_request(kA, use_full({7, 8}));
  m.manager.finalize_computed_prefix(kA, 0, 8);
  m.manager.process_for_request(kA, deref_full({8, 7}));
  EXPECT_EQ(m.manager.num_inactive_blocks(), 2U);
  EXPECT_EQ(m.manager.process_for_request(kB, use_full({9})), G1Acquire::ready(1));
  EXPECT_TRUE(m.manager.is_cached(SequenceHash(7)));
  EXPECT_FALSE(m.manager.is_cached(SequenceHash(8)));
  m.manager.finalize_computed_prefix(kB, 0, 4);
  ASSERT_EQ(m.sink->events().size(), 3U);
  EXPECT_EQ(m.data(), (std::vector<Data>{stored(std::nullopt, {{7, 107}, {8, 108}}), removed({8}),
                                         stored(std::nullopt, {{9, 109}})}));
  for (std::uint64_t id = 0; id < 3; ++id) EXPECT_EQ(m.sink->events()[id].id, id);
}

TEST(NativeBackend, P9ParentIsPublishedBeforeThePromotedTail) {
  ManagerWithSink m(native(8));
  ActiveSequence seq(token_range(0, 8), ActiveSequenceConfig{.block_size = 4,
                                                             .max_output_tokens = 8,
                                                             .enable_prefix_caching = true,
                                                             .emit_token_ids = false,
                                                             .planned_output = {8, 9, 10, 11},
                                                             .seed = std::nullopt});
  EXPECT_TRUE(m.manager.process_for_request(kA, *seq.prepare_allocation(8)).is_ready());
  seq.commit_allocation(8);
  m.manager.finalize_computed_prefix(kA, 0, 8, &seq);
  for (int i = 0; i < 4; ++i) {
    for (const MoveBlock& signal : seq.generate()) ASSERT_TRUE(m.manager.process_for_request(kA, signal).is_ready());
  }
  seq.commit_allocation(12);
  m.manager.finalize_computed_prefix(kA, 8, 12, &seq);
  const SequenceHash b0 = compute_sequence_hash(std::nullopt, compute_local_block_hash(token_range(0, 4)));
  const SequenceHash b1 = compute_sequence_hash(b0, compute_local_block_hash(token_range(4, 8)));
  const SequenceHash b2 = compute_sequence_hash(b1, compute_local_block_hash(token_range(8, 12)));
  ASSERT_EQ(m.sink->events().size(), 2U);
  const auto& first = std::get<KvStored>(m.sink->events()[0].data);
  const auto& second = std::get<KvStored>(m.sink->events()[1].data);
  EXPECT_FALSE(first.parent.has_value());
  ASSERT_EQ(first.blocks.size(), 2U);
  EXPECT_EQ(first.blocks[0].hash, b0);
  EXPECT_EQ(first.blocks[1].hash, b1);
  EXPECT_EQ(second.parent, b1);
  ASSERT_EQ(second.blocks.size(), 1U);
  EXPECT_EQ(second.blocks[0].hash, b2);
}

TEST(NativeBackend, P10FacadeRejectsMisalignedLineageMetadata) {
  G1Manager manager(native(2));
  UseSignal use = use_full({7});
  use.plhs.clear();
  try {
    manager.process_for_request(kA, use);
    FAIL();
  } catch (const ContractError& error) {
    EXPECT_STREQ(error.what(), "PLHs must align with full blocks");
  }
  EXPECT_EQ(manager.num_active_blocks(), 0U);
}

TEST(NativeBackend, PrefixHitsAreSharedPagesWithoutEvents) {
  ManagerWithSink m(native(4));
  m.manager.process_for_request(kA, use_full({7, 8}));
  m.manager.finalize_computed_prefix(kA, 0, 8);
  m.sink->clear();
  EXPECT_EQ(m.manager.process_for_request(kB, use_full({7, 8, 9}), 2), G1Acquire::ready(3));
  EXPECT_TRUE(m.sink->events().empty());
  EXPECT_EQ(m.manager.block_table(kB)[0], m.manager.block_table(kA)[0]);
  EXPECT_EQ(m.manager.block_table(kB)[1], m.manager.block_table(kA)[1]);
  EXPECT_EQ(m.manager.num_active_blocks(), 3U);
  EXPECT_EQ(m.manager.num_active_block_refs(), 5U);
  // Finalizing the whole request publishes only the fresh block, parented on the prefix.
  m.manager.finalize_computed_prefix(kB, 0, 12);
  EXPECT_EQ(m.data(), (std::vector<Data>{stored(8, {{9, 109}})}));
}

TEST(NativeBackend, ReuseIsOnlyForTheFirstAllocationAndOnlyOfResidentFullBlocks) {
  G1Manager manager(native(4));
  manager.process_for_request(kA, use_full({7}));
  EXPECT_THROW(manager.process_for_request(kA, use_full({8}, 7), 1), ContractError);
  EXPECT_THROW(manager.process_for_request(kB, use_full({7}), 1), ContractError);  // 7 not finalized: not resident
  EXPECT_THROW(manager.process_for_request(kB, use_full({7}), 2), ContractError);  // more than the Use
  EXPECT_FALSE(manager.has_owner(kB));
  EXPECT_EQ(manager.num_active_blocks(), 1U);
  G1Manager no_cache(native(4, 4, false));
  no_cache.process_for_request(kA, use_full({7}));
  EXPECT_THROW(no_cache.process_for_request(kB, use_full({7}), 1), ContractError);
}

TEST(NativeBackend, DerefMustListTheTailLeafFirst) {
  G1Manager manager(native(4));
  manager.process_for_request(kA, use_full({7, 8, 9}));
  const auto pages_before = std::vector<PageId>(manager.block_table(kA).begin(), manager.block_table(kA).end());
  EXPECT_THROW(manager.process_for_request(kA, deref_full({7, 8})), ContractError);
  EXPECT_THROW(manager.process_for_request(kA, deref_full({8})), ContractError);
  EXPECT_THROW(manager.process_for_request(kB, deref_full({9})), ContractError);
  EXPECT_EQ(std::vector<PageId>(manager.block_table(kA).begin(), manager.block_table(kA).end()), pages_before);
  manager.process_for_request(kA, deref_full({9, 8}));
  EXPECT_EQ(manager.block_table(kA).size(), 1U);
  manager.process_for_request(kA, deref_full({7}));
  EXPECT_FALSE(manager.has_owner(kA));
  EXPECT_THROW(manager.process_for_request(kA, deref_full({7})), ContractError);  // double release
  EXPECT_EQ(manager.num_active_blocks(), 0U);
  EXPECT_EQ(manager.num_inactive_blocks(), 0U);  // never finalized: private pages were freed
}

TEST(NativeBackend, UseValidatesMetadataAndPartials) {
  G1Manager manager(native(4));
  UseSignal bad_local = use_full({7, 8});
  bad_local.local_hashes.pop_back();
  EXPECT_THROW(manager.process_for_request(kA, bad_local), ContractError);
  UseSignal bad_tokens = use_full({7});
  bad_tokens.token_ids = BlockTokenIds{};
  EXPECT_THROW(manager.process_for_request(kA, bad_tokens), ContractError);
  const Uuid partial = Uuid::random();
  UseSignal partial_parent = use_full({7});
  partial_parent.parent = UniqueBlock::partial(partial);
  EXPECT_THROW(manager.process_for_request(kA, partial_parent), ContractError);
  UseSignal partial_first;
  partial_first.blocks = {UniqueBlock::partial(partial), UniqueBlock::full(SequenceHash(7))};
  partial_first.plhs.emplace_back(SequenceHash(7), std::nullopt, 0);
  EXPECT_THROW(manager.process_for_request(kA, partial_first), ContractError);
  UseSignal with_partial;
  with_partial.blocks = {UniqueBlock::partial(partial)};
  EXPECT_TRUE(manager.process_for_request(kA, with_partial).is_ready());
  EXPECT_THROW(manager.process_for_request(kB, with_partial), ContractError);  // already allocated
  EXPECT_EQ(manager.num_active_blocks(), 1U);
}

TEST(NativeBackend, PromoteCachesTheTailAndPublishesOneBlock) {
  ManagerWithSink m(native(4));
  const Uuid partial = Uuid::random();
  m.manager.process_for_request(kA, use_full({7}));
  m.manager.finalize_computed_prefix(kA, 0, 4);
  UseSignal tail;
  tail.blocks = {UniqueBlock::partial(partial)};
  tail.parent = UniqueBlock::full(SequenceHash(7));
  m.manager.process_for_request(kA, tail);
  EXPECT_THROW(m.manager.process_for_request(kA, PromoteSignal{.uuid = Uuid::random(),
                                                               .hash = SequenceHash(8),
                                                               .parent = SequenceHash(7),
                                                               .local = LocalBlockHash(108),
                                                               .plh = {},
                                                               .token_ids = std::nullopt}),
               ContractError);
  m.manager.process_for_request(kA, PromoteSignal{.uuid = partial,
                                                  .hash = SequenceHash(8),
                                                  .parent = SequenceHash(7),
                                                  .local = LocalBlockHash(108),
                                                  .plh = {},
                                                  .token_ids = std::vector<TokenId>{1, 2, 3, 4}});
  EXPECT_TRUE(m.manager.is_cached(SequenceHash(8)));
  ASSERT_EQ(m.sink->events().size(), 2U);
  KvStored expected = stored(7, {{8, 108}});
  expected.token_ids = BlockTokenIds{{1, 2, 3, 4}};
  EXPECT_EQ(m.sink->events()[1].data, Data(expected));
  EXPECT_EQ(m.manager.owned_blocks(kA)[1], UniqueBlock::full(SequenceHash(8)));
}

TEST(NativeBackend, StoredRunsSplitAtDuplicatesAndWhereTokenIdPresenceChanges) {
  ManagerWithSink m(native(8));
  m.manager.process_for_request(kA, use_full({2}, 1));
  m.manager.finalize_computed_prefix(kA, 0, 4);
  m.sink->clear();
  // B's blocks 1 and 3 are fresh; block 2 is a duplicate of A's (not newly visible).
  UseSignal use = use_full({1, 2, 3, 4});
  use.token_ids = BlockTokenIds{{1, 1, 1, 1}, {2, 2, 2, 2}, {3, 3, 3, 3}, {4, 4, 4, 4}};
  m.manager.process_for_request(kB, use);
  m.manager.finalize_computed_prefix(kB, 0, 16);
  ASSERT_EQ(m.sink->events().size(), 2U);
  KvStored first = stored(std::nullopt, {{1, 101}});
  first.token_ids = BlockTokenIds{{1, 1, 1, 1}};
  KvStored second = stored(2, {{3, 103}, {4, 104}});
  second.token_ids = BlockTokenIds{{3, 3, 3, 3}, {4, 4, 4, 4}};
  EXPECT_EQ(m.data(), (std::vector<Data>{first, second}));
}

TEST(NativeBackend, CachingOffCachesNothingAndPublishesNothing) {
  ManagerWithSink m(native(2, 4, false));
  m.manager.process_for_request(kA, use_full({7, 8}));
  m.manager.finalize_computed_prefix(kA, 0, 8);
  EXPECT_FALSE(m.manager.is_cached(SequenceHash(7)));
  m.manager.process_for_request(kA, deref_full({8, 7}));
  EXPECT_EQ(m.manager.num_inactive_blocks(), 0U);
  EXPECT_EQ(m.manager.num_active_blocks(), 0U);
  EXPECT_TRUE(m.sink->events().empty());
}

TEST(NativeBackend, MetricsFollowSection14) {
  G1Manager manager(native(8));
  manager.process_for_request(kA, use_full({7, 8}));
  manager.finalize_computed_prefix(kA, 0, 4);  // 7 cached, 8 private
  auto decode = manager.reserve_decode_blocks(3);
  ASSERT_TRUE(decode);
  EXPECT_EQ(manager.num_active_blocks(), 5U);  // 2 copies + 3 reserved
  EXPECT_EQ(manager.num_active_block_refs(), 2U);
  manager.release_decode_reservation(std::move(*decode));
  manager.process_for_request(kA, deref_full({8, 7}));
  EXPECT_EQ(manager.num_active_blocks(), 0U);
  EXPECT_EQ(manager.num_inactive_blocks(), 1U);
  EXPECT_DOUBLE_EQ(manager.get_active_perc(), 0.0);
}

TEST(NativeBackend, DecodeReservationFeedsUsesAndIsAtomic) {
  ManagerWithSink m(native(3));
  m.manager.process_for_request(kA, use_full({7, 8}));
  m.manager.finalize_computed_prefix(kA, 0, 8);
  m.manager.process_for_request(kA, deref_full({8, 7}));
  EXPECT_FALSE(m.manager.reserve_decode_blocks(4).has_value());
  EXPECT_EQ(m.manager.num_inactive_blocks(), 2U);
  auto decode = m.manager.reserve_decode_blocks(2);  // 1 free page + evicts 8
  ASSERT_TRUE(decode);
  EXPECT_EQ(m.data().back(), Data(removed({8})));
  UseSignal first;
  first.blocks = {UniqueBlock::partial(Uuid::random())};
  EXPECT_TRUE(m.manager.process_decode_signal_for_request(kB, first, *decode).is_ready());
  EXPECT_THROW(m.manager.process_decode_signal_for_request(kC, use_full({20, 21}), *decode), ContractError);
  EXPECT_FALSE(m.manager.has_owner(kC));
  UseSignal second;
  second.blocks = {UniqueBlock::partial(Uuid::random())};
  EXPECT_TRUE(m.manager.process_decode_signal_for_request(kC, second, *decode).is_ready());
  EXPECT_EQ(m.manager.num_active_blocks(), 2U);
  DecodeReservation copy = *decode;
  m.manager.release_decode_reservation(std::move(*decode));
  EXPECT_THROW(m.manager.release_decode_reservation(std::move(copy)), ContractError);  // released twice
}

TEST(NativeBackend, ReservationHandlesAreCheckedAgainstBackendAndManager) {
  G1Manager first(native(4));
  G1Manager second(native(4));
  auto decode = first.reserve_decode_blocks(1);
  ASSERT_TRUE(decode);
  DecodeReservation foreign = *decode;
  try {
    second.release_decode_reservation(std::move(foreign));
    FAIL();
  } catch (const ContractError& error) {
    EXPECT_NE(std::string(error.what()).find("different G1 manager"), std::string::npos);
  }
  DecodeReservation kvbm = *decode;
  kvbm.backend = G1Backend::Kvbm;
  try {
    first.release_decode_reservation(std::move(kvbm));
    FAIL();
  } catch (const ContractError& error) {
    EXPECT_NE(std::string(error.what()).find("belongs to a different G1 backend"), std::string::npos);
  }
  first.release_decode_reservation(std::move(*decode));
  EXPECT_EQ(first.num_active_blocks(), 0U);
}

// The native analogue of P18: transferable tokens shrink by the resident prefix.
TEST(NativeBackend, DestinationTransferFootprintUsesMissingPhysicalBlocks) {
  ManagerWithSink m(native(16));
  const ActiveSequenceConfig cfg{.block_size = 4,
                                 .max_output_tokens = 4,
                                 .enable_prefix_caching = true,
                                 .emit_token_ids = true,
                                 .planned_output = {},
                                 .seed = std::nullopt};
  ActiveSequence prompt(token_range(0, 10), cfg);
  auto first = m.manager.reserve_destination_at(OwnerId(10), prompt);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->transferable_prompt_tokens, 12U);
  m.manager.cancel_destination(std::move(*first));
  EXPECT_EQ(m.manager.num_active_blocks(), 0U);

  ActiveSequence short_request(token_range(0, 4), cfg);
  m.manager.process_for_request(kA, *short_request.take_creation_signal());
  m.manager.finalize_computed_prefix(kA, 0, 4);
  auto second = m.manager.reserve_destination_at(OwnerId(10), prompt);
  EXPECT_EQ(second->transferable_prompt_tokens, 8U);

  m.sink->clear();
  m.manager.activate_destination(std::move(*second));
  // Transferred KV is computed: block 1 is stored at once, parented on the reused block 0.
  ASSERT_EQ(m.sink->events().size(), 1U);
  const auto& run = std::get<KvStored>(m.sink->events()[0].data);
  EXPECT_EQ(run.parent, prompt.blocks()[0].hash());
  ASSERT_EQ(run.blocks.size(), 1U);
  EXPECT_EQ(run.blocks[0].hash, prompt.blocks()[1].hash());
  EXPECT_EQ(run.token_ids, BlockTokenIds{token_range(4, 8)});
  EXPECT_EQ(m.manager.block_table(OwnerId(10)).size(), 3U);
  EXPECT_EQ(m.manager.block_table(OwnerId(10))[0], m.manager.block_table(kA)[0]);

  ActiveSequence other(token_range(20, 28), cfg);
  m.manager.process_for_request(kB, *other.take_creation_signal());
  m.manager.finalize_computed_prefix(kB, 0, 8);
  auto third = m.manager.reserve_destination_at(OwnerId(11), other);
  EXPECT_EQ(third->transferable_prompt_tokens, 0U);
  EXPECT_THROW(m.manager.reserve_destination_at(OwnerId(10), other), ContractError);  // owner owns blocks
  m.manager.cancel_destination(std::move(*third));
}

TEST(NativeBackend, PrefillCostCountsTheCachedPrefixAndItsActivePart) {
  G1Manager manager(native(8));
  const ActiveSequenceConfig cfg{.block_size = 4,
                                 .max_output_tokens = 0,
                                 .enable_prefix_caching = true,
                                 .emit_token_ids = false,
                                 .planned_output = {},
                                 .seed = std::nullopt};
  ActiveSequence owner_a(token_range(0, 8), cfg);
  manager.process_for_request(kA, *owner_a.take_creation_signal());
  manager.finalize_computed_prefix(kA, 0, 8);
  manager.process_for_request(kA, DerefSignal{{owner_a.blocks()[1]}});  // block 1 inactive, block 0 active
  ActiveSequence probe(token_range(0, 10), cfg);
  EXPECT_EQ(manager.get_prefill_cost(probe),
            (PrefillCost{.new_blocks = 1, .new_tokens = 2, .cached_tokens = 8, .active_cached_tokens = 4}));
  ActiveSequence miss(token_range(100, 110), cfg);
  EXPECT_EQ(manager.get_prefill_cost(miss).cached_tokens, 0U);
}

TEST(NativeBackend, OffloadCallsAnswerNoEngine) {
  G1Manager manager(native(4));
  EXPECT_FALSE(manager.has_offload_engine());
  EXPECT_FALSE(manager.earliest_offload_deadline().has_value());
  EXPECT_FALSE(manager.try_pin_g1_prefix({}).has_value());
  EXPECT_EQ(manager.try_batch_swap_in({}, std::nullopt, 0.0).status, SwapInStatus::NoHits);
  EXPECT_FALSE(manager.cancel_swap_in(1));
  EXPECT_THROW(manager.attach_offload_engine(nullptr), ContractError);
  EXPECT_THROW(manager.register_completed_swap_in(1), ContractError);
}

TEST(NativeBackend, ImpossibleConfigurationsAreRejected) {
  EXPECT_THROW(G1Manager(native(0)), ConfigError);
  EXPECT_THROW(G1Manager(native(4, 1)), ConfigError);
}

}  // namespace
}  // namespace kvtier::g1
