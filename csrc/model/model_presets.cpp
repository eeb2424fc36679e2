#include "kvtier/model/model_presets.hpp"

#include <functional>
#include <map>

#include "kvtier/core/errors.hpp"

namespace kvtier::model {
namespace {

using Json = nlohmann::json;

/// `layers` entries: `every`-th layer (1-based) `special`, the others `usual`.
Json every_nth(std::uint32_t layers, std::uint32_t every, const Json& special, const Json& usual) {
  Json out = Json::array();
  for (std::uint32_t i = 0; i < layers; ++i) out.push_back((i + 1) % every == 0 ? special : usual);
  return out;
}

Json gpt_oss(std::uint32_t layers) {
  // layer_types alternates, sliding first, as the published config lists it.
  return {{"num_hidden_layers", layers}, {"num_attention_heads", 64},
          {"num_key_value_heads", 8},    {"head_dim", 64},
          {"sliding_window", 128},       {"max_position_embeddings", 131072},
          {"torch_dtype", "bfloat16"},   {"layer_types", every_nth(layers, 2, "full_attention", "sliding_attention")}};
}

struct Preset {
  const char* source;
  std::function<Json()> config;
};

/// The config.json fields that decide each model's KV cache (docs/models.md cites them).
const std::map<std::string, Preset>& presets() {
  static const std::map<std::string, Preset> kPresets{
      {"llama-3.1-8b",
       {"huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json",
        [] {
          return Json{{"num_hidden_layers", 32}, {"num_attention_heads", 32},         {"num_key_value_heads", 8},
                      {"hidden_size", 4096},     {"max_position_embeddings", 131072}, {"torch_dtype", "bfloat16"}};
        }}},
      {"gpt-oss-20b", {"huggingface.co/openai/gpt-oss-20b/blob/main/config.json", [] { return gpt_oss(24); }}},
      {"gpt-oss-120b", {"huggingface.co/openai/gpt-oss-120b/blob/main/config.json", [] { return gpt_oss(36); }}},
      {"gemma-3-27b",
       {"huggingface.co/google/gemma-3-27b-it/blob/main/config.json (text_config)",
        [] {
          return Json{{"torch_dtype", "bfloat16"},
                      {"text_config",
                       {{"num_hidden_layers", 62},
                        {"num_attention_heads", 32},
                        {"num_key_value_heads", 16},
                        {"head_dim", 128},
                        {"sliding_window", 1024},
                        {"sliding_window_pattern", 6},
                        {"max_position_embeddings", 131072}}}};
        }}},
      {"llama-4-scout",
       {"huggingface.co/meta-llama/Llama-4-Scout-17B-16E/blob/main/config.json (text_config; no_rope_layers as "
        "transformers' Llama4TextConfig derives it: every 4th layer NoPE)",
        [] {
          return Json{{"torch_dtype", "bfloat16"},
                      {"text_config",
                       {{"num_hidden_layers", 48},
                        {"num_attention_heads", 40},
                        {"num_key_value_heads", 8},
                        {"head_dim", 128},
                        {"attention_chunk_size", 8192},
                        {"max_position_embeddings", 10485760},
                        {"no_rope_layers", every_nth(48, 4, 0, 1)}}}};
        }}},
      {"qwen3-next-80b-a3b",
       {"huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct/blob/main/config.json",
        [] {
          return Json{{"num_hidden_layers", 48},           {"num_attention_heads", 16},
                      {"num_key_value_heads", 2},          {"head_dim", 256},
                      {"full_attention_interval", 4},      {"linear_conv_kernel_dim", 4},
                      {"linear_key_head_dim", 128},        {"linear_num_key_heads", 16},
                      {"linear_num_value_heads", 32},      {"linear_value_head_dim", 128},
                      {"max_position_embeddings", 262144}, {"torch_dtype", "bfloat16"}};
        }}},
      {"deepseek-v3",
       {"huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json",
        [] {
          return Json{{"num_hidden_layers", 61}, {"num_attention_heads", 128},        {"kv_lora_rank", 512},
                      {"qk_rope_head_dim", 64},  {"max_position_embeddings", 163840}, {"torch_dtype", "bfloat16"}};
        }}},
      {"nemotron-h-8b",
       {"huggingface.co/nvidia/Nemotron-H-8B-Base-8K/blob/main/config.json",
        [] {
          return Json{{"num_hidden_layers", 52},
                      {"num_attention_heads", 32},
                      {"num_key_value_heads", 8},
                      {"attention_head_dim", 128},
                      {"hybrid_override_pattern", "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"},
                      {"mamba_num_heads", 128},
                      {"mamba_head_dim", 64},
                      {"n_groups", 8},
                      {"ssm_state_size", 128},
                      {"conv_kernel", 4},
                      {"max_position_embeddings", 8192},
                      {"torch_dtype", "bfloat16"}};
        }}},
  };
  return kPresets;
}

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& [name, preset] : presets()) names.push_back(name);
  return names;
}

ModelDescription preset(const std::string& name) {
  const auto it = presets().find(name);
  if (it == presets().end()) {
    std::string known;
    for (const auto& [n, p] : presets()) known += (known.empty() ? "" : ", ") + n;
    throw ConfigError("no model preset '" + name + "' (presets: " + known + "; or --model-config FILE)");
  }
  return read_model_config(it->second.config(), name, it->second.source);
}

}  // namespace kvtier::model
