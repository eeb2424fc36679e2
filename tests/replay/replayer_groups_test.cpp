// The replay on a manager with KV cache groups (a hybrid model): hits in
// every group with their pages' bytes checked, a corrupted page caught,
// requests refused that no pool could hold, and more requests running at
// once than the same bytes as one full-attention group hold.
#include <gtest/gtest.h>

#include <cstring>

#include "kvtier/core/active_sequence.hpp"
#include "kvtier/memory/host_runtime.hpp"
#include "kvtier/memory/kv_pool.hpp"
#include "kvtier/replay/group_page_check.hpp"
#include "kvtier/replay/replayer.hpp"

namespace kvtier::replay {
namespace {

TraceRequest request(double at, std::vector<std::uint64_t> ids, std::size_t output = 0) {
  const std::size_t input = ids.size() * kTraceBlockTokens;
  return TraceRequest{.timestamp_ms = at, .input_length = input, .output_length = output, .hash_ids = std::move(ids)};
}

GroupSpec attention(GroupKind kind, std::uint32_t window = 0) {
  return GroupSpec{
      .kind = kind, .layers = 1, .sliding_window = window, .kv_heads = 1, .head_dim = 8, .dtype = KvDtype::Bf16};
}

/// [full attention, sliding window of 32 tokens] at 16 tokens a block.
ReplayConfig hybrid(std::uint32_t capacity) {
  ReplayConfig config;
  config.session.manager =
      g1::G1ManagerConfig{.capacity = capacity,
                          .block_size = 16,
                          .groups = {attention(GroupKind::FullAttention), attention(GroupKind::SlidingWindow, 32)}};
  config.verify = VerifyMode::Full;
  return config;
}

TEST(GroupedReplay, ASharedPrefixIsAHitInEachGroupAndEveryHitPageVerifies) {
  memory::HostRuntime runtime;
  ReplayConfig config = hybrid(256);
  config.max_running = 1;
  const auto report = replay(runtime, config, {request(0, {1, 2}), request(1000, {1, 3})});
  EXPECT_EQ(report.requests, 2U);
  EXPECT_EQ(report.prompt_blocks, 128U);  // 2 x 1024 tokens at the hash unit of 16
  EXPECT_EQ(report.g1_hit_blocks, 32U);   // trace block 1: 512 tokens
  ASSERT_EQ(report.groups.size(), 2U);
  EXPECT_EQ(report.groups[0].kind, "full_attention");
  EXPECT_EQ(report.groups[0].pages_verified, 32U);  // every hit block
  // The window reads the last ceil((32 - 1) / 16) = 2 blocks before the hit's end: the rest are null.
  EXPECT_EQ(report.groups[1].pages_verified, 2U);
  EXPECT_EQ(report.pages_verified, 34U);
  EXPECT_EQ(report.mismatches, 0U);
  EXPECT_GT(report.groups[1].removed_blocks + report.groups[1].stored_blocks, 0U);
  EXPECT_EQ(report.attention_checks, 0U);  // fewer steps than attention_check_every
}

TEST(GroupedReplay, APrefixEvictedToG2IsAHitInEveryGroupWithItsBytesChecked) {
  memory::HostRuntime runtime;
  ReplayConfig config = hybrid(140);
  config.session.host_blocks = 256;
  config.max_running = 1;
  // b's pages push a's out of G1 into G2; c shares a's first trace block.
  const auto report = replay(runtime, config, {request(0, {1, 2}), request(1000, {3, 4}), request(2000, {1, 5})});
  EXPECT_EQ(report.requests, 3U);
  EXPECT_EQ(report.g1_hit_blocks, 0U);
  EXPECT_EQ(report.g2_hit_blocks, 32U);  // trace block 1: 512 tokens, every group's pages from G2
  EXPECT_EQ(report.swap_ins, 34U);       // full attention's 32 pages and the window's last 2
  ASSERT_EQ(report.groups.size(), 2U);
  EXPECT_EQ(report.groups[0].pages_verified, 32U);
  EXPECT_EQ(report.groups[1].pages_verified, 2U);
  EXPECT_EQ(report.mismatches, 0U);
}

TEST(GroupedReplay, DecodeAndPreemptionUnderPressureFinishEveryRequestWithItsBytesIntact) {
  memory::HostRuntime runtime;
  ReplayConfig config = hybrid(200);
  config.max_running = 8;
  config.token_budget = 512;
  std::vector<TraceRequest> trace;
  // Arrivals spaced so earlier requests' shared block is cached when later
  // ones come; two requests of 1024 + 600 tokens need 2 x 102 full-attention
  // pages, more than the pool's 199, as they decode.
  for (std::uint64_t r = 0; r < 6; ++r) trace.push_back(request(30.0 * double(r), {1, 10 + r}, 600));
  const auto report = replay(runtime, config, trace);
  EXPECT_GT(report.preemptions, 0U);
  EXPECT_EQ(report.generated_tokens, 6U * 600U);
  EXPECT_EQ(report.rejected_requests, 0U);
  EXPECT_GT(report.g1_hit_blocks, 0U);
  EXPECT_GT(report.pages_verified, 0U);
  EXPECT_EQ(report.mismatches, 0U);
}

TEST(GroupedReplay, ARequestNoPoolHoldsIsRefusedAndTheOthersFinish) {
  memory::HostRuntime runtime;
  // 63 usable pages, chunks of 128 tokens: a 512-token prompt takes its 33
  // full-attention pages and a window's few; a 1024-token one needs 65 full-attention pages alone.
  ReplayConfig config = hybrid(64);
  config.token_budget = 128;
  const auto report = replay(runtime, config, {request(0, {1}, 5), request(0, {2, 3}, 5), request(0, {4}, 5)});
  EXPECT_EQ(report.requests, 3U);
  EXPECT_EQ(report.rejected_requests, 1U);
  EXPECT_EQ(report.generated_tokens, 10U);
  EXPECT_EQ(report.mismatches, 0U);
  config.max_model_len = 600;  // refused on arrival, as vLLM refuses a prompt past max_model_len
  const auto capped = replay(runtime, config, {request(0, {1}, 5), request(0, {2, 3}, 5)});
  EXPECT_EQ(capped.rejected_requests, 1U);
  EXPECT_EQ(capped.generated_tokens, 5U);
}

TEST(GroupedReplay, TheSameBytesAsTwoGroupsHoldMoreRequestsThanAsOneFullAttentionGroup) {
  memory::HostRuntime runtime;
  std::vector<TraceRequest> trace;
  for (std::uint64_t r = 0; r < 24; ++r) trace.push_back(request(0, {100 + r}, 64));
  ReplayConfig two = hybrid(201);  // 200 pages and the null page
  two.max_running = 64;
  ReplayConfig one = two;
  // One group of both layers: each page twice the bytes, so half as many.
  GroupSpec both = attention(GroupKind::FullAttention);
  both.layers = 2;
  one.session.manager.capacity = 100;
  one.session.manager.groups = {both};
  const auto hybrid_report = replay(runtime, two, trace);
  const auto single_report = replay(runtime, one, trace);
  EXPECT_EQ(hybrid_report.mismatches + single_report.mismatches, 0U);
  EXPECT_GT(hybrid_report.mean_running(), 1.3 * single_report.mean_running());
  EXPECT_LT(hybrid_report.virtual_ms, single_report.virtual_ms);
}

/// A hybrid manager of 64 pages over a pool of `page_bytes`-byte pages, one request of 64 tokens allocated.
struct CheckedPool {
  explicit CheckedPool(std::uint32_t page_bytes)
      : manager(hybrid(64).session.manager),
        pool(runtime, KvLayout(KvGeometry{.layers = 1,
                                          .kv_heads = 1,
                                          .head_dim = page_bytes / 4,
                                          .dtype = KvDtype::Fp8,
                                          .tokens_per_block = 2},
                               PageLayout::PageMajor, 64)),
        check(manager, pool, std::make_shared<GroupEventCounter>(2)),
        sequence(prompt(), ActiveSequenceConfig{.block_size = 16}) {
    EXPECT_TRUE(manager.allocate_slots(owner, sequence, 64).is_ready());
  }
  static std::vector<TokenId> prompt() {
    std::vector<TokenId> tokens(64);
    for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<TokenId>(i + 7);
    return tokens;
  }
  memory::HostRuntime runtime;
  g1::G1Manager manager;
  memory::KvPool pool;
  GroupPageCheck check;
  ActiveSequence sequence;
  const g1::OwnerId owner{1};
};

TEST(GroupPageCheck, AFlippedByteInACachedPageIsReported) {
  CheckedPool p(64);  // too small for K/V: the page pattern
  auto& [runtime, manager, pool, check, sequence, owner] = p;
  // Nothing computed yet, nothing skipped: the window group holds all 4 blocks too.
  EXPECT_EQ(check.write(owner, sequence, 0, 64), 4U + 4U);
  EXPECT_TRUE(check.verify(owner, sequence, 64, 1).empty());
  const PageId victim = manager.block_table(owner, 0)[2];
  std::byte* byte = pool.chunk_address(victim, 0) + 5;
  *byte = ~*byte;
  const auto bad = check.verify(owner, sequence, 64, 1);
  ASSERT_EQ(bad.size(), 1U);
  EXPECT_EQ(bad.front(), victim);
  EXPECT_EQ(check.counts()[0].mismatches, 1U);
}

TEST(GroupPageCheck, AnAttentionGroupsPagesHoldKvInItsFormatAndAFlippedByteIsReported) {
  // 4096-byte pages hold both groups' K/V (1 layer, 1 head of 8, bf16, 16 tokens: 512 bytes).
  CheckedPool p(4096);
  auto& [runtime, manager, pool, check, sequence, owner] = p;
  ASSERT_NE(check.kv_fill(0), nullptr);
  EXPECT_EQ(check.counts()[1].check, "kv");
  check.write(owner, sequence, 0, 40);   // blocks 0-1 complete, block 2 partial
  check.write(owner, sequence, 40, 64);  // block 2 completes: all its slots rewritten under its hash
  EXPECT_TRUE(check.verify(owner, sequence, 64, 1).empty());
  const PageId victim = manager.block_table(owner, 1)[2];
  std::byte* byte = pool.chunk_address(victim, 0) + 100;
  *byte = ~*byte;
  const auto bad = check.verify(owner, sequence, 64, 1);
  ASSERT_EQ(bad.size(), 1U);
  EXPECT_EQ(bad.front(), victim);
}

/// Decoding requests under the attention check every step.
ReplayReport attended(std::vector<GroupSpec> groups, std::uint64_t requests = 4, std::size_t output = 40) {
  memory::HostRuntime runtime;
  ReplayConfig config;
  config.session.manager = g1::G1ManagerConfig{.capacity = 256, .block_size = 16, .groups = std::move(groups)};
  config.session.group_page_bytes = 4096;
  config.verify = VerifyMode::Full;
  config.attention_check_every = 1;
  config.attention_check_sequences = 4;
  config.token_budget = 256;
  std::vector<TraceRequest> trace;
  for (std::uint64_t r = 0; r < requests; ++r) trace.push_back(request(10.0 * double(r), {1, 20 + r}, output));
  return replay(runtime, config, trace);
}

TEST(GroupedReplay, EveryAttentionGroupChecksTheNextTokensAttentionThroughItsTable) {
  const ReplayReport report = attended({attention(GroupKind::FullAttention), attention(GroupKind::SlidingWindow, 32)});
  ASSERT_EQ(report.groups.size(), 2U);
  for (const GroupReplayCounts& g : report.groups) {
    EXPECT_EQ(g.check, "kv");
    EXPECT_GT(g.attention_sequences, 0U) << g.kind;
    EXPECT_EQ(g.attention_mismatches, 0U) << g.kind;
  }
  EXPECT_GT(report.attention_checks, 0U);
  EXPECT_EQ(report.attention_mismatches + report.mismatches, 0U);
  EXPECT_GT(report.pages_verified, 0U);
}

TEST(GroupedReplay, MlaAndQuantizedChunkedGroupsAttendThroughTheirFormats) {
  GroupSpec mla{.kind = GroupKind::MlaAttention, .latent_dim = 128, .rope_dim = 16, .quant = KvQuant::Fp8DsMla};
  GroupSpec chunked = attention(GroupKind::ChunkedLocalAttention);
  chunked.attention_chunk_size = 64;
  chunked.head_dim = 16;
  chunked.quant = KvQuant::Nvfp4;
  const ReplayReport report = attended({mla, chunked}, 2, 12);
  ASSERT_EQ(report.groups.size(), 2U);
  EXPECT_GT(report.groups[0].attention_sequences, 0U);
  EXPECT_GT(report.groups[1].attention_sequences, 0U);
  EXPECT_EQ(report.attention_mismatches + report.mismatches, 0U);
}

}  // namespace
}  // namespace kvtier::replay
