#include "kvtier/core/kv_layout.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "kvtier/core/errors.hpp"

namespace kvtier {
namespace {

constexpr KvGeometry kSmall{.layers = 3, .kv_heads = 2, .head_dim = 4, .dtype = KvDtype::Fp16, .tokens_per_block = 5};

TEST(KvLayout, PageBytesAreTheSameInBothLayouts) {
  const KvGeometry llama{.layers = 32, .kv_heads = 8, .head_dim = 128, .dtype = KvDtype::Bf16, .tokens_per_block = 16};
  for (PageLayout kind : {PageLayout::PageMajor, PageLayout::LayerMajor}) {
    const KvLayout layout(llama, kind, 100);
    EXPECT_EQ(layout.token_bytes(), 8U * 128 * 2);
    EXPECT_EQ(layout.layer_page_bytes(), 2U * 16 * 8 * 128 * 2);
    EXPECT_EQ(layout.page_bytes(), 2U * 1024 * 1024);
    EXPECT_EQ(layout.slab_bytes(), 100U * 2 * 1024 * 1024);
  }
  EXPECT_EQ(dtype_bytes(KvDtype::Fp8), 1U);
  EXPECT_EQ(dtype_bytes(KvDtype::Fp32), 4U);
}

TEST(KvLayout, PageMajorPagesAreOneContiguousChunk) {
  const KvLayout layout(kSmall, PageLayout::PageMajor, 4);
  EXPECT_EQ(layout.chunks_per_page(), 1U);
  EXPECT_EQ(layout.chunk_bytes(), layout.page_bytes());
  EXPECT_EQ(layout.chunk_offset(3, 0), 3 * layout.page_bytes());
  // [layer][K|V][token][head][dim]
  EXPECT_EQ(layout.offset(2, 1, KvPart::Value, 3, 1),
            2 * layout.page_bytes() + 1 * layout.layer_page_bytes() + (1 * 5 + 3) * layout.token_bytes() + 1 * 4 * 2);
}

TEST(KvLayout, LayerMajorPagesHaveOneChunkPerLayerTensor) {
  const KvLayout layout(kSmall, PageLayout::LayerMajor, 4);
  EXPECT_EQ(layout.chunks_per_page(), 3U);
  EXPECT_EQ(layout.chunk_bytes(), layout.layer_page_bytes());
  EXPECT_EQ(layout.layer_offset(2), 2 * 4 * layout.layer_page_bytes());
  EXPECT_EQ(layout.chunk_offset(1, 2), layout.layer_offset(2) + layout.layer_page_bytes());
  for (std::uint32_t page = 0; page < 4; ++page) {
    for (std::uint32_t layer = 0; layer < 3; ++layer) {
      EXPECT_EQ(layout.offset(page, layer, KvPart::Key, 0, 0), layout.chunk_offset(page, layer));
    }
  }
}

// Every element of every page maps to its own bytes, inside the slab, in both layouts.
TEST(KvLayout, OffsetsTileTheSlabExactlyOnce) {
  for (PageLayout kind : {PageLayout::PageMajor, PageLayout::LayerMajor}) {
    const KvLayout layout(kSmall, kind, 4);
    std::vector<int> covered(layout.slab_bytes(), 0);
    const std::size_t head_bytes = kSmall.head_dim * dtype_bytes(kSmall.dtype);
    for (std::uint32_t page = 0; page < 4; ++page)
      for (std::uint32_t layer = 0; layer < kSmall.layers; ++layer)
        for (KvPart part : {KvPart::Key, KvPart::Value})
          for (std::uint32_t token = 0; token < kSmall.tokens_per_block; ++token)
            for (std::uint32_t head = 0; head < kSmall.kv_heads; ++head) {
              const std::size_t offset = layout.offset(page, layer, part, token, head);
              ASSERT_LE(offset + head_bytes, layout.slab_bytes());
              for (std::size_t b = 0; b < head_bytes; ++b) ++covered[offset + b];
            }
    for (int count : covered) ASSERT_EQ(count, 1) << page_layout_name(kind);
  }
}

TEST(KvLayout, ChunksInOrderFormThePageLogicalBytes) {
  const KvLayout layout(kSmall, PageLayout::LayerMajor, 4);
  // Logical byte of (layer, K, token 0, head 0) is layer * layer_page_bytes within the page.
  for (std::uint32_t layer = 0; layer < kSmall.layers; ++layer) {
    const std::size_t logical = layer * layout.layer_page_bytes();
    const std::uint32_t chunk = static_cast<std::uint32_t>(logical / layout.chunk_bytes());
    EXPECT_EQ(layout.chunk_offset(2, chunk) + logical % layout.chunk_bytes(),
              layout.offset(2, layer, KvPart::Key, 0, 0));
  }
}

TEST(KvLayout, ArithmeticIsConstexpr) {
  static_assert(dtype_bytes(KvDtype::Bf16) == 2);
  constexpr std::size_t token = std::size_t{kSmall.kv_heads} * kSmall.head_dim * dtype_bytes(kSmall.dtype);
  static_assert(token == 16);
  SUCCEED();
}

TEST(KvLayout, RejectsImpossibleGeometry) {
  KvGeometry zero = kSmall;
  zero.head_dim = 0;
  EXPECT_THROW(KvLayout(zero, PageLayout::PageMajor, 4), ConfigError);
  KvGeometry one_token = kSmall;
  one_token.tokens_per_block = 1;
  EXPECT_THROW(KvLayout(one_token, PageLayout::PageMajor, 4), ConfigError);
  const KvGeometry huge{.layers = 0xFFFFFFFF,
                        .kv_heads = 0xFFFFFFFF,
                        .head_dim = 0xFFFFFFFF,
                        .dtype = KvDtype::Fp32,
                        .tokens_per_block = 16};
  EXPECT_THROW(KvLayout(huge, PageLayout::LayerMajor, 0xFFFFFFFF), ConfigError);
}

TEST(KvLayout, ParsesNamesAndRejectsUnknownOnes) {
  EXPECT_EQ(parse_dtype("fp8"), KvDtype::Fp8);
  EXPECT_EQ(parse_page_layout("layer-major"), PageLayout::LayerMajor);
  EXPECT_THROW(parse_dtype("int4"), ConfigError);
  EXPECT_THROW(parse_page_layout("paged"), ConfigError);
}

}  // namespace
}  // namespace kvtier
