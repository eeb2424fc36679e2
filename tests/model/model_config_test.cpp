// Real models' KV geometry from their config.json (presets and files): the
// layer kinds each config field says, vLLM's grouping into equally many
// layers, the resolved page (a Mamba state raising the attention block), the
// single-group form, the pool on a memory size, and every config refused by name.
#include "kvtier/model/model_config.hpp"

#include <gtest/gtest.h>

#include "kvtier/core/errors.hpp"
#include "kvtier/model/model_presets.hpp"

namespace kvtier::model {
namespace {

TEST(ModelConfig, Llama31IsOneFullAttentionGroup) {
  const ModelDescription m = preset("llama-3.1-8b");
  ASSERT_EQ(m.groups.size(), 1U);
  EXPECT_EQ(m.groups[0].layers, 32U);
  EXPECT_EQ(m.groups[0].head_dim, 128U);
  const ModelGeometry g = m.geometry();
  EXPECT_EQ(g.page_bytes(), 32ULL * 16 * 8 * 128 * 2 * 2);
  EXPECT_FALSE(g.has_null_page());
}

TEST(ModelConfig, GptOssAlternatesSlidingAndFullAttention) {
  const ModelDescription m = preset("gpt-oss-120b");
  ASSERT_EQ(m.groups.size(), 2U);
  EXPECT_EQ(m.groups[0].kind, GroupKind::FullAttention);
  EXPECT_EQ(m.groups[1].kind, GroupKind::SlidingWindow);
  EXPECT_EQ(m.groups[1].sliding_window, 128U);
  EXPECT_EQ(m.groups[0].layers, 18U);
  EXPECT_EQ(m.layer_summary, "18 full_attention + 18 sliding_window");
  EXPECT_EQ(m.geometry().page_bytes(), 18ULL * 16 * 8 * 64 * 2 * 2);
  EXPECT_EQ(preset("gpt-oss-20b").groups[0].layers, 12U);
  // vLLM's --disable-hybrid-kv-cache-manager: one group of all 36 layers.
  const ModelDescription one = without_hybrid(m);
  ASSERT_EQ(one.groups.size(), 1U);
  EXPECT_EQ(one.groups[0].layers, 36U);
  EXPECT_EQ(one.geometry().page_bytes(), 2 * m.geometry().page_bytes());
}

TEST(ModelConfig, GroupsHoldTheFewestLayersAnyKindHas) {
  const ModelDescription gemma = preset("gemma-3-27b");  // 10 global, 52 sliding: groups of 10
  ASSERT_EQ(gemma.groups.size(), 7U);
  EXPECT_EQ(gemma.groups[0].kind, GroupKind::FullAttention);
  EXPECT_EQ(gemma.groups[6].kind, GroupKind::SlidingWindow);
  EXPECT_EQ(gemma.groups[6].layers, 10U);
  EXPECT_EQ(gemma.layer_summary, "10 full_attention + 52 sliding_window");
  const ModelDescription scout = preset("llama-4-scout");  // 12 NoPE global, 36 chunked (8192)
  ASSERT_EQ(scout.groups.size(), 4U);
  EXPECT_EQ(scout.groups[1].kind, GroupKind::ChunkedLocalAttention);
  EXPECT_EQ(scout.groups[1].attention_chunk_size, 8192U);
}

TEST(ModelConfig, AGatedDeltaNetStateRaisesTheAttentionBlock) {
  const ModelDescription m = preset("qwen3-next-80b-a3b");  // 12 full attention, 36 linear: groups of 12
  ASSERT_EQ(m.groups.size(), 4U);
  EXPECT_EQ(m.groups[1].kind, GroupKind::Mamba);
  // conv: 3 x (2 x 16 x 128 + 32 x 128); delta rule: 32 x 128 x 128; bf16.
  EXPECT_EQ(m.groups[1].state_bytes, (3ULL * (2 * 2048 + 4096) + 32ULL * 128 * 128) * 2);
  const ModelGeometry g = m.geometry();
  const std::uint64_t state_page = 12 * m.groups[1].state_bytes;
  const std::uint64_t token_bytes = 12ULL * 2 * 256 * 2 * 2;  // 12 layers, 2 KV heads of 256, K and V, bf16
  EXPECT_EQ(g.groups()[0].spec.block_size, (state_page + 16 * token_bytes - 1) / (16 * token_bytes) * 16);
  EXPECT_GE(g.page_bytes(), state_page);
  EXPECT_TRUE(g.groups()[1].padded());
  EXPECT_THROW(without_hybrid(m), ConfigError);
}

TEST(ModelConfig, EachLayerKnowsItsGroupAndItsPlaceInIt) {
  // gemma-3-27b: every 6th layer global (layers 5, 11, ...), 10 of them, so groups of 10.
  const ModelDescription gemma = preset("gemma-3-27b");
  ASSERT_EQ(gemma.layer_places.size(), 62U);
  EXPECT_EQ(gemma.layer_places[5], (LayerPlace{.group = 0, .index = 0}));
  EXPECT_EQ(gemma.layer_places[11], (LayerPlace{.group = 0, .index = 1}));
  EXPECT_EQ(gemma.layer_places[0], (LayerPlace{.group = 1, .index = 0}));
  EXPECT_EQ(gemma.layer_places[12], (LayerPlace{.group = 2, .index = 0}));  // the 11th sliding layer
  EXPECT_EQ(gemma.layer_places[61], (LayerPlace{.group = 6, .index = 1}));  // the 52nd
  // Nemotron-H's MLP layers keep nothing; one group form numbers the attention layers in order.
  const ModelDescription nemotron = preset("nemotron-h-8b");
  std::size_t none = 0;
  for (const auto& place : nemotron.layer_places) none += place ? 0 : 1;
  EXPECT_EQ(none, 24U);
  const ModelDescription one = without_hybrid(preset("gpt-oss-120b"));
  EXPECT_EQ(one.layer_places[1], (LayerPlace{.group = 0, .index = 1}));
  EXPECT_EQ(preset("deepseek-v3").layer_places[60], (LayerPlace{.group = 0, .index = 60}));
}

TEST(ModelConfig, Transformers5DtypeFieldIsRead) {
  const nlohmann::json config{{"num_hidden_layers", 2},
                              {"num_attention_heads", 4},
                              {"hidden_size", 64},
                              {"dtype", "float32"},
                              {"torch_dtype", "bfloat16"}};
  EXPECT_EQ(read_model_config(config, "tiny", "test").groups[0].dtype, KvDtype::Fp32);
}

TEST(ModelConfig, AKvCacheDtypeByNameSetsTheAttentionPagesAndKeepsTheStates) {
  const ModelDescription qwen = preset("qwen3-next-80b-a3b");  // bf16: make its pages fp32, then fp8
  const ModelDescription wide = with_kv_cache_dtype(qwen, "float32");
  EXPECT_EQ(wide.groups[0].dtype, KvDtype::Fp32);
  EXPECT_EQ(wide.groups[1].state_bytes, qwen.groups[1].state_bytes) << "a Mamba state keeps the model's dtype";
  EXPECT_EQ(with_kv_cache_dtype(qwen, "fp8_per_token_head").groups[0].quant, KvQuant::Fp8PerTokenHead);
  EXPECT_EQ(with_kv_cache_dtype(qwen, "auto").groups[0].dtype, KvDtype::Bf16);
  EXPECT_THROW(with_kv_cache_dtype(qwen, "int4"), ConfigError);
}

TEST(ModelConfig, ThePoolIsTheMemoryOverOnePage) {
  const ModelGeometry g = preset("gpt-oss-120b").geometry();
  EXPECT_EQ(pages_in(g, 8.0), 8ULL * 1073741824 / g.page_bytes());
  EXPECT_THROW(pages_in(g, 0.0), ConfigError);
  EXPECT_THROW(pages_in(g, -1.0), ConfigError);
}

TEST(ModelConfig, WhatCannotBeReadIsRefusedByName) {
  const auto refused = [](const nlohmann::json& config, const std::string& message) {
    try {
      read_model_config(config, "m", "test");
      ADD_FAILURE() << config.dump() << " was accepted";
    } catch (const ConfigError& error) {
      EXPECT_NE(std::string(error.what()).find(message), std::string::npos) << error.what();
    }
  };
  refused(nlohmann::json::array(), "JSON object");
  refused({{"num_attention_heads", 8}}, "num_hidden_layers");
  refused(
      {{"num_hidden_layers", 2}, {"num_attention_heads", 8}, {"hidden_size", 64}, {"layer_types", {"full_attention"}}},
      "one entry per layer");
  refused({{"num_hidden_layers", 1}, {"num_attention_heads", 8}, {"hidden_size", 64}, {"layer_types", {"cross"}}},
          "not a layer kind");
  refused({{"num_hidden_layers", 1}, {"num_attention_heads", 8}, {"hidden_size", 64}, {"torch_dtype", "int4"}},
          "torch_dtype");
  refused({{"num_hidden_layers", -3}, {"num_attention_heads", 8}}, "positive integer");
  refused(
      {{"num_hidden_layers", 3}, {"num_attention_heads", 8}, {"hidden_size", 64}, {"hybrid_override_pattern", "M*"}},
      "one character per layer");
  refused(
      {{"num_hidden_layers", 2}, {"num_attention_heads", 8}, {"hidden_size", 64}, {"hybrid_override_pattern", "MX"}},
      "not one of");
  EXPECT_THROW(preset("gpt-5"), ConfigError);
}

TEST(ModelConfig, DeepSeekV3IsOneMlaGroupOfLatentPages) {
  const ModelDescription m = preset("deepseek-v3");
  ASSERT_EQ(m.groups.size(), 1U);
  EXPECT_EQ(m.groups[0].kind, GroupKind::MlaAttention);
  EXPECT_EQ(m.groups[0].layers, 61U);
  EXPECT_EQ(m.max_model_len, 163840U);
  // 512 + 64 bf16 values a token a layer, no K/V factor of 2.
  EXPECT_EQ(m.geometry().page_bytes(), 61U * 16 * (512 + 64) * 2);
  // vLLM's fp8_ds_mla: 656 bytes a token.
  EXPECT_EQ(with_kv_cache_dtype(m, KvQuant::Fp8DsMla).geometry().page_bytes(), 61U * 16 * 656);
  EXPECT_THROW(with_kv_cache_dtype(m, KvQuant::Nvfp4), ConfigError);
  EXPECT_EQ(without_hybrid(m).groups[0].kind, GroupKind::MlaAttention);
}

TEST(ModelConfig, NemotronHGroupsItsMamba2StatesBesideAttention) {
  const ModelDescription m = preset("nemotron-h-8b");
  // 4 attention and 24 Mamba-2 layers (the 24 MLP layers keep nothing): groups of 4 layers.
  ASSERT_EQ(m.groups.size(), 7U);
  EXPECT_EQ(m.groups[0].kind, GroupKind::FullAttention);
  EXPECT_EQ(m.groups[0].layers, 4U);
  EXPECT_EQ(m.groups[0].head_dim, 128U);
  const GroupSpec& mamba = m.groups[1];
  EXPECT_EQ(mamba.kind, GroupKind::Mamba);
  // vLLM's mamba2_state_shape in bf16: conv (4 - 1) x (128 x 64 + 2 x 8 x 128), SSM 128 x 64 x 128.
  EXPECT_EQ(mamba.conv_state_bytes, 3U * (8192 + 2048) * 2);
  EXPECT_EQ(mamba.state_bytes, (3U * (8192 + 2048) + 128U * 64 * 128) * 2);
  EXPECT_THROW(without_hybrid(m), ConfigError);
}

TEST(ModelConfig, KvCacheDtypeQuantizesTheAttentionGroupsOnly) {
  const ModelDescription oss = with_kv_cache_dtype(preset("gpt-oss-120b"), KvQuant::Nvfp4);
  for (const GroupSpec& g : oss.groups) EXPECT_EQ(g.quant, KvQuant::Nvfp4);
  // 18 layers x 16 tokens x 8 heads x (32 + 4) bytes for K and again for V.
  EXPECT_EQ(oss.geometry().page_bytes(), 18U * 16 * 8 * 36 * 2);
  const ModelDescription qwen = with_kv_cache_dtype(preset("qwen3-next-80b-a3b"), KvQuant::Fp8PerTokenHead);
  EXPECT_EQ(qwen.groups[0].quant, KvQuant::Fp8PerTokenHead);
  EXPECT_EQ(qwen.groups[1].quant, KvQuant::None);  // the recurrent state keeps its dtype
  EXPECT_THROW(with_kv_cache_dtype(preset("llama-3.1-8b"), KvQuant::Fp8DsMla), ConfigError);
}

}  // namespace
}  // namespace kvtier::model
