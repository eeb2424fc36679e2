// The KVBM backend through the G1Manager facade: worked examples P11–P18
// (docs/semantics.md §7.3) and the N2 transactional rules of §2.5.
#include <gtest/gtest.h>

#include "g1/g1_test_support.hpp"
#include "kvtier/core/errors.hpp"

namespace kvtier::g1 {
namespace {

using namespace testing;
using Data = std::variant<KvStored, KvRemoved>;

G1ManagerConfig kvbm(std::uint32_t capacity, std::uint32_t block_size = 16,
                     EvictionBackend eviction = EvictionBackend::Lineage) {
  return G1ManagerConfig{.capacity = capacity,
                         .block_size = block_size,
                         .dp_rank = 0,
                         .backend = G1Backend::Kvbm,
                         .enable_prefix_caching = true,
                         .eviction = eviction};
}

const OwnerId kA(1), kB(2), kC(3);

/// A Use of blocks with explicit PLHs (hash, parent, position).
UseSignal use_lineage(std::vector<std::tuple<std::uint64_t, std::optional<std::uint64_t>, std::uint64_t>> blocks,
                      std::optional<std::uint64_t> parent = std::nullopt) {
  UseSignal use;
  for (auto [hash, plh_parent, position] : blocks) {
    use.blocks.push_back(UniqueBlock::full(SequenceHash(hash)));
    use.plhs.emplace_back(SequenceHash(hash),
                          plh_parent ? std::optional<SequenceHash>(SequenceHash(*plh_parent)) : std::nullopt, position);
  }
  if (parent) use.parent = UniqueBlock::full(SequenceHash(*parent));
  return use;
}

TEST(KvbmBackend, P11DuplicateUseBumpsRefcount) {
  G1Manager manager(kvbm(10));
  manager.process_for_request(kA, use_full({1}));
  manager.process_for_request(kA, use_full({1}));
  EXPECT_EQ(manager.num_active_blocks(), 1U);
  EXPECT_EQ(manager.num_active_block_refs(), 2U);
  manager.process_for_request(kA, deref_full({1}));
  EXPECT_EQ(manager.num_active_blocks(), 1U);
  EXPECT_EQ(manager.num_active_block_refs(), 1U);
  manager.process_for_request(kA, deref_full({1}));
  EXPECT_EQ(manager.num_active_blocks(), 0U);
  EXPECT_EQ(manager.num_active_block_refs(), 0U);
  EXPECT_EQ(manager.num_inactive_blocks(), 1U);
}

// One index serves both lookups. A sequence hash finds the first page
// registered with it, and only that one: a second page of the same hash
// (another PLH) is found by its PLH alone, also once the first has gone, as
// in Dynamo's mocker. A block whose PLH disagrees with its hash (injected
// hashes) is found both ways and leaves no entry behind (the audit counts them).
TEST(KvbmBackend, ASequenceHashFindsItsFirstRegisteredPageOnly) {
  G1Manager manager(kvbm(3, 16, EvictionBackend::Lru));
  ASSERT_TRUE(manager.process_for_request(kA, use_lineage({{7, std::nullopt, 0}})).is_ready());
  manager.process_for_request(kA, deref_full({7}));  // inactive: another PLH of hash 7 gets its own page
  ASSERT_TRUE(manager.process_for_request(kB, use_lineage({{6, std::nullopt, 0}, {7, 6, 1}})).is_ready());
  EXPECT_EQ(manager.num_active_blocks(), 2U);
  EXPECT_EQ(manager.num_inactive_blocks(), 1U);  // hash 7 on two pages
  EXPECT_TRUE(manager.is_cached(SequenceHash(7)));
  manager.audit();
  UseSignal injected = use_full({9});
  injected.plhs = {PositionalLineageHash(SequenceHash(1234), std::nullopt, 0)};  // filed apart from its hash
  ASSERT_TRUE(manager.process_for_request(kC, injected).is_ready());             // evicts the first page of 7
  EXPECT_FALSE(manager.is_cached(SequenceHash(7)));                              // kB's page of 7 is not found by hash
  EXPECT_TRUE(manager.is_cached(SequenceHash(9)));
  manager.audit();
  // kB's block 7 is still matched by its PLH: a new request of the same lineage shares its page.
  ASSERT_TRUE(manager.process_for_request(OwnerId(4), use_lineage({{6, std::nullopt, 0}, {7, 6, 1}})).is_ready());
  EXPECT_EQ(manager.block_table(OwnerId(4))[1], manager.block_table(kB)[1]);
  manager.process_for_request(kC, deref_full({9}));
  ASSERT_TRUE(manager.process_for_request(OwnerId(5), use_full({11})).is_ready());  // evicts 9, both its entries
  EXPECT_FALSE(manager.is_cached(SequenceHash(9)));
  manager.audit();
}

TEST(KvbmBackend, P12CapacityExhaustionCommitsNothing) {
  ManagerWithSink m(kvbm(4));
  for (std::uint64_t i = 0; i < 4; ++i) {
    UseSignal use = use_full({i});
    use.plhs = {PositionalLineageHash(SequenceHash(i + 100), std::nullopt, 0)};
    EXPECT_EQ(m.manager.process_for_request(OwnerId(10 + i), use), G1Acquire::ready(1));
  }
  const auto events_before = m.sink->events().size();
  EXPECT_EQ(m.manager.process_for_request(kA, use_full({4})), G1Acquire::capacity_exhausted());
  EXPECT_EQ(m.manager.num_active_block_refs(), 4U);
  EXPECT_EQ(m.sink->events().size(), events_before);
  EXPECT_FALSE(m.manager.has_owner(kA));

  G1Manager big(kvbm(10));
  EXPECT_EQ(big.process_for_request(kA, use_full({0, 1, 2, 3, 4, 5, 6, 7, 8, 9})), G1Acquire::ready(10));
  EXPECT_EQ(big.num_active_blocks(), 10U);
  EXPECT_EQ(big.process_for_request(kB, use_full({10})), G1Acquire::capacity_exhausted());
}

TEST(KvbmBackend, P13ScatteredReuseAfterAMiss) {
  ManagerWithSink m(kvbm(10));
  m.manager.process_for_request(kA, use_full({10}));
  m.manager.process_for_request(kB, use_full({30}));
  const PageId page_of_30 = m.manager.block_table(kB)[0];
  m.manager.process_for_request(kA, deref_full({10}));
  m.manager.process_for_request(kB, deref_full({30}));
  m.sink->clear();
  EXPECT_EQ(m.manager.process_for_request(kC, use_full({10, 20, 30})), G1Acquire::ready(3));
  EXPECT_EQ(m.manager.num_active_blocks(), 3U);
  EXPECT_EQ(m.manager.num_active_block_refs(), 3U);
  EXPECT_EQ(m.manager.block_table(kC)[2], page_of_30);  // block 30 keeps its page
  EXPECT_EQ(m.data(), (std::vector<Data>{stored(10, {{20, 120}})}));
}

TEST(KvbmBackend, P14StoredRunsSplitAtReusedBlocks) {
  ManagerWithSink m(kvbm(8, 4));
  m.manager.process_for_request(kA, use_full({20}));
  m.sink->clear();
  UseSignal use = use_full({10, 11, 20, 30, 31}, 5);
  for (auto& local : use.local_hashes) local = LocalBlockHash(local.value() + 900);  // 1010, 1011, ...
  use.token_ids = BlockTokenIds{{1, 1, 1, 1}, {2, 2, 2, 2}, {3, 3, 3, 3}, {4, 4, 4, 4}, {5, 5, 5, 5}};
  EXPECT_EQ(m.manager.process_for_request(kB, use), G1Acquire::ready(5));
  KvStored first = stored(5, {{10, 1010}, {11, 1011}});
  first.token_ids = BlockTokenIds{{1, 1, 1, 1}, {2, 2, 2, 2}};
  KvStored second = stored(20, {{30, 1030}, {31, 1031}});
  second.token_ids = BlockTokenIds{{4, 4, 4, 4}, {5, 5, 5, 5}};
  EXPECT_EQ(m.data(), (std::vector<Data>{first, second}));
}

TEST(KvbmBackend, P15FullLifecycleWithLineageEviction) {
  ManagerWithSink m(kvbm(10));
  // Lineage (child <- parent): 1<-0, 2<-1, 3<-2, 4<-3, 5<-1, 6<-5, 7<-2, 8<-7, 9<-8, 11<-10, 12<-11.
  const auto req = [](std::vector<std::uint64_t> blocks) {
    static const std::map<std::uint64_t, std::pair<std::optional<std::uint64_t>, std::uint64_t>> lineage{
        {0, {std::nullopt, 0}},
        {1, {0, 1}},
        {2, {1, 2}},
        {3, {2, 3}},
        {4, {3, 4}},
        {5, {1, 2}},
        {6, {5, 3}},
        {7, {2, 3}},
        {8, {7, 4}},
        {9, {8, 5}},
        {10, {std::nullopt, 0}},
        {11, {10, 1}},
        {12, {11, 2}},
        {13, {std::nullopt, 0}}};
    std::vector<std::tuple<std::uint64_t, std::optional<std::uint64_t>, std::uint64_t>> spec;
    for (auto b : blocks) spec.emplace_back(b, lineage.at(b).first, lineage.at(b).second);
    const auto& first = lineage.at(blocks.front());
    return use_lineage(spec, first.first);
  };
  EXPECT_EQ(m.manager.process_for_request(kA, req({0, 1, 2, 3, 4})), G1Acquire::ready(5));
  EXPECT_EQ(m.data(), (std::vector<Data>{stored(std::nullopt, {{0, 0}, {1, 0}, {2, 0}, {3, 0}, {4, 0}})}));
  m.sink->clear();
  EXPECT_EQ(m.manager.process_for_request(kB, req({0, 1, 5, 6})), G1Acquire::ready(4));
  EXPECT_EQ(m.data(), (std::vector<Data>{stored(1, {{5, 0}, {6, 0}})}));
  EXPECT_EQ(m.manager.num_active_blocks(), 7U);
  EXPECT_EQ(m.manager.num_active_block_refs(), 9U);
  m.sink->clear();
  m.manager.process_for_request(kA, deref_full({4, 3, 2, 1, 0}));
  EXPECT_EQ(m.manager.num_active_blocks(), 4U);
  EXPECT_EQ(m.manager.num_inactive_blocks(), 3U);
  m.manager.process_for_request(kB, deref_full({6, 5, 1, 0}));
  EXPECT_EQ(m.manager.num_active_blocks(), 0U);
  EXPECT_EQ(m.manager.num_inactive_blocks(), 7U);
  EXPECT_TRUE(m.sink->events().empty());
  EXPECT_EQ(m.manager.process_for_request(kC, req({0, 1, 2, 7, 8, 9})), G1Acquire::ready(6));
  EXPECT_EQ(m.data(), (std::vector<Data>{stored(2, {{7, 0}, {8, 0}, {9, 0}})}));
  EXPECT_EQ(m.manager.num_inactive_blocks(), 4U);
  m.sink->clear();
  EXPECT_EQ(m.manager.process_for_request(OwnerId(4), req({10, 11, 12})), G1Acquire::ready(3));
  EXPECT_EQ(m.data(), (std::vector<Data>{stored(std::nullopt, {{10, 0}, {11, 0}, {12, 0}}), removed({4, 3, 6})}));
  EXPECT_EQ(m.manager.num_inactive_blocks(), 1U);
  EXPECT_EQ(m.manager.num_active_blocks(), 9U);
  m.sink->clear();
  EXPECT_EQ(m.manager.process_for_request(OwnerId(5), req({13})), G1Acquire::ready(1));
  EXPECT_EQ(m.data(), (std::vector<Data>{stored(std::nullopt, {{13, 0}}), removed({5})}));
  EXPECT_EQ(m.manager.num_inactive_blocks(), 0U);
  EXPECT_EQ(m.manager.num_active_blocks(), 10U);
}

TEST(KvbmBackend, P16ReactivationDoesNotRepublishAndDerefNeverRemoves) {
  ManagerWithSink m(kvbm(4));
  m.manager.process_for_request(kA, use_full({1}));
  m.manager.process_for_request(kA, deref_full({1}));
  m.manager.process_for_request(kA, use_full({1}));
  ASSERT_EQ(m.sink->events().size(), 1U);
  EXPECT_TRUE(std::holds_alternative<KvStored>(m.sink->events()[0].data));
}

TEST(KvbmBackend, P17PromoteAndPartialLifecycle) {
  ManagerWithSink m(kvbm(10));
  const Uuid u = Uuid::random();
  UseSignal partial;
  partial.blocks = {UniqueBlock::partial(u)};
  EXPECT_EQ(m.manager.process_for_request(kA, partial), G1Acquire::ready(1));
  m.manager.process_for_request(kA, PromoteSignal{.uuid = u,
                                                  .hash = SequenceHash(42),
                                                  .parent = std::nullopt,
                                                  .local = LocalBlockHash(0),
                                                  .plh = PositionalLineageHash(SequenceHash(500), std::nullopt, 0),
                                                  .token_ids = std::nullopt});
  EXPECT_EQ(m.manager.num_active_blocks(), 1U);
  EXPECT_EQ(m.manager.num_active_block_refs(), 1U);
  EXPECT_TRUE(m.manager.is_cached(SequenceHash(42)));
  EXPECT_EQ(m.data(), (std::vector<Data>{stored(std::nullopt, {{42, 0}})}));
  try {
    m.manager.process_for_request(
        kA,
        PromoteSignal{
            .uuid = Uuid::random(), .hash = SequenceHash(43), .parent = {}, .local = {}, .plh = {}, .token_ids = {}});
    FAIL();
  } catch (const ContractError& error) {
    EXPECT_NE(std::string(error.what()).find("partial block not found"), std::string::npos);
  }
  const Uuid v = Uuid::random();
  UseSignal other;
  other.blocks = {UniqueBlock::partial(v)};
  m.manager.process_for_request(kB, other);
  m.manager.process_for_request(kB, DerefSignal{{UniqueBlock::partial(v)}});
  EXPECT_EQ(m.manager.num_active_block_refs(), 1U);
  EXPECT_EQ(m.manager.num_active_blocks(), 1U);
}

TEST(KvbmBackend, PromoteAdoptsAnExistingBlockAndTheTableShowsItsPage) {
  ManagerWithSink m(kvbm(10, 4));
  m.manager.process_for_request(kA, use_full({42}));
  const PageId canonical = m.manager.block_table(kA)[0];
  const Uuid u = Uuid::random();
  UseSignal partial;
  partial.blocks = {UniqueBlock::partial(u)};
  m.manager.process_for_request(kB, partial);
  EXPECT_NE(m.manager.block_table(kB)[0], canonical);
  m.sink->clear();
  m.manager.process_for_request(kB, PromoteSignal{.uuid = u,
                                                  .hash = SequenceHash(42),
                                                  .parent = std::nullopt,
                                                  .local = LocalBlockHash(142),
                                                  .plh = PositionalLineageHash(SequenceHash(42), std::nullopt, 0),
                                                  .token_ids = std::nullopt});
  EXPECT_TRUE(m.sink->events().empty());
  EXPECT_EQ(m.manager.block_table(kB)[0], canonical);
  EXPECT_EQ(m.manager.num_active_blocks(), 1U);
  EXPECT_EQ(m.manager.num_active_block_refs(), 2U);
}

TEST(KvbmBackend, P18DestinationTransferFootprintUsesMissingPhysicalBlocks) {
  G1Manager manager(kvbm(16, 4));
  const ActiveSequenceConfig cfg{.block_size = 4,
                                 .max_output_tokens = 4,
                                 .enable_prefix_caching = true,
                                 .emit_token_ids = true,
                                 .planned_output = {},
                                 .seed = std::nullopt};
  ActiveSequence prompt(token_range(0, 10), cfg);
  auto first = manager.reserve_destination_at(OwnerId(10), prompt);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->transferable_prompt_tokens, 12U);
  manager.cancel_destination(std::move(*first));
  ActiveSequence four(token_range(0, 4), cfg);
  manager.process_for_request(kA, *four.take_creation_signal());
  auto second = manager.reserve_destination_at(OwnerId(10), prompt);
  EXPECT_EQ(second->transferable_prompt_tokens, 8U);
  manager.cancel_destination(std::move(*second));
  ActiveSequence eight(token_range(20, 28), cfg);
  manager.process_for_request(kB, *eight.take_creation_signal());
  auto third = manager.reserve_destination_at(OwnerId(11), eight);
  EXPECT_EQ(third->transferable_prompt_tokens, 0U);
  manager.cancel_destination(std::move(*third));
  EXPECT_EQ(manager.num_active_blocks(), 3U);
}

TEST(KvbmBackend, DestinationActivationAdoptsBlocksRegisteredMeanwhile) {
  ManagerWithSink m(kvbm(16, 4));
  const ActiveSequenceConfig cfg{.block_size = 4,
                                 .max_output_tokens = 4,
                                 .enable_prefix_caching = true,
                                 .emit_token_ids = false,
                                 .planned_output = {},
                                 .seed = std::nullopt};
  ActiveSequence prompt(token_range(0, 10), cfg);
  auto reservation = m.manager.reserve_destination_at(OwnerId(10), prompt);
  ASSERT_TRUE(reservation);
  EXPECT_EQ(m.manager.num_active_blocks(), 3U);
  ActiveSequence racing(token_range(0, 8), cfg);
  m.manager.process_for_request(kA, *racing.take_creation_signal());  // registers blocks 0 and 1 first
  EXPECT_EQ(m.manager.num_active_blocks(), 5U);
  m.sink->clear();
  m.manager.activate_destination(std::move(*reservation));
  EXPECT_TRUE(m.sink->events().empty());         // adopted: no Stored
  EXPECT_EQ(m.manager.num_active_blocks(), 3U);  // two reserved pages given back
  EXPECT_EQ(m.manager.block_table(OwnerId(10))[0], m.manager.block_table(kA)[0]);
  EXPECT_EQ(m.manager.block_table(OwnerId(10))[1], m.manager.block_table(kA)[1]);
}

TEST(KvbmBackend, FailedUseLeavesRefsRegistryEventsAndEvictionOrderUntouched) {
  ManagerWithSink m(kvbm(3, 4, EvictionBackend::Lru));
  m.manager.process_for_request(kA, use_full({1, 2, 3}));
  m.manager.process_for_request(kA, deref_full({3, 2, 1}));  // LRU: 3, 2, 1
  m.sink->clear();
  // Matches 1 (inactive) and needs 3 fresh pages: only 2 are evictable besides the match.
  EXPECT_EQ(m.manager.process_for_request(kB, use_full({1, 7, 8, 9})), G1Acquire::capacity_exhausted());
  EXPECT_TRUE(m.sink->events().empty());
  EXPECT_EQ(m.manager.num_inactive_blocks(), 3U);
  for (std::uint64_t h : {1, 2, 3}) EXPECT_TRUE(m.manager.is_cached(SequenceHash(h)));
  EXPECT_EQ(m.manager.process_for_request(kB, use_full({7})), G1Acquire::ready(1));
  EXPECT_EQ(m.data(), (std::vector<Data>{stored(std::nullopt, {{7, 107}}), removed({3})}));
}

TEST(KvbmBackend, SamePlhTwiceInOneUseAdoptsTheCanonicalBlock) {
  ManagerWithSink m(kvbm(4, 4));
  EXPECT_EQ(m.manager.process_for_request(kA, use_full({5, 5})), G1Acquire::ready(2));
  EXPECT_EQ(m.manager.num_active_blocks(), 1U);
  EXPECT_EQ(m.manager.num_active_block_refs(), 2U);
  EXPECT_EQ(m.manager.block_table(kA)[0], m.manager.block_table(kA)[1]);
  EXPECT_EQ(m.data(), (std::vector<Data>{stored(std::nullopt, {{5, 105}})}));
}

TEST(KvbmBackend, DecodeReservationFeedsUsesAndReturnsTheRest) {
  G1Manager manager(kvbm(4, 4));
  auto reservation = manager.reserve_decode_blocks(3);
  ASSERT_TRUE(reservation);
  EXPECT_EQ(manager.num_active_blocks(), 3U);
  UseSignal tail;
  tail.blocks = {UniqueBlock::partial(Uuid::random())};
  EXPECT_TRUE(manager.process_decode_signal_for_request(kA, tail, *reservation).is_ready());
  EXPECT_THROW(manager.process_decode_signal_for_request(kB, use_full({1, 2, 3}), *reservation), ContractError);
  manager.release_decode_reservation(std::move(*reservation));
  EXPECT_EQ(manager.num_active_blocks(), 1U);
  EXPECT_FALSE(manager.reserve_decode_blocks(4).has_value());
}

TEST(KvbmBackend, PrefillCostWalksActiveThenRegisteredBlocks) {
  G1Manager manager(kvbm(8, 4));
  const ActiveSequenceConfig cfg{.block_size = 4,
                                 .max_output_tokens = 0,
                                 .enable_prefix_caching = true,
                                 .emit_token_ids = false,
                                 .planned_output = {},
                                 .seed = std::nullopt};
  ActiveSequence first(token_range(0, 8), cfg);
  manager.process_for_request(kA, *first.take_creation_signal());
  manager.process_for_request(kA, DerefSignal{{first.blocks()[1]}});
  ActiveSequence probe(token_range(0, 10), cfg);
  EXPECT_EQ(manager.get_prefill_cost(probe),
            (PrefillCost{.new_blocks = 1, .new_tokens = 2, .cached_tokens = 8, .active_cached_tokens = 4}));
  ActiveSequence random_ids(token_range(0, 10), ActiveSequenceConfig{.block_size = 4,
                                                                     .max_output_tokens = 0,
                                                                     .enable_prefix_caching = false,
                                                                     .emit_token_ids = false,
                                                                     .planned_output = {},
                                                                     .seed = std::nullopt});
  EXPECT_EQ(manager.get_prefill_cost(random_ids).cached_tokens, 0U);
}

TEST(KvbmBackend, CachingOffStillRegistersAndSelfMatchesAfterPreemption) {
  ManagerWithSink m(G1ManagerConfig{.capacity = 8,
                                    .block_size = 4,
                                    .dp_rank = 0,
                                    .backend = G1Backend::Kvbm,
                                    .enable_prefix_caching = false,
                                    .eviction = EvictionBackend::Lineage});
  ActiveSequence seq(token_range(0, 8), ActiveSequenceConfig{.block_size = 4,
                                                             .max_output_tokens = 0,
                                                             .enable_prefix_caching = false,
                                                             .emit_token_ids = false,
                                                             .planned_output = {},
                                                             .seed = std::nullopt});
  m.manager.process_for_request(kA, *seq.take_creation_signal());
  EXPECT_EQ(m.sink->events().size(), 1U);  // Stored, with random hashes
  m.manager.process_for_request(kA, *seq.reset_with_signal());
  EXPECT_EQ(m.manager.num_inactive_blocks(), 2U);
  m.manager.process_for_request(kA, *seq.take_creation_signal());
  EXPECT_EQ(m.sink->events().size(), 1U);  // re-admitted onto its own blocks: no new Stored
  EXPECT_EQ(m.manager.num_inactive_blocks(), 0U);
}

TEST(KvbmBackend, FinalizeIsANoOpAndReservationsOfTheOtherBackendAreRefused) {
  G1Manager kvbm_manager(kvbm(4, 4));
  G1Manager native_manager(G1ManagerConfig{.capacity = 4, .block_size = 4});
  kvbm_manager.process_for_request(kA, use_full({1}));
  EXPECT_NO_THROW(kvbm_manager.finalize_computed_prefix(kB, 0, 4));  // even for an unknown owner
  auto native_reservation = native_manager.reserve_decode_blocks(1);
  try {
    kvbm_manager.release_decode_reservation(std::move(*native_reservation));
    FAIL();
  } catch (const ContractError& error) {
    EXPECT_NE(std::string(error.what()).find("belongs to a different G1 backend"), std::string::npos);
  }
  G1Manager lru =
      G1Manager::with_eviction_backend(G1ManagerConfig{.capacity = 4, .block_size = 4}, EvictionBackend::Lru);
  EXPECT_EQ(lru.backend(), G1Backend::Kvbm);
  EXPECT_EQ(lru.eviction_backend(), EvictionBackend::Lru);
  // A moved manager keeps publishing through its backend.
  auto sink = std::make_shared<RecordingEventSink>();
  G1Manager source(kvbm(4, 4), {sink});
  G1Manager moved(std::move(source));
  moved.process_for_request(kA, use_full({3}));
  EXPECT_EQ(sink->events().size(), 1U);
}

}  // namespace
}  // namespace kvtier::g1
