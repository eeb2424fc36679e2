// The CPU references against a naive dense computation: K/V written through a
// slot mapping into scattered pages, attention read back through block tables.
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <tuple>

#include "kernels/kv_test_data.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/kernels/reference/copy_pages.hpp"
#include "kvtier/kernels/reference/paged_attention.hpp"
#include "kvtier/kernels/reference/write_kv.hpp"

namespace kvtier::kernels {
namespace {

using namespace testing;

// layout, dtype, GQA group, block size
using Case = std::tuple<PageLayout, KvDtype, std::uint32_t, std::uint32_t>;

class PagedAttentionReference : public ::testing::TestWithParam<Case> {};

TEST_P(PagedAttentionReference, MatchesDenseAttentionThroughScatteredPages) {
  const auto [kind, dtype, group, block] = GetParam();
  constexpr std::uint32_t kKvHeads = 2, kDim = 16, kLayers = 2, kPages = 40;
  const std::uint32_t q_heads = kKvHeads * group;
  const KvLayout layout(
      KvGeometry{.layers = kLayers, .kv_heads = kKvHeads, .head_dim = kDim, .dtype = dtype, .tokens_per_block = block},
      kind, kPages);
  std::vector<std::byte> slab(layout.slab_bytes());
  std::mt19937 rng(11);
  std::vector<std::int32_t> free_pages(kPages);
  std::iota(free_pages.begin(), free_pages.end(), 0);
  std::shuffle(free_pages.begin(), free_pages.end(), rng);

  // Sequences that end inside a block, exactly on one, and a single token.
  const std::vector<std::size_t> lengths{1, 2 * block, 2 * block + 1, 5 * block - 1};
  const std::uint32_t max_blocks = 5;
  std::vector<std::int32_t> tables(lengths.size() * max_blocks, -1);
  std::vector<std::vector<std::uint32_t>> tokens(lengths.size());
  std::size_t next_page = 0;
  for (std::size_t s = 0; s < lengths.size(); ++s) {
    for (std::size_t t = 0; t < lengths[s]; ++t) tokens[s].push_back(static_cast<std::uint32_t>(rng() % 50000));
    const std::size_t blocks = (lengths[s] + block - 1) / block;
    for (std::size_t b = 0; b < blocks; ++b) tables[s * max_blocks + b] = free_pages[next_page++];
    std::vector<std::int64_t> slots;
    for (std::size_t t = 0; t < lengths[s]; ++t)
      slots.push_back(std::int64_t{tables[s * max_blocks + t / block]} * block + t % block);
    for (std::uint32_t layer = 0; layer < kLayers; ++layer) {
      // Layer 0 holds other data: reading layer 1 must not see it.
      const auto k = kv_rows(tokens[s], 0, lengths[s], kKvHeads, kDim, layer == 1 ? 0 : 5);
      const auto v = kv_rows(tokens[s], 0, lengths[s], kKvHeads, kDim, layer == 1 ? 1 : 6);
      reference::write_kv(slab.data(), layout, layer, k.data(), v.data(), lengths[s], slots.data());
    }
  }
  std::vector<float> query;
  for (std::size_t s = 0; s < lengths.size(); ++s) {
    const auto q = query_for(s, q_heads, kDim);
    query.insert(query.end(), q.begin(), q.end());
  }
  std::vector<std::int32_t> seq_lens(lengths.begin(), lengths.end());
  std::vector<float> out(query.size());
  const float scale = 1.0f / std::sqrt(float(kDim));
  reference::paged_attention_decode(slab.data(), layout,
                                    PagedAttentionArgs{.query = query.data(),
                                                       .block_tables = tables.data(),
                                                       .seq_lens = seq_lens.data(),
                                                       .out = out.data(),
                                                       .seqs = static_cast<std::uint32_t>(lengths.size()),
                                                       .q_heads = q_heads,
                                                       .max_blocks = max_blocks,
                                                       .layer = 1,
                                                       .scale = scale});
  for (std::size_t s = 0; s < lengths.size(); ++s) {
    const auto k = kv_rows(tokens[s], 0, lengths[s], kKvHeads, kDim, 0);
    const auto v = kv_rows(tokens[s], 0, lengths[s], kKvHeads, kDim, 1);
    const auto q = query_for(s, q_heads, kDim);
    const auto expected = dense_attention(q, q_heads, k, v, lengths[s], kKvHeads, kDim, dtype, scale);
    for (std::size_t i = 0; i < expected.size(); ++i) {
      ASSERT_NEAR(out[s * q_heads * kDim + i], expected[i], 1e-4f) << "sequence " << s << " element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, PagedAttentionReference,
                         ::testing::Combine(::testing::Values(PageLayout::PageMajor, PageLayout::LayerMajor),
                                            ::testing::Values(KvDtype::Fp32, KvDtype::Bf16, KvDtype::Fp16,
                                                              KvDtype::Fp8),
                                            ::testing::Values(1U, 4U), ::testing::Values(4U, 16U)),
                         [](const auto& param_info) {
                           return std::string(page_layout_name(std::get<0>(param_info.param))) == "page-major"
                                      ? std::string("page_major_") + dtype_name(std::get<1>(param_info.param)) +
                                            "_gqa" + std::to_string(std::get<2>(param_info.param)) + "_bs" +
                                            std::to_string(std::get<3>(param_info.param))
                                      : std::string("layer_major_") + dtype_name(std::get<1>(param_info.param)) +
                                            "_gqa" + std::to_string(std::get<2>(param_info.param)) + "_bs" +
                                            std::to_string(std::get<3>(param_info.param));
                         });

TEST(WriteKvReference, SkipsPaddingSlotsAndRejectsSlotsOutsideThePool) {
  const KvLayout layout(
      KvGeometry{.layers = 1, .kv_heads = 1, .head_dim = 2, .dtype = KvDtype::Fp32, .tokens_per_block = 2},
      PageLayout::PageMajor, 2);
  std::vector<std::byte> slab(layout.slab_bytes());
  const std::vector<float> k{1, 2, 3, 4}, v{5, 6, 7, 8};
  const std::vector<std::int64_t> slots{-1, 3};
  reference::write_kv(slab.data(), layout, 0, k.data(), v.data(), 2, slots.data());
  const auto at = [&](std::size_t offset) { return load_kv_element(slab.data() + offset, KvDtype::Fp32); };
  EXPECT_EQ(at(layout.offset(1, 0, KvPart::Key, 1, 0)), 3.0f);
  EXPECT_EQ(at(layout.offset(1, 0, KvPart::Value, 1, 0) + 4), 8.0f);
  EXPECT_EQ(at(layout.offset(0, 0, KvPart::Key, 0, 0)), 0.0f);  // the padded token wrote nothing
  const std::vector<std::int64_t> outside{4};
  EXPECT_THROW(reference::write_kv(slab.data(), layout, 0, k.data(), v.data(), 1, outside.data()), ContractError);
  EXPECT_THROW(reference::write_kv(slab.data(), layout, 1, k.data(), v.data(), 1, slots.data()), ContractError);
}

TEST(PagedAttentionReference, RejectsArgumentsThatDoNotFitTheLayout) {
  const KvLayout layout(
      KvGeometry{.layers = 1, .kv_heads = 2, .head_dim = 2, .dtype = KvDtype::Fp32, .tokens_per_block = 2},
      PageLayout::PageMajor, 2);
  std::vector<std::byte> slab(layout.slab_bytes());
  std::vector<float> q(6), out(6);
  std::vector<std::int32_t> table{0, 1}, lens{3};
  PagedAttentionArgs args{.query = q.data(),
                          .block_tables = table.data(),
                          .seq_lens = lens.data(),
                          .out = out.data(),
                          .seqs = 1,
                          .q_heads = 3,
                          .max_blocks = 2,
                          .layer = 0,
                          .scale = 1.0f};
  EXPECT_THROW(reference::paged_attention_decode(slab.data(), layout, args), ContractError);  // 3 % 2 != 0
  args.q_heads = 2;
  lens[0] = 5;
  EXPECT_THROW(reference::paged_attention_decode(slab.data(), layout, args), ContractError);  // longer than table
  lens[0] = 3;
  table[1] = 7;
  EXPECT_THROW(reference::paged_attention_decode(slab.data(), layout, args), ContractError);  // page outside
  table[1] = 1;
  EXPECT_NO_THROW(reference::paged_attention_decode(slab.data(), layout, args));
}

TEST(PagedAttentionReference, EmptySequenceGivesZerosNotNaN) {
  // The defined empty result the CUDA kernel also produces (issue #10).
  const KvLayout layout(
      KvGeometry{.layers = 1, .kv_heads = 1, .head_dim = 2, .dtype = KvDtype::Fp32, .tokens_per_block = 2},
      PageLayout::PageMajor, 2);
  std::vector<std::byte> slab(layout.slab_bytes());
  std::vector<float> q{1, 1, 1, 1}, out{9, 9, 9, 9};
  std::vector<std::int32_t> table{0, 1}, lens{0, -1};
  PagedAttentionArgs args{.query = q.data(),
                          .block_tables = table.data(),
                          .seq_lens = lens.data(),
                          .out = out.data(),
                          .seqs = 2,
                          .q_heads = 1,
                          .max_blocks = 1,
                          .layer = 0,
                          .scale = 1.0f};
  EXPECT_THROW(reference::paged_attention_decode(slab.data(), layout, args), ContractError);  // -1 is no length
  args.seqs = 1;
  reference::paged_attention_decode(slab.data(), layout, args);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 0.0f);
}

TEST(CopyPagesReference, CopiesEveryChunkAndRejectsNullPointers) {
  std::vector<unsigned char> source(64), target(64, 0);
  std::iota(source.begin(), source.end(), 1);
  const std::vector<CopyDescriptor> chunks{{source.data(), target.data() + 32, 32},
                                           {source.data() + 33, target.data(), 7}};
  reference::copy_pages(chunks);
  EXPECT_TRUE(std::equal(source.begin(), source.begin() + 32, target.begin() + 32));
  EXPECT_TRUE(std::equal(source.begin() + 33, source.begin() + 40, target.begin()));
  EXPECT_EQ(target[7], 0);
  const std::vector<CopyDescriptor> bad{{nullptr, target.data(), 4}};
  EXPECT_THROW(reference::copy_pages(bad), ContractError);
}

}  // namespace
}  // namespace kvtier::kernels
