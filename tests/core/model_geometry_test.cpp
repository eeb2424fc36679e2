// KV cache groups resolved into one pool (docs/spec/model-geometry.md,
// section 2): one page size for every group — smaller attention pages scale
// their block size, a Mamba state and a page that does not divide are padded,
// the attention block is raised to cover a Mamba state when the caller lets
// it — the hash unit (GCD) and scheduler unit (LCM), the null page, and every
// impossible group refused by name.
#include "kvtier/core/model_geometry.hpp"

#include <gtest/gtest.h>

#include "kvtier/core/errors.hpp"

namespace kvtier {
namespace {

GroupSpec attention(GroupKind kind, std::uint32_t layers, std::uint32_t heads, std::uint32_t dim, KvDtype dtype,
                    std::uint32_t block_size = 0) {
  GroupSpec g{.kind = kind, .layers = layers, .block_size = block_size, .kv_heads = heads, .head_dim = dim};
  g.dtype = dtype;
  if (is_windowed(kind)) g.sliding_window = 32;
  if (kind == GroupKind::ChunkedLocalAttention) g.attention_chunk_size = 64;
  return g;
}

GroupSpec mamba(std::uint64_t state_bytes, MambaMode mode = MambaMode::Align) {
  return GroupSpec{.kind = GroupKind::Mamba, .layers = 1, .mamba_mode = mode, .state_bytes = state_bytes};
}

TEST(ModelGeometry, OneFullAttentionGroupIsTodaysGeometry) {
  const KvGeometry today{.layers = 2, .kv_heads = 2, .head_dim = 64, .dtype = KvDtype::Bf16, .tokens_per_block = 16};
  const ModelGeometry m = ModelGeometry::single(today);
  ASSERT_EQ(m.group_count(), 1U);
  EXPECT_EQ(m.page_bytes(), KvLayout(today, PageLayout::PageMajor, 1).page_bytes());
  EXPECT_EQ(m.hash_block_size(), 16U);
  EXPECT_EQ(m.scheduler_block_size(), 16U);
  EXPECT_FALSE(m.has_null_page());
  EXPECT_FALSE(m.groups()[0].padded());
}

// H6: full attention bs 32 fp16 and sliding window bs 16 fp32 (1 head of size 1)
// have equal 128-byte pages: the hash unit is 16, the scheduler unit 32.
TEST(ModelGeometry, GroupsOfDifferentBlockSizesShareOnePageSize) {
  const ModelGeometry m = ModelGeometry::resolve({attention(GroupKind::FullAttention, 1, 1, 1, KvDtype::Fp16, 32),
                                                  attention(GroupKind::SlidingWindow, 1, 1, 1, KvDtype::Fp32, 16)},
                                                 16);
  EXPECT_EQ(m.page_bytes(), 128U);
  EXPECT_EQ(m.groups()[0].page_bytes, 128U);
  EXPECT_EQ(m.groups()[1].page_bytes, 128U);
  EXPECT_EQ(m.hash_block_size(), 16U);
  EXPECT_EQ(m.scheduler_block_size(), 32U);
  EXPECT_TRUE(m.has_null_page());
}

TEST(ModelGeometry, ASmallerAttentionPageThatDividesScalesItsBlockSize) {
  // Two layers against one: the one-layer group takes blocks twice as long.
  const ModelGeometry m = ModelGeometry::resolve({attention(GroupKind::FullAttention, 2, 2, 64, KvDtype::Bf16),
                                                  attention(GroupKind::SlidingWindow, 1, 2, 64, KvDtype::Bf16)},
                                                 16);
  EXPECT_EQ(m.groups()[0].spec.block_size, 16U);
  EXPECT_EQ(m.groups()[1].spec.block_size, 32U);
  EXPECT_EQ(m.groups()[1].page_bytes, m.page_bytes());
  EXPECT_FALSE(m.groups()[1].padded());
  EXPECT_EQ(m.hash_block_size(), 16U);
  EXPECT_EQ(m.scheduler_block_size(), 32U);
}

TEST(ModelGeometry, APageThatDoesNotDivideIsPaddedOneThatDoesIsScaled) {
  // Three layers against two: 2/3 does not divide; against one (bs 16 given): it does.
  const ModelGeometry m = ModelGeometry::resolve({attention(GroupKind::FullAttention, 3, 1, 8, KvDtype::Bf16),
                                                  attention(GroupKind::SlidingWindow, 2, 1, 8, KvDtype::Bf16),
                                                  attention(GroupKind::SlidingWindow, 1, 1, 8, KvDtype::Bf16, 16)},
                                                 16);
  EXPECT_EQ(m.page_bytes(), 3U * 16 * 32);
  EXPECT_TRUE(m.groups()[1].padded());
  EXPECT_EQ(m.groups()[1].page_bytes, 2U * 16 * 32);
  EXPECT_EQ(m.groups()[1].padded_page_bytes, m.page_bytes());
  EXPECT_EQ(m.groups()[2].spec.block_size, 48U);  // a given block size scales too, as vLLM's
  EXPECT_FALSE(m.groups()[2].padded());
  EXPECT_EQ(m.scheduler_block_size(), 48U);
}

TEST(ModelGeometry, AMambaStateRaisesTheAttentionBlockUnlessFixedAndIsPadded) {
  // 1 layer x 1 head x 64 dims of bf16: 256 bytes a token; a 10,000-byte state.
  const std::vector<GroupSpec> groups{attention(GroupKind::FullAttention, 1, 1, 64, KvDtype::Bf16), mamba(10000)};
  const ModelGeometry raised = ModelGeometry::resolve(groups, 16, /*block_size_fixed=*/false);
  EXPECT_EQ(raised.groups()[0].spec.block_size, 48U);  // 16 x ceil(10000 / (16 x 256))
  EXPECT_EQ(raised.page_bytes(), 48U * 256);
  EXPECT_FALSE(raised.groups()[0].padded());
  EXPECT_EQ(raised.groups()[1].page_bytes, 10000U);
  EXPECT_TRUE(raised.groups()[1].padded());
  EXPECT_EQ(raised.groups()[1].spec.block_size, 48U);
  EXPECT_EQ(raised.hash_block_size(), 48U);
  EXPECT_EQ(raised.scheduler_block_size(), 48U);
  const ModelGeometry fixed = ModelGeometry::resolve(groups, 16);
  EXPECT_EQ(fixed.groups()[0].spec.block_size, 16U);
  EXPECT_EQ(fixed.page_bytes(), 10000U);  // the state is the largest page: attention is padded to it
  EXPECT_TRUE(fixed.groups()[0].padded());
  EXPECT_NE(fixed.describe().find("padded to 10000 B"), std::string::npos) << fixed.describe();
}

TEST(ModelGeometry, ImpossibleGroupsAreRefusedByName) {
  EXPECT_THROW(ModelGeometry::resolve({}, 16), ConfigError);
  EXPECT_THROW(ModelGeometry::resolve({attention(GroupKind::FullAttention, 1, 1, 8, KvDtype::Bf16)}, 0), ConfigError);
  GroupSpec no_heads = attention(GroupKind::FullAttention, 1, 1, 8, KvDtype::Bf16);
  no_heads.kv_heads = 0;
  GroupSpec no_window = attention(GroupKind::SlidingWindow, 1, 1, 8, KvDtype::Bf16);
  no_window.sliding_window = 0;
  GroupSpec window_on_full = attention(GroupKind::FullAttention, 1, 1, 8, KvDtype::Bf16);
  window_on_full.sliding_window = 8;
  GroupSpec no_chunk = attention(GroupKind::ChunkedLocalAttention, 1, 1, 8, KvDtype::Bf16);
  no_chunk.attention_chunk_size = 0;
  GroupSpec heads_on_mamba = mamba(100);
  heads_on_mamba.kv_heads = 2;
  GroupSpec mode_on_full = attention(GroupKind::FullAttention, 1, 1, 8, KvDtype::Bf16);
  mode_on_full.mamba_mode = MambaMode::All;
  GroupSpec no_layers = attention(GroupKind::FullAttention, 0, 1, 8, KvDtype::Bf16);
  for (const GroupSpec& bad : {no_heads, no_window, window_on_full, no_chunk, heads_on_mamba, mode_on_full, no_layers,
                               mamba(0), GroupSpec{.kind = GroupKind::MlaAttention}}) {
    try {
      (void)ModelGeometry::resolve({attention(GroupKind::FullAttention, 1, 1, 8, KvDtype::Bf16), bad}, 16);
      ADD_FAILURE() << group_kind_name(bad.kind) << " was taken";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("KV cache group 1"), std::string::npos) << e.what();
    }
  }
  // A given block size the manager's does not divide: the hash unit would split its blocks.
  EXPECT_THROW(ModelGeometry::resolve({attention(GroupKind::FullAttention, 1, 1, 8, KvDtype::Bf16, 24)}, 16),
               ConfigError);
}

TEST(ModelGeometry, KindAndModeNamesAreVllms) {
  for (const GroupKind kind : {GroupKind::FullAttention, GroupKind::SlidingWindow, GroupKind::ChunkedLocalAttention,
                               GroupKind::MlaAttention, GroupKind::SlidingWindowMla, GroupKind::Mamba}) {
    EXPECT_EQ(parse_group_kind(group_kind_name(kind)), kind);
  }
  EXPECT_STREQ(group_kind_name(GroupKind::ChunkedLocalAttention), "chunked_local_attention");
  EXPECT_THROW((void)parse_group_kind("local"), ConfigError);
  EXPECT_EQ(parse_mamba_mode("align"), MambaMode::Align);
  EXPECT_THROW((void)parse_mamba_mode("some"), ConfigError);
}

TEST(ModelGeometry, MlaPagesHoldOneLatentVectorAToken) {
  // DeepSeek V3's latent: 512 + 64 values of bf16, no K/V factor of 2.
  const GroupSpec mla{.kind = GroupKind::MlaAttention, .layers = 61, .latent_dim = 512, .rope_dim = 64};
  EXPECT_EQ(mla.token_bytes(), (512U + 64U) * 2U);
  const ModelGeometry m = ModelGeometry::resolve({mla}, 64);
  EXPECT_EQ(m.page_bytes(), 61U * 64U * 576U * 2U);
  EXPECT_TRUE(m.has_null_page());  // not full attention
}

}  // namespace
}  // namespace kvtier
