// A manager with KV cache groups over an offload tier (model-geometry.md §5,
// docs/offload.md "KV cache groups"): every group's evicted blocks go to G2
// under (hash, group) with their group's format, a swap-in brings back what
// the groups' fixed point over G1 and G2 needs, each block into its own
// group and byte for byte, G2's events carry group_idx, and a block of
// another format or group is refused and counted.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <numeric>
#include <vector>

#include "kvtier/core/active_sequence.hpp"
#include "kvtier/core/kv_event_sink.hpp"
#include "kvtier/memory/host_runtime.hpp"
#include "kvtier/session/session.hpp"

namespace kvtier::offload {
namespace {

constexpr std::uint32_t kBlock = 16;

/// Full attention and a 32-token sliding window, 512-byte pages each.
std::vector<GroupSpec> hybrid_groups() {
  return {GroupSpec{.kind = GroupKind::FullAttention, .kv_heads = 1, .head_dim = 8, .dtype = KvDtype::Bf16},
          GroupSpec{.kind = GroupKind::SlidingWindow,
                    .sliding_window = 32,
                    .kv_heads = 1,
                    .head_dim = 8,
                    .dtype = KvDtype::Bf16}};
}

ActiveSequence prompt_of(TokenId first, std::size_t tokens) {
  std::vector<TokenId> ids(tokens);
  std::iota(ids.begin(), ids.end(), first);
  return ActiveSequence(ids, ActiveSequenceConfig{.block_size = kBlock, .max_output_tokens = 1, .seed = 1});
}

class GroupedOffload : public ::testing::Test {
 protected:
  void build(std::uint32_t capacity, std::uint32_t host_blocks) {
    session_ = std::make_unique<session::Session>(
        runtime_,
        session::SessionConfig{
            .manager = g1::G1ManagerConfig{.capacity = capacity, .block_size = kBlock, .groups = hybrid_groups()},
            .host_blocks = host_blocks,
            .event_sinks = {sink_}});
  }
  /// Every page of `owner`'s blocks in [0, blocks) of each group, by (group, block).
  std::map<std::pair<std::size_t, std::size_t>, PageId> pages_of(g1::OwnerId owner, std::size_t blocks) const {
    std::map<std::pair<std::size_t, std::size_t>, PageId> out;
    const g1::G1Manager& manager = session_->manager();
    for (std::size_t g = 0; g < manager.group_count(); ++g) {
      const auto table = manager.block_table(owner, g);
      for (std::size_t b = 0; b < std::min(blocks, table.size()); ++b) {
        if (table[b] != *manager.null_page()) out[{g, b}] = table[b];
      }
    }
    return out;
  }
  std::vector<std::byte> bytes_of(PageId page) const {
    const std::byte* at = session_->pool().chunk_address(page, 0);
    return {at, at + session_->pool().layout().chunk_bytes()};
  }
  /// Admits and computes `sequence` whole, then releases it: its blocks stay cached.
  driver::Admission run(g1::OwnerId owner, ActiveSequence& sequence,
                        std::map<std::pair<std::size_t, std::size_t>, std::vector<std::byte>>* written = nullptr) {
    driver::RequestDriver driver = session_->driver();
    const driver::Admission admission = driver.admit(owner, sequence, sequence.len(), sequence.len());
    EXPECT_TRUE(admission.acquire.is_ready());
    if (!admission.acquire.is_ready()) return admission;
    for (const auto& [at, page] : pages_of(owner, sequence.len() / kBlock)) {
      if (written == nullptr || at.second < admission.cached_blocks) continue;
      std::byte* bytes = session_->pool().chunk_address(page, 0);
      for (std::size_t i = 0; i < session_->pool().layout().chunk_bytes(); ++i) {
        bytes[i] = static_cast<std::byte>((at.first * 131 + at.second * 17 + i) & 0xFF);
      }
      (*written)[at] = bytes_of(page);
    }
    driver.finalize(owner, sequence, 0, sequence.len());
    driver.release(owner, sequence);
    return admission;
  }

  memory::HostRuntime runtime_;
  std::shared_ptr<RecordingEventSink> sink_ = std::make_shared<RecordingEventSink>();
  std::unique_ptr<session::Session> session_;
};

TEST_F(GroupedOffload, EveryGroupsBlocksComeBackFromG2IntoTheirGroupByteForByte) {
  build(/*capacity=*/11, /*host_blocks=*/32);
  std::map<std::pair<std::size_t, std::size_t>, std::vector<std::byte>> written;
  ActiveSequence a = prompt_of(100, 64);
  run(g1::OwnerId(1), a, &written);
  ASSERT_EQ(written.size(), 8U);  // 4 blocks in each group
  // Another prompt takes the pages: a's blocks leave G1 for G2.
  ActiveSequence b = prompt_of(5000, 64);
  run(g1::OwnerId(2), b);
  (void)session_->manager().collect_offloads(true);
  EXPECT_GT(session_->engine()->stats().used, 0U);
  EXPECT_EQ(session_->engine()->stats().format_refusals, 0U);

  // a again: the groups' fixed point over G1 and G2 is 48 tokens (vLLM's
  // candidate leaves the last token): full attention blocks 0-2, the window's 1-2.
  ActiveSequence again = prompt_of(100, 64);
  const std::size_t g1_hit_before = session_->manager().get_prefill_cost(again).cached_tokens;
  EXPECT_LT(g1_hit_before, 48U);
  driver::RequestDriver driver = session_->driver();
  const driver::Admission admission = driver.admit(g1::OwnerId(3), again, 64, 64);
  ASSERT_TRUE(admission.acquire.is_ready());
  EXPECT_EQ(admission.cached_blocks, 3U);
  // Every page of the hit that G1 no longer held came from G2.
  EXPECT_GT(admission.swapped_in_pages, 0U);
  EXPECT_EQ(admission.swapped_in, 3U - g1_hit_before / kBlock);
  const auto table_window = session_->manager().block_table(g1::OwnerId(3), 1);
  EXPECT_EQ(table_window[0], *session_->manager().null_page());  // outside the window: never brought back
  std::size_t compared = 0;
  for (const auto& [at, page] : pages_of(g1::OwnerId(3), 3)) {
    EXPECT_EQ(bytes_of(page), written.at(at)) << "group " << at.first << " block " << at.second;
    ++compared;
  }
  EXPECT_EQ(compared, 5U);
  session_->manager().audit();

  // G2's events name each block's group.
  std::map<std::size_t, std::size_t> stored_by_group;
  for (const KvEvent& event : sink_->events()) {
    if (event.tier != StorageTier::HostPinned) continue;
    ASSERT_TRUE(event.group.has_value());
    if (std::holds_alternative<KvStored>(event.data)) {
      stored_by_group[event.group->index] += std::get<KvStored>(event.data).blocks.size();
    }
  }
  EXPECT_GT(stored_by_group[0], 0U);
  EXPECT_GT(stored_by_group[1], 0U);
}

TEST_F(GroupedOffload, AVictimOfAnotherFormatOrGroupIsRefusedAndCounted) {
  build(/*capacity=*/8, /*host_blocks=*/8);
  OffloadEngine& engine = *session_->engine();
  const ModelGeometry& geometry = *session_->manager().geometry();
  const SequenceHash hash(42);
  const auto victim = [&](std::size_t group, std::uint64_t format) {
    return g1::EvictedBlock{PageId(1), g1::TieredBlock{.plh = g1::group_tier_key(hash, group),
                                                       .hash = hash,
                                                       .parent = std::nullopt,
                                                       .local = LocalBlockHash(0),
                                                       .token_ids = std::nullopt,
                                                       .format = format}};
  };
  const g1::EvictedBlock wrong[] = {victim(0, geometry.block_fingerprint(1)), victim(2, geometry.block_fingerprint(0)),
                                    victim(0, 0)};
  EXPECT_TRUE(engine.swap_out(wrong).quarantined.empty());
  EXPECT_EQ(engine.stats().format_refusals, 3U);
  EXPECT_EQ(engine.stats().used, 0U);
  const PositionalLineageHash key = g1::group_tier_key(hash, 0);
  EXPECT_EQ(engine.holds(std::span(&key, 1)), std::vector<bool>{false});
  // The same block in its group's format is taken.
  const g1::EvictedBlock right[] = {victim(0, geometry.block_fingerprint(0))};
  EXPECT_EQ(engine.swap_out(right).quarantined.size(), 1U);
  (void)engine.poll(true);
  EXPECT_EQ(engine.holds(std::span(&key, 1)), std::vector<bool>{true});
  EXPECT_EQ(engine.stats().format_refusals, 3U);
}

TEST_F(GroupedOffload, TheGroupsBlockFingerprintsDifferByGroupAndFormat) {
  const ModelGeometry plain = ModelGeometry::resolve(hybrid_groups(), kBlock);
  std::vector<GroupSpec> fp8 = hybrid_groups();
  fp8[0].quant = KvQuant::Fp8PerTensor;
  fp8[0].head_dim = 16;  // the same page bytes in fp8
  const ModelGeometry quantized = ModelGeometry::resolve(fp8, kBlock);
  EXPECT_EQ(plain.groups()[0].padded_page_bytes, quantized.groups()[0].padded_page_bytes);
  EXPECT_NE(plain.block_fingerprint(0), plain.block_fingerprint(1));
  EXPECT_NE(plain.block_fingerprint(0), quantized.block_fingerprint(0));
  EXPECT_EQ(plain.block_fingerprint(1), quantized.block_fingerprint(1));
}

}  // namespace
}  // namespace kvtier::offload
