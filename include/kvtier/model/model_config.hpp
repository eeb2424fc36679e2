#pragma once
// A real model's KV cache geometry, read from its Hugging Face `config.json`
// (or a preset of one: model_presets.hpp) and grouped as vLLM's hybrid
// allocator groups layers (docs/spec/model-geometry.md §1-2): every
// layer's kind (full attention, sliding window, chunked local, linear
// attention / Mamba state), then groups of equally many layers — the fewest
// layers any kind has — so every group's page holds the same number of layers.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvtier/core/model_geometry.hpp"

namespace kvtier::model {

/// Where one of the model's layers keeps its cache: its group and its place
/// among the group's layers (a layer without a KV cache has none).
struct LayerPlace {
  std::uint32_t group = 0;
  std::uint32_t index = 0;
  bool operator==(const LayerPlace&) const = default;
};

struct ModelDescription {
  std::string name{};
  std::string source{};  // where the numbers come from (the config.json it was read from)
  std::uint32_t layers = 0;
  std::vector<GroupSpec> groups{};
  /// One entry per model layer, in the model's order: vLLM's grouping puts a
  /// kind's layers, in model order, into its groups `group size` at a time.
  std::vector<std::optional<LayerPlace>> layer_places{};
  /// Group kinds and how many layers of each, e.g. "18 full_attention + 18 sliding_window(128)".
  std::string layer_summary{};
  /// `max_position_embeddings`: the longest request the model serves (vLLM's
  /// default max_model_len); 0 when the config does not say.
  std::uint64_t max_model_len = 0;
  /// The resolved pool at vLLM's default block size (16), the attention block
  /// raised to cover a Mamba state as vLLM does.
  ModelGeometry geometry() const;
};

/// Reads a Hugging Face config.json (a nested `text_config` is the text
/// model's): `num_hidden_layers`, `num_key_value_heads`, `head_dim` (else
/// `hidden_size / num_attention_heads`), `dtype` (transformers 5; `torch_dtype` before), `max_position_embeddings`, and
/// the per-layer kinds from `layer_types`, `sliding_window_pattern`, `no_rope_layers` with `attention_chunk_size`, or
/// `full_attention_interval` with the `linear_*` fields of a Gated DeltaNet, or `hybrid_override_pattern` with the
/// `mamba_*` fields of Mamba-2 layers (Nemotron-H); an MLA model (`kv_lora_rank`, `qk_rope_head_dim`) is one
/// mla_attention group. ConfigError naming the field for anything it cannot read.
ModelDescription read_model_config(const nlohmann::json& config, const std::string& name, const std::string& source);
ModelDescription load_model_config(const std::filesystem::path& path);

/// vLLM's --disable-hybrid-kv-cache-manager: every attention layer in one
/// full-attention (or MLA) group, a sliding window kept whole. ConfigError for
/// a model with a recurrent state, which has no such form.
ModelDescription without_hybrid(const ModelDescription& model);

/// vLLM's --kv-cache-dtype: every attention group's pages in `quant` (a
/// Mamba state keeps its dtype). ConfigError when a group cannot hold it
/// (fp8_ds_mla on K/V, per-token-head or nvfp4 on an MLA latent, nvfp4 with
/// a head size that is not a multiple of 16).
ModelDescription with_kv_cache_dtype(const ModelDescription& model, KvQuant quant);
/// vLLM's --kv-cache-dtype by name: "auto" (the model's dtype), "bfloat16",
/// "float16" or "float32" (every attention group's pages in that dtype; a
/// Mamba state keeps the model's, as vLLM's separate mamba_ssm_cache_dtype
/// does by default), or a quantization kv_quant_name() names.
ModelDescription with_kv_cache_dtype(const ModelDescription& model, std::string_view name);

/// Pages of `geometry` in `gib` GiB of KV cache memory, as vLLM sizes its
/// pool: bytes available / bytes of one page (every group shares the page).
std::uint64_t pages_in(const ModelGeometry& geometry, double gib);

}  // namespace kvtier::model
