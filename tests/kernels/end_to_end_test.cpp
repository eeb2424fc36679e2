// End to end on real pages of a HostRuntime KvPool: sequences allocated through
// the G1Manager (both backends), K/V written through their slot mappings,
// decode attention through their block tables equals dense attention — also
// after a prefix hit shares pages, after eviction reused pages, and after a
// KVBM Promote swapped a request's page for the canonical one.
#include <gtest/gtest.h>

#include <numeric>

#include "kernels/kv_test_data.hpp"
#include "kvtier/core/active_sequence.hpp"
#include "kvtier/driver/request_driver.hpp"
#include "kvtier/g1/g1_manager.hpp"
#include "kvtier/kernels/reference/paged_attention.hpp"
#include "kvtier/kernels/reference/write_kv.hpp"
#include "kvtier/memory/host_runtime.hpp"
#include "kvtier/memory/kv_pool.hpp"

namespace kvtier::kernels {
namespace {

using namespace testing;

constexpr std::uint32_t kBlock = 4, kKvHeads = 2, kQHeads = 4, kDim = 8, kLayers = 2;

std::vector<std::uint32_t> prompt(std::uint32_t first, std::uint32_t count) {
  std::vector<std::uint32_t> tokens(count);
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

class EndToEnd : public ::testing::TestWithParam<std::tuple<g1::G1Backend, PageLayout>> {
 protected:
  void SetUp() override {
    const auto [backend, kind] = GetParam();
    manager_ = std::make_unique<g1::G1Manager>(g1::G1ManagerConfig{.capacity = kPages,
                                                                   .block_size = kBlock,
                                                                   .dp_rank = 0,
                                                                   .backend = backend,
                                                                   .enable_prefix_caching = true,
                                                                   .eviction = g1::EvictionBackend::Lineage});
    pool_ = std::make_unique<memory::KvPool>(runtime_, KvLayout(KvGeometry{.layers = kLayers,
                                                                           .kv_heads = kKvHeads,
                                                                           .head_dim = kDim,
                                                                           .dtype = KvDtype::Bf16,
                                                                           .tokens_per_block = kBlock},
                                                                kind, kPages));
  }
  bool native() const { return manager_->backend() == g1::G1Backend::Native; }

  ActiveSequence sequence(std::vector<std::uint32_t> tokens, std::size_t max_output = 8) {
    return ActiveSequence(tokens, ActiveSequenceConfig{.block_size = kBlock,
                                                       .max_output_tokens = max_output,
                                                       .enable_prefix_caching = true,
                                                       .emit_token_ids = false,
                                                       .planned_output = {},
                                                       .seed = std::nullopt});
  }

  /// Allocates the prompt (the driver reuses the resident prefix on native)
  /// and computes the K/V of the tokens not already cached, through the slot mapping.
  void prefill(g1::OwnerId owner, ActiveSequence& seq) {
    driver::RequestDriver driver(*manager_);
    const std::size_t cached = manager_->get_prefill_cost(seq).cached_tokens;
    ASSERT_TRUE(driver.allocate(owner, seq, seq.len()).is_ready());
    compute(owner, seq, cached, seq.len());
    driver.finalize(owner, seq, 0, seq.len());
  }

  void decode_token(g1::OwnerId owner, ActiveSequence& seq, std::uint32_t token) {
    driver::RequestDriver driver(*manager_);
    ASSERT_TRUE(driver.decode(owner, seq, token).acquire.is_ready());
    compute(owner, seq, seq.len() - 1, seq.len());
    driver.finalize(owner, seq, seq.len() - 1, seq.len());
  }

  /// Writes K/V of tokens [first, end) of `seq` through its block table, every layer.
  void compute(g1::OwnerId owner, const ActiveSequence& seq, std::size_t first, std::size_t end) {
    const auto table = manager_->block_table(owner);
    std::vector<std::int64_t> slots;
    for (std::size_t t = first; t < end; ++t)
      slots.push_back(std::int64_t{table[t / kBlock].value()} * kBlock + t % kBlock);
    const std::vector<std::uint32_t> tokens(seq.tokens().begin(), seq.tokens().end());
    for (std::uint32_t layer = 0; layer < kLayers; ++layer) {
      const auto k = kv_rows(tokens, first, end, kKvHeads, kDim, 2 * layer);
      const auto v = kv_rows(tokens, first, end, kKvHeads, kDim, 2 * layer + 1);
      reference::write_kv(pool_->slab(), pool_->layout(), layer, k.data(), v.data(), end - first, slots.data());
    }
  }

  /// Decode attention through the block table equals dense attention over the token list.
  void expect_attention_matches(g1::OwnerId owner, const ActiveSequence& seq) {
    const auto table = manager_->block_table(owner);
    std::vector<std::int32_t> block_table;
    for (PageId page : table) block_table.push_back(static_cast<std::int32_t>(page.value()));
    const std::vector<std::int32_t> lens{static_cast<std::int32_t>(seq.len())};
    const auto q = query_for(owner.value(), kQHeads, kDim);
    const std::vector<std::uint32_t> tokens(seq.tokens().begin(), seq.tokens().end());
    const float scale = 1.0f / std::sqrt(float(kDim));
    for (std::uint32_t layer = 0; layer < kLayers; ++layer) {
      std::vector<float> out(q.size());
      reference::paged_attention_decode(pool_->slab(), pool_->layout(),
                                        PagedAttentionArgs{.query = q.data(),
                                                           .block_tables = block_table.data(),
                                                           .seq_lens = lens.data(),
                                                           .out = out.data(),
                                                           .seqs = 1,
                                                           .q_heads = kQHeads,
                                                           .max_blocks = static_cast<std::uint32_t>(block_table.size()),
                                                           .layer = layer,
                                                           .scale = scale});
      const auto expected = dense_attention(q, kQHeads, kv_rows(tokens, 0, seq.len(), kKvHeads, kDim, 2 * layer),
                                            kv_rows(tokens, 0, seq.len(), kKvHeads, kDim, 2 * layer + 1), seq.len(),
                                            kKvHeads, kDim, KvDtype::Bf16, scale);
      for (std::size_t i = 0; i < expected.size(); ++i) ASSERT_NEAR(out[i], expected[i], 1e-4f) << "layer " << layer;
    }
  }

  static constexpr std::uint32_t kPages = 12;
  memory::HostRuntime runtime_;
  std::unique_ptr<memory::KvPool> pool_;
  std::unique_ptr<g1::G1Manager> manager_;
};

TEST_P(EndToEnd, PrefixHitsEvictionAndDecodeKeepAttentionExact) {
  const g1::OwnerId a(1), b(2), c(3);
  ActiveSequence seq_a = sequence(prompt(100, 10));
  prefill(a, seq_a);
  expect_attention_matches(a, seq_a);

  // B shares A's first two blocks: its table points at A's pages, which it never wrote.
  std::vector<std::uint32_t> tokens_b = prompt(100, 8);
  for (std::uint32_t t : prompt(500, 5)) tokens_b.push_back(t);
  ActiveSequence seq_b = sequence(tokens_b);
  prefill(b, seq_b);
  EXPECT_EQ(manager_->block_table(b)[0], manager_->block_table(a)[0]);
  EXPECT_EQ(manager_->block_table(b)[1], manager_->block_table(a)[1]);
  expect_attention_matches(b, seq_b);

  // Decode across a block boundary (the tail is promoted on the way).
  for (std::uint32_t t = 0; t < 4; ++t) decode_token(b, seq_b, 900 + t);
  expect_attention_matches(b, seq_b);
  expect_attention_matches(a, seq_a);

  // A finishes; C needs more pages than are free: A's unshared pages are evicted and reused.
  driver::RequestDriver(*manager_).release(a, seq_a);
  const std::vector<PageId> pages_a_before(manager_->block_table(b).begin(), manager_->block_table(b).end());
  ActiveSequence seq_c = sequence(prompt(7000, 20));
  prefill(c, seq_c);
  expect_attention_matches(c, seq_c);
  expect_attention_matches(b, seq_b);  // B's pages (shared prefix included) were not touched
  EXPECT_EQ(std::vector<PageId>(manager_->block_table(b).begin(), manager_->block_table(b).end()), pages_a_before);
}

TEST_P(EndToEnd, KvbmPromoteAdoptionKeepsAttentionExact) {
  if (native()) GTEST_SKIP() << "adoption on Promote is KVBM behaviour";
  const g1::OwnerId a(1), b(2);
  // A computes the full 8-token prompt; B has the first 6 tokens and decodes the same 2.
  ActiveSequence seq_a = sequence(prompt(40, 8));
  prefill(a, seq_a);
  ActiveSequence seq_b = sequence(prompt(40, 6));
  prefill(b, seq_b);
  const PageId b_tail_before = manager_->block_table(b)[1];
  decode_token(b, seq_b, 46);
  decode_token(b, seq_b, 47);  // block 1 is full, still B's own partial page
  EXPECT_EQ(manager_->block_table(b)[1], b_tail_before);
  expect_attention_matches(b, seq_b);
  decode_token(b, seq_b, 48);  // the next token promotes the tail lazily: it adopts A's page
  EXPECT_NE(b_tail_before, manager_->block_table(a)[1]);
  EXPECT_EQ(manager_->block_table(b)[1], manager_->block_table(a)[1]);
  expect_attention_matches(b, seq_b);
}

TEST_P(EndToEnd, DestinationActivationKeepsAttentionExact) {
  const g1::OwnerId destination(1), racer(2);
  ActiveSequence seq_d = sequence(prompt(300, 10));
  auto reservation = manager_->reserve_destination_at(destination, seq_d);
  ASSERT_TRUE(reservation);
  // Another request computes the first 8 prompt tokens before the transfer lands.
  ActiveSequence seq_r = sequence(prompt(300, 8));
  prefill(racer, seq_r);
  manager_->activate_destination(std::move(*reservation));
  seq_d.commit_allocation(seq_d.len());
  // KVBM adopted the racer's blocks; the transfer fills only the pages the destination owns.
  const auto table_d = manager_->block_table(destination);
  const auto table_r = manager_->block_table(racer);
  for (std::size_t b = 0; b < table_d.size(); ++b) {
    const bool adopted = b < table_r.size() && table_d[b] == table_r[b];
    EXPECT_EQ(adopted, !native() && b < 2) << "block " << b;
    if (!adopted) compute(destination, seq_d, b * kBlock, std::min<std::size_t>((b + 1) * kBlock, seq_d.len()));
  }
  expect_attention_matches(destination, seq_d);
  expect_attention_matches(racer, seq_r);
}

INSTANTIATE_TEST_SUITE_P(Backends, EndToEnd,
                         ::testing::Combine(::testing::Values(g1::G1Backend::Native, g1::G1Backend::Kvbm),
                                            ::testing::Values(PageLayout::PageMajor, PageLayout::LayerMajor)),
                         [](const auto& param_info) {
                           return std::string(g1::backend_name(std::get<0>(param_info.param))) +
                                  (std::get<1>(param_info.param) == PageLayout::PageMajor ? "_page_major"
                                                                                          : "_layer_major");
                         });

}  // namespace
}  // namespace kvtier::kernels
