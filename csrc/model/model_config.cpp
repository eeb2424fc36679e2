#include "kvtier/model/model_config.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <map>

#include "kvtier/core/errors.hpp"

namespace kvtier::model {
namespace {

enum class LayerKind : std::uint8_t { Full, Sliding, Chunked, Linear };
constexpr std::array<LayerKind, 4> kKindOrder{LayerKind::Full, LayerKind::Sliding, LayerKind::Chunked,
                                              LayerKind::Linear};

class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& config, std::string name) : c_(config), name_(std::move(name)) {}
  bool has(const char* field) const { return c_.contains(field) && !c_.at(field).is_null(); }
  std::uint32_t u32(const char* field) const {
    if (!has(field) || !c_.at(field).is_number_integer() || c_.at(field).get<std::int64_t>() <= 0 ||
        c_.at(field).get<std::int64_t>() > 0xFFFFFFFFLL) {
      fail(std::string("field '") + field + "' must be a positive integer");
    }
    return c_.at(field).get<std::uint32_t>();
  }
  std::uint32_t u32_or(const char* field, std::uint32_t fallback) const { return has(field) ? u32(field) : fallback; }
  const nlohmann::json& list(const char* field, std::size_t size) const {
    if (!has(field) || !c_.at(field).is_array() || c_.at(field).size() != size) {
      fail(std::string("field '") + field + "' must list one entry per layer (" + std::to_string(size) + ")");
    }
    return c_.at(field);
  }
  [[noreturn]] void fail(const std::string& message) const { throw ConfigError(name_ + ": " + message); }

 private:
  const nlohmann::json& c_;
  std::string name_;
};

LayerKind kind_named(const ConfigReader& r, const nlohmann::json& value) {
  static const std::map<std::string, LayerKind> kNames{{"full_attention", LayerKind::Full},
                                                       {"sliding_attention", LayerKind::Sliding},
                                                       {"chunked_attention", LayerKind::Chunked},
                                                       {"linear_attention", LayerKind::Linear}};
  const auto it = value.is_string() ? kNames.find(value.get<std::string>()) : kNames.end();
  if (it == kNames.end()) r.fail("layer_types holds " + value.dump() + ", not a layer kind kvtier knows");
  return it->second;
}

/// Each layer's kind, from whichever of the fields the model's config uses.
std::vector<LayerKind> layer_kinds(const ConfigReader& r, const nlohmann::json& c, std::uint32_t layers) {
  std::vector<LayerKind> kinds(layers, LayerKind::Full);
  if (r.has("layer_types")) {
    const auto& types = r.list("layer_types", layers);
    for (std::uint32_t i = 0; i < layers; ++i) kinds[i] = kind_named(r, types[i]);
  } else if (r.has("full_attention_interval")) {  // Qwen3-Next: every n-th layer attends, the rest are linear
    const std::uint32_t interval = r.u32("full_attention_interval");
    for (std::uint32_t i = 0; i < layers; ++i) kinds[i] = (i + 1) % interval == 0 ? LayerKind::Full : LayerKind::Linear;
  } else if (r.has("no_rope_layers") && r.has("attention_chunk_size")) {  // Llama 4: NoPE layers are global
    const auto& rope = r.list("no_rope_layers", layers);
    for (std::uint32_t i = 0; i < layers; ++i) {
      kinds[i] = rope[i].is_number() && rope[i].get<double>() != 0 ? LayerKind::Chunked : LayerKind::Full;
    }
  } else if (r.has("sliding_window") && r.has("sliding_window_pattern")) {  // Gemma 3: every n-th layer is global
    const std::uint32_t pattern = r.u32("sliding_window_pattern");
    for (std::uint32_t i = 0; i < layers; ++i) kinds[i] = (i + 1) % pattern == 0 ? LayerKind::Full : LayerKind::Sliding;
  } else if (r.has("sliding_window") && c.value("use_sliding_window", true)) {
    std::fill(kinds.begin(), kinds.end(), LayerKind::Sliding);
  }
  return kinds;
}

KvDtype dtype_of(const ConfigReader& r, const nlohmann::json& top, const nlohmann::json& c) {
  const std::string name = c.value("torch_dtype", top.value("torch_dtype", std::string("bfloat16")));
  if (name == "bfloat16") return KvDtype::Bf16;
  if (name == "float16") return KvDtype::Fp16;
  if (name == "float32") return KvDtype::Fp32;
  r.fail("torch_dtype '" + name + "' is not bfloat16, float16 or float32");
}

const char* describe(LayerKind kind) {
  switch (kind) {
    case LayerKind::Full:
      return "full_attention";
    case LayerKind::Sliding:
      return "sliding_window";
    case LayerKind::Chunked:
      return "chunked_local_attention";
    case LayerKind::Linear:
      return "mamba";
  }
  return "?";
}

}  // namespace

ModelDescription read_model_config(const nlohmann::json& config, const std::string& name, const std::string& source) {
  if (!config.is_object()) throw ConfigError(name + ": a config.json must be a JSON object");
  const nlohmann::json& c =
      config.contains("text_config") && config.at("text_config").is_object() ? config.at("text_config") : config;
  const ConfigReader r(c, name);
  if (r.has("kv_lora_rank")) {
    r.fail("an MLA model (kv_lora_rank): its latent page format comes with part 2 of model geometry");
  }
  ModelDescription m{.name = name, .source = source, .layers = r.u32("num_hidden_layers")};
  const std::uint32_t heads = r.u32("num_attention_heads");
  const std::uint32_t kv_heads = r.u32_or("num_key_value_heads", heads);
  const std::uint32_t head_dim = r.has("head_dim") ? r.u32("head_dim") : r.u32("hidden_size") / heads;
  const KvDtype dtype = dtype_of(r, config, c);
  m.max_model_len = r.u32_or("max_position_embeddings", 0);
  const std::vector<LayerKind> kinds = layer_kinds(r, c, m.layers);

  std::map<LayerKind, std::uint32_t> count;
  for (const LayerKind kind : kinds) ++count[kind];
  // vLLM's grouping: groups of the fewest layers any kind has.
  std::uint32_t group_size = m.layers;
  for (const auto& [kind, n] : count) group_size = std::min(group_size, n);
  for (const LayerKind kind : kKindOrder) {
    if (!count.contains(kind)) continue;
    GroupSpec g{.layers = group_size};
    switch (kind) {
      case LayerKind::Full:
        g.kind = GroupKind::FullAttention;
        break;
      case LayerKind::Sliding:
        g.kind = GroupKind::SlidingWindow;
        g.sliding_window = r.u32("sliding_window");
        break;
      case LayerKind::Chunked:
        g.kind = GroupKind::ChunkedLocalAttention;
        g.attention_chunk_size = r.u32("attention_chunk_size");
        break;
      case LayerKind::Linear: {
        // A Gated DeltaNet layer's state (vLLM's gated_delta_net_state_shape):
        // the causal conv's last kernel-1 inputs and the delta rule's matrix per value head.
        g.kind = GroupKind::Mamba;
        g.mamba_mode = MambaMode::Align;
        const std::uint64_t key_dim = std::uint64_t{r.u32("linear_num_key_heads")} * r.u32("linear_key_head_dim");
        const std::uint64_t value_heads = r.u32("linear_num_value_heads");
        const std::uint64_t value_dim = value_heads * r.u32("linear_value_head_dim");
        const std::uint64_t conv = (r.u32("linear_conv_kernel_dim") - 1ULL) * (2 * key_dim + value_dim);
        const std::uint64_t delta = value_heads * r.u32("linear_key_head_dim") * r.u32("linear_value_head_dim");
        g.state_bytes = (conv + delta) * dtype_bytes(dtype);
        break;
      }
    }
    if (kind != LayerKind::Linear) {
      g.kv_heads = kv_heads;
      g.head_dim = head_dim;
      g.dtype = dtype;
    }
    const std::uint32_t groups = (count[kind] + group_size - 1) / group_size;
    for (std::uint32_t i = 0; i < groups; ++i) m.groups.push_back(g);
    if (!m.layer_summary.empty()) m.layer_summary += " + ";
    m.layer_summary += std::to_string(count[kind]) + " " + describe(kind);
  }
  return m;
}

ModelDescription load_model_config(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("cannot read the model config " + path.string());
  const nlohmann::json config = nlohmann::json::parse(in, nullptr, false);
  if (config.is_discarded()) throw ConfigError(path.string() + " is not valid JSON");
  return read_model_config(config, path.filename().string(), path.string());
}

ModelGeometry ModelDescription::geometry() const { return ModelGeometry::resolve(groups, 16, false); }

ModelDescription without_hybrid(const ModelDescription& model) {
  ModelDescription one = model;
  one.groups.clear();
  for (const GroupSpec& g : model.groups) {
    if (g.kind == GroupKind::Mamba) {
      throw ConfigError(model.name + " keeps a recurrent state in some layers: it has no single-group form");
    }
  }
  GroupSpec full = model.groups.front();
  full.kind = GroupKind::FullAttention;
  full.sliding_window = 0;
  full.attention_chunk_size = 0;
  full.layers = model.layers;
  one.groups.push_back(full);
  one.layer_summary = std::to_string(model.layers) + " full_attention (--no-hybrid)";
  return one;
}

std::uint64_t pages_in(const ModelGeometry& geometry, double gib) {
  if (!(gib > 0) || !std::isfinite(gib)) throw ConfigError("the KV cache memory must be a positive number of GiB");
  return static_cast<std::uint64_t>(std::floor(gib * 1073741824.0 / static_cast<double>(geometry.page_bytes())));
}

}  // namespace kvtier::model
