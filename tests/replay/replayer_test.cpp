// The replay scheduler on small traces: hand-checked hit counts, preemption,
// the offload tier, and the G1 hit rate against a plain LRU model.
#include <gtest/gtest.h>

#include <algorithm>
#include <list>
#include <numeric>
#include <random>
#include <unordered_set>

#include "kvtier/core/active_sequence.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/core/kv_event_sink.hpp"
#include "kvtier/memory/host_runtime.hpp"
#include "kvtier/replay/replayer.hpp"

namespace kvtier::replay {
namespace {

TraceRequest request(double at, std::vector<std::uint64_t> ids, std::size_t output = 0, std::size_t input = 0) {
  return TraceRequest{.timestamp_ms = at,
                      .input_length = input != 0 ? input : ids.size() * kTraceBlockTokens,
                      .output_length = output,
                      .hash_ids = std::move(ids)};
}

ReplayConfig small(std::uint32_t capacity, std::uint32_t block_size = 64) {
  ReplayConfig config;
  config.session.manager = g1::G1ManagerConfig{.capacity = capacity, .block_size = block_size};
  config.session.geometry = KvGeometry{.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype = KvDtype::Bf16};
  config.verify = VerifyMode::Full;
  return config;
}

TEST(Replayer, ASharedTraceBlockIsReusedAndItsBytesVerify) {
  memory::HostRuntime runtime;
  ReplayConfig config = small(64);
  config.max_running = 1;
  // 512-token ids are 8 blocks of 64: the second request reuses id 1's 8 blocks.
  const auto report = replay(runtime, config, {request(0, {1, 2}), request(1000, {1, 3})});
  EXPECT_EQ(report.requests, 2U);
  EXPECT_EQ(report.prompt_blocks, 32U);
  EXPECT_EQ(report.g1_hit_blocks, 8U);
  EXPECT_EQ(report.pages_verified, 8U);
  EXPECT_EQ(report.mismatches, 0U);
  EXPECT_EQ(report.g2_hit_blocks, 0U);
  EXPECT_GE(report.virtual_ms, 1000.0);
}

TEST(Replayer, ChunkedPrefillAndDecodeFinishEveryRequest) {
  memory::HostRuntime runtime;
  ReplayConfig config = small(64, 16);
  config.token_budget = 100;  // several chunks per prompt
  const auto report = replay(runtime, config, {request(0, {1}, 5, 300), request(0, {1, 2}, 7, 700)});
  EXPECT_EQ(report.generated_tokens, 12U);
  EXPECT_EQ(report.mismatches, 0U);
  EXPECT_GT(report.steps, 7U);
}

TEST(Replayer, PreemptionRecomputesAndEveryRequestStillFinishes) {
  memory::HostRuntime runtime;
  for (const g1::G1Backend backend : {g1::G1Backend::Native, g1::G1Backend::Kvbm}) {
    ReplayConfig config = small(20, 64);  // 20 pages: two 8-block prompts and their decode growth do not fit
    config.session.manager.backend = backend;
    config.max_running = 4;
    std::vector<TraceRequest> trace;
    for (std::uint64_t r = 0; r < 6; ++r) trace.push_back(request(0, {100 + r}, 200));
    const auto report = replay(runtime, config, trace);
    EXPECT_GT(report.preemptions, 0U) << g1::backend_name(backend);
    EXPECT_EQ(report.generated_tokens, 6U * 200U);
    EXPECT_EQ(report.mismatches, 0U);
  }
}

/// 24 G1 pages and a 64-page G2 tier, one request at a time.
ReplayConfig with_g2(g1::G1Backend backend) {
  ReplayConfig config = small(24, 64);
  config.session.manager.backend = backend;
  config.max_running = 1;
  config.session.host_blocks = 64;
  return config;
}

/// 1 and 2 fill G1; 3 and 4 push them out to G2; 1 comes back from G2.
std::vector<TraceRequest> g2_round_trip() {
  return {request(0, {1}), request(1, {2}), request(2, {3}), request(3, {4}), request(4, {1, 5})};
}

TEST(Replayer, AnOffloadTierTurnsEvictedPrefixesIntoG2HitsWithTheirBytes) {
  memory::HostRuntime runtime;
  for (const g1::G1Backend backend : {g1::G1Backend::Native, g1::G1Backend::Kvbm}) {
    const auto report = replay(runtime, with_g2(backend), g2_round_trip());
    EXPECT_GT(report.swap_outs, 0U) << g1::backend_name(backend);
    EXPECT_EQ(report.g2_hit_blocks, 8U) << g1::backend_name(backend);
    EXPECT_EQ(report.swap_ins, 8U);
    EXPECT_EQ(report.mismatches, 0U);
    EXPECT_GE(report.pages_verified, 8U);
  }
}

// Issue 35: G2 admission by second offer declines a block G1 lets go for the
// first time (1's blocks are not in G2 when 1 comes back: no G2 hit), and a
// request evicted a second time is stored; any G2 order serves the round trip.
TEST(Replayer, SecondOfferG2AdmissionStoresABlockOnlyFromItsSecondEviction) {
  memory::HostRuntime runtime;
  for (const g1::G1Backend backend : {g1::G1Backend::Native, g1::G1Backend::Kvbm}) {
    ReplayConfig config = with_g2(backend);
    config.session.g2_admission = offload::TierAdmission::SecondOffer;
    auto trace = g2_round_trip();  // 1's first eviction: declined, so 1 is recomputed
    trace.push_back(request(5, {6}));
    trace.push_back(request(6, {7}));
    trace.push_back(request(7, {8}));
    trace.push_back(request(8, {1, 9}));  // 1 was evicted a second time: stored, a G2 hit now
    const auto report = replay(runtime, config, trace);
    EXPECT_EQ(report.g2_hit_blocks, 8U) << g1::backend_name(backend);
    EXPECT_GT(report.g2_admission_declined, 0U);
    EXPECT_EQ(report.mismatches, 0U);
  }
  for (const g1::EvictionBackend order : {g1::EvictionBackend::Lru2, g1::EvictionBackend::Arc,
                                          g1::EvictionBackend::S3Fifo, g1::EvictionBackend::Adaptive}) {
    ReplayConfig config = with_g2(g1::G1Backend::Native);
    config.session.g2_eviction = order;
    const auto report = replay(runtime, config, g2_round_trip());
    EXPECT_EQ(report.g2_hit_blocks, 8U) << g1::eviction_backend_name(order);
    EXPECT_EQ(report.mismatches, 0U);
  }
  // The same orders in G1 (the native pool's), with offload quarantining what they evict.
  for (const g1::EvictionBackend order :
       {g1::EvictionBackend::Lru2, g1::EvictionBackend::LfuDa, g1::EvictionBackend::Arc, g1::EvictionBackend::S3Fifo,
        g1::EvictionBackend::Adaptive}) {
    ReplayConfig config = with_g2(g1::G1Backend::Native);
    config.session.manager.native_eviction = order;
    const auto report = replay(runtime, config, g2_round_trip());
    EXPECT_EQ(report.g2_hit_blocks, 8U) << "G1 " << g1::eviction_backend_name(order);
    EXPECT_EQ(report.mismatches, 0U);
    EXPECT_GE(report.pages_verified, 8U);
  }
}

TEST(Replayer, ItsMetricsAfterEveryStepGrowAndEndAtTheReportsFigures) {
  memory::HostRuntime runtime;
  for (const g1::G1Backend backend : {g1::G1Backend::Native, g1::G1Backend::Kvbm}) {
    ReplayConfig config = with_g2(backend);
    std::vector<metrics::KvMetrics> seen;
    std::size_t steps_timed = 0;
    config.observe_metrics = [&](const metrics::KvMetrics& m, std::optional<double> step_seconds) {
      seen.push_back(m);
      if (step_seconds) {
        EXPECT_GE(*step_seconds, 0.0);
        ++steps_timed;
      }
    };
    const auto report = replay(runtime, config, g2_round_trip());
    ASSERT_EQ(seen.size(), report.steps + 1) << g1::backend_name(backend);  // every step, then the end
    EXPECT_EQ(steps_timed, report.steps);
    for (std::size_t i = 1; i < seen.size(); ++i) {
      EXPECT_GE(seen[i].query_blocks, seen[i - 1].query_blocks);
      EXPECT_GE(seen[i].tier(metrics::Tier::G1).evicted_blocks, seen[i - 1].tier(metrics::Tier::G1).evicted_blocks);
      EXPECT_GE(*seen[i].allocator_operations, *seen[i - 1].allocator_operations);
    }
    const metrics::KvMetrics& end = seen.back();
    EXPECT_EQ(end.query_blocks, report.prompt_blocks);
    EXPECT_EQ(end.tier(metrics::Tier::G1).hit_blocks, report.g1_hit_blocks);
    EXPECT_EQ(end.tier(metrics::Tier::G2).hit_blocks, report.g2_hit_blocks);
    EXPECT_EQ(end.miss_blocks(metrics::Tier::G1), report.prompt_blocks - report.g1_hit_blocks);
    EXPECT_EQ(end.miss_blocks(metrics::Tier::G2), report.prompt_blocks - report.g1_hit_blocks - report.g2_hit_blocks);
    EXPECT_EQ(end.tier(metrics::Tier::G1).evicted_blocks, report.evictions);
    EXPECT_EQ(end.tier(metrics::Tier::G2).stored_blocks, report.swap_outs);
    EXPECT_EQ(end.g1_to_g2.blocks, report.swap_outs);
    EXPECT_EQ(end.g1_to_g2.bytes, report.swap_out_bytes);
    EXPECT_EQ(end.g2_to_g1.blocks, report.swap_ins);
    EXPECT_EQ(end.g2_to_g1.bytes, report.swap_in_bytes);
    EXPECT_EQ(end.allocator_operations, report.allocator_ops);
    EXPECT_EQ(end.pages_verified, report.pages_verified);
    EXPECT_EQ(end.verify_mismatches, 0U);
    EXPECT_TRUE(end.tier(metrics::Tier::G2).present);
    EXPECT_EQ(end.tier(metrics::Tier::G1).capacity_blocks, 24U);
    EXPECT_EQ(end.tier(metrics::Tier::G1).used_blocks, 0U);  // every request finished
    EXPECT_EQ(end.tier(metrics::Tier::G2).capacity_blocks, 64U);
    EXPECT_EQ(end.tier(metrics::Tier::G2).used_blocks, report.swap_outs - end.tier(metrics::Tier::G2).evicted_blocks);
  }
}

TEST(Replayer, InjectedCopyFaultsDropBlocksButNeverCorruptOne) {
  memory::HostRuntime runtime;
  for (const g1::G1Backend backend : {g1::G1Backend::Native, g1::G1Backend::Kvbm}) {
    ReplayConfig config = small(32, 64);
    config.session.manager.backend = backend;
    config.max_running = 2;
    config.session.host_blocks = 48;
    config.copy_fault_one_in = 3;
    std::mt19937_64 rng(5);
    std::vector<TraceRequest> trace;
    for (int r = 0; r < 40; ++r) trace.push_back(request(r, {rng() % 4, 10 + rng() % 6}, 3));
    const auto report = replay(runtime, config, trace);
    EXPECT_GT(report.failed_copies, 0U) << g1::backend_name(backend);
    EXPECT_GT(report.swap_ins, 0U) << g1::backend_name(backend);
    EXPECT_GT(report.pages_verified, 0U);
    EXPECT_EQ(report.mismatches, 0U);
    EXPECT_EQ(report.generated_tokens, 40U * 3U);
  }
}

/// Every step, paged attention over the running requests (chunked prefill,
/// decode, preemption, swap-ins from G2) reads through the session's device
/// block tables exactly the K/V their tokens must have.
TEST(Replayer, AttentionThroughDeviceBlockTablesReadsEveryRunningRequestsKv) {
  memory::HostRuntime runtime;
  for (const g1::G1Backend backend : {g1::G1Backend::Native, g1::G1Backend::Kvbm}) {
    ReplayConfig config = small(40, 64);
    config.session.manager.backend = backend;
    config.session.geometry = KvGeometry{.layers = 2, .kv_heads = 2, .head_dim = 8, .dtype = KvDtype::Bf16};
    config.session.host_blocks = 64;
    config.max_running = 3;
    config.token_budget = 200;
    config.attention_check_every = 1;
    config.attention_check_sequences = 3;
    std::mt19937_64 rng(11);
    std::vector<TraceRequest> trace;
    for (int r = 0; r < 24; ++r) trace.push_back(request(r * 5, {rng() % 3, 10 + rng() % 4}, 5));
    const auto report = replay(runtime, config, trace);
    EXPECT_GT(report.swap_ins, 0U) << g1::backend_name(backend);
    EXPECT_EQ(report.mismatches, 0U);
    EXPECT_GT(report.attention_checks, report.steps / 2) << g1::backend_name(backend);
    EXPECT_GT(report.attention_sequences, report.attention_checks);
    EXPECT_EQ(report.attention_mismatches, 0U) << g1::backend_name(backend);
  }
}

/// Several instances in one process each publish their own KV events, as
/// data-parallel ranks: instance i's carry dp rank i, its steps end its
/// batches, and each instance's Stored events are its G1's blocks.
TEST(Replayer, EachInstanceTellsItsOwnEventsUnderItsOwnDataParallelRank) {
  memory::HostRuntime runtime;
  ReplayConfig config = small(64);
  config.instances = 3;
  std::vector<std::shared_ptr<RecordingEventSink>> sinks;
  std::vector<std::size_t> step_ends(3, 0);
  for (std::size_t i = 0; i < 3; ++i) {
    sinks.push_back(std::make_shared<RecordingEventSink>());
    config.instance_outputs.push_back({.event_sinks = {sinks.back()}, .step_end = [&step_ends, i] { ++step_ends[i]; }});
  }
  std::vector<TraceRequest> trace;
  for (int r = 0; r < 9; ++r) trace.push_back(request(r * 100, {std::uint64_t(r % 2), 5}, 2));
  const auto reports = replay_instances(runtime, config, trace);
  ASSERT_EQ(reports.size(), 3U);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(reports[i].requests, 3U);
    ASSERT_FALSE(sinks[i]->events().empty()) << "instance " << i;
    for (const KvEvent& event : sinks[i]->events()) EXPECT_EQ(event.dp_rank, i);
    std::size_t stored = 0;
    for (const KvEvent& event : sinks[i]->events()) {
      if (const auto* s = std::get_if<KvStored>(&event.data)) stored += s->blocks.size();
    }
    // Every prompt block this instance computed was told (again if it was evicted and recomputed).
    EXPECT_GE(stored, reports[i].prompt_blocks - reports[i].g1_hit_blocks) << "instance " << i;
    EXPECT_GE(step_ends[i], reports[i].steps) << "instance " << i;  // one batch per step at least
    EXPECT_EQ(reports[i].mismatches, 0U);
  }
  config.instance_outputs.pop_back();
  EXPECT_THROW(replay_instances(runtime, config, trace), ConfigError);  // two outputs for three instances
}

TEST(Replayer, ImpossibleConfigurationsAreRefused) {
  memory::HostRuntime runtime;
  ReplayConfig config = small(64, 48);  // 48 does not divide 512
  EXPECT_THROW(replay(runtime, config, {}), ConfigError);
  config = small(4, 64);  // a 16-block request cannot fit in 4 pages: with refuse_oversized off, no replay at all
  config.refuse_oversized = false;
  EXPECT_THROW(replay(runtime, config, {request(0, {1, 2})}), ConfigError);
  config = small(64);
  config.max_running = 0;
  EXPECT_THROW(replay(runtime, config, {}), ConfigError);
  config = small(64);
  config.token_budget = SIZE_MAX;
  EXPECT_THROW(replay(runtime, config, {}), ConfigError);
}

// Issue 48: vLLM refuses a request no G1 of its size can hold and serves the
// rest; a sweep over small capacities finishes. Regression: when the last
// requests were refused as they arrived, the idle jump read past the requests
// (ASan).
TEST(Replayer, ARequestNoG1CanHoldIsRefusedCountedAndTheRestServed) {
  memory::HostRuntime runtime;
  ReplayConfig config = small(4, 64);
  config.record_prefix_steps = true;
  const ReplayReport all_refused = replay(runtime, config, {request(0, {1, 2}), request(1, {3, 4})});
  EXPECT_EQ(all_refused.requests, 2U);
  EXPECT_EQ(all_refused.rejected_requests, 2U);
  EXPECT_EQ(all_refused.prompt_blocks, 0U);
  EXPECT_TRUE(all_refused.prefix_steps.empty());
  // 64 pages of 64 tokens: the 2-block prompts run (twice, the second hitting), the 80-block one is refused.
  config = small(64, 64);
  config.record_prefix_steps = true;
  std::vector<std::uint64_t> long_ids(80);
  std::iota(long_ids.begin(), long_ids.end(), 100);
  const ReplayReport some = replay(runtime, config, {request(0, {1, 2}), request(1, long_ids), request(2, {1, 2})});
  EXPECT_EQ(some.rejected_requests, 1U);
  EXPECT_EQ(some.prompt_blocks, 2U * 2 * 512 / 64);
  EXPECT_GT(some.g1_hit_blocks, 0U);
  // Each request served is looked up once, counted; none of the refused one's steps.
  std::size_t counted = 0;
  for (const PrefixStep& step : some.prefix_steps) {
    EXPECT_NE(step.request, 1U);
    counted += step.counted ? 1 : 0;
  }
  EXPECT_EQ(counted, 2U);
}

TEST(Replayer, OutputLengthsWhoseSumWrapsAreRefusedNotReplayedForever) {
  // Regression (issue 23): input + output wrapped, so the fit check admitted a
  // request that was then preempted and recomputed forever.
  memory::HostRuntime runtime;
  for (const std::size_t output : {SIZE_MAX, SIZE_MAX - 511, std::size_t{1} << 63}) {
    ReplayConfig config = small(64);
    EXPECT_THROW(replay(runtime, config, {request(0, {1}, output)}), ConfigError) << output;
    config.output_tokens = output;
    EXPECT_THROW(replay(runtime, config, {request(0, {1})}), ConfigError) << output;
  }
}

/// A plain LRU cache of blocks, one request at a time, prefix hits only: the
/// hit count a vLLM-style pool must reach on the same trace.
std::size_t lru_model_hits(const std::vector<TraceRequest>& trace, std::uint32_t block_size, std::size_t capacity) {
  std::list<std::uint64_t> lru;  // front: next victim
  std::size_t hits = 0;
  for (const TraceRequest& r : trace) {
    const ActiveSequence sequence(synthesize_prompt(r), ActiveSequenceConfig{.block_size = block_size});
    std::vector<std::uint64_t> blocks;
    for (const UniqueBlock& b : sequence.blocks()) blocks.push_back(b.hash().value());
    std::size_t hit = 0;
    while (hit < blocks.size() && std::find(lru.begin(), lru.end(), blocks[hit]) != lru.end()) ++hit;
    hits += hit;
    for (std::size_t i = 0; i < hit; ++i) lru.remove(blocks[i]);  // active while the request runs
    const std::size_t fresh = blocks.size() - hit;
    while (lru.size() + blocks.size() > capacity) lru.pop_front();  // evict for the new blocks
    (void)fresh;
    for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) lru.push_back(*it);  // released leaf first
  }
  return hits;
}

TEST(Replayer, OneRequestAtATimeTheG1HitRateIsThatOfAPlainLruModel) {
  std::mt19937_64 rng(11);
  std::vector<TraceRequest> trace;
  for (int r = 0; r < 60; ++r) {
    // Conversations: a system prompt (one of 3), then a random depth of shared turns.
    std::vector<std::uint64_t> ids{1000 + rng() % 3};
    const std::uint64_t conversation = rng() % 6;
    for (std::uint64_t turn = 0, depth = rng() % 4; turn < depth; ++turn) ids.push_back(conversation * 100 + turn);
    ids.push_back(50000 + static_cast<std::uint64_t>(r));  // the request's own question
    trace.push_back(request(r, ids));
  }
  memory::HostRuntime runtime;
  for (const std::uint32_t capacity : {24U, 40U, 64U}) {
    ReplayConfig config = small(capacity, 128);
    config.max_running = 1;
    config.token_budget = 1 << 20;
    const auto report = replay(runtime, config, trace);
    EXPECT_EQ(report.g1_hit_blocks, lru_model_hits(trace, 128, capacity)) << "capacity " << capacity;
    EXPECT_EQ(report.mismatches, 0U);
  }
}

}  // namespace
}  // namespace kvtier::replay
