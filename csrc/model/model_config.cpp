#include "kvtier/model/model_config.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>

#include "kvtier/core/errors.hpp"

namespace kvtier::model {
namespace {

// Linear: a Gated DeltaNet state (Qwen3-Next); Mamba2: a Mamba-2 state (Nemotron-H); NoCache: an MLP or MoE layer.
enum class LayerKind : std::uint8_t { Full, Sliding, Chunked, Linear, Mamba2, NoCache };
constexpr std::array<LayerKind, 5> kKindOrder{LayerKind::Full, LayerKind::Sliding, LayerKind::Chunked,
                                              LayerKind::Linear, LayerKind::Mamba2};

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
  if (r.has("hybrid_override_pattern")) {  // Nemotron-H: M Mamba-2, * attention, - MLP, E MoE
    const nlohmann::json& pattern = c.at("hybrid_override_pattern");
    if (!pattern.is_string() || pattern.get<std::string>().size() != layers) {
      r.fail("hybrid_override_pattern must be a string of one character per layer (" + std::to_string(layers) + ")");
    }
    for (std::uint32_t i = 0; i < layers; ++i) {
      const char k = pattern.get<std::string>()[i];
      if (k != 'M' && k != '*' && k != '-' && k != 'E') {
        r.fail(std::string("hybrid_override_pattern holds '") + k + "', not one of M * - E");
      }
      kinds[i] = k == 'M' ? LayerKind::Mamba2 : (k == '*' ? LayerKind::Full : LayerKind::NoCache);
    }
  } else if (r.has("layer_types")) {
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
  // transformers 5 writes `dtype`; earlier versions `torch_dtype`.
  const auto field = [&](const char* key) -> std::optional<std::string> {
    for (const nlohmann::json* j : {&c, &top}) {
      if (j->contains(key) && j->at(key).is_string()) return j->at(key).get<std::string>();
    }
    return std::nullopt;
  };
  const char* key = field("dtype") ? "dtype" : "torch_dtype";
  const std::string name = field(key).value_or("bfloat16");
  if (name == "bfloat16") return KvDtype::Bf16;
  if (name == "float16") return KvDtype::Fp16;
  if (name == "float32") return KvDtype::Fp32;
  r.fail(std::string(key) + " '" + name + "' is not bfloat16, float16 or float32");
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
      return "mamba (gated delta net)";
    case LayerKind::Mamba2:
      return "mamba (mamba2)";
    case LayerKind::NoCache:
      return "without KV cache";
  }
  return "?";
}

/// DeepSeek V2/V3, Kimi K2: every layer caches one MLA latent (kv_lora_rank)
/// and its RoPE key part (qk_rope_head_dim) a token: one mla_attention group.
ModelDescription read_mla_config(const ConfigReader& r, const nlohmann::json& top, const nlohmann::json& c,
                                 ModelDescription m) {
  m.max_model_len = r.u32_or("max_position_embeddings", 0);
  m.groups.push_back(GroupSpec{.kind = GroupKind::MlaAttention,
                               .layers = m.layers,
                               .dtype = dtype_of(r, top, c),
                               .latent_dim = r.u32("kv_lora_rank"),
                               .rope_dim = r.u32_or("qk_rope_head_dim", 0)});
  m.layer_summary = std::to_string(m.layers) + " mla_attention";
  for (std::uint32_t i = 0; i < m.layers; ++i) m.layer_places.push_back(LayerPlace{.group = 0, .index = i});
  return m;
}

}  // namespace

ModelDescription read_model_config(const nlohmann::json& config, const std::string& name, const std::string& source) {
  if (!config.is_object()) throw ConfigError(name + ": a config.json must be a JSON object");
  const nlohmann::json& c =
      config.contains("text_config") && config.at("text_config").is_object() ? config.at("text_config") : config;
  const ConfigReader r(c, name);
  ModelDescription m{.name = name, .source = source, .layers = r.u32("num_hidden_layers")};
  if (r.has("kv_lora_rank")) return read_mla_config(r, config, c, std::move(m));
  const std::uint32_t heads = r.u32("num_attention_heads");
  const std::uint32_t kv_heads = r.u32_or("num_key_value_heads", heads);
  const std::uint32_t head_dim = r.has("head_dim")             ? r.u32("head_dim")
                                 : r.has("attention_head_dim") ? r.u32("attention_head_dim")  // Nemotron-H
                                                               : r.u32("hidden_size") / heads;
  const KvDtype dtype = dtype_of(r, config, c);
  m.max_model_len = r.u32_or("max_position_embeddings", 0);
  const std::vector<LayerKind> kinds = layer_kinds(r, c, m.layers);

  std::map<LayerKind, std::uint32_t> count;
  for (const LayerKind kind : kinds) {
    if (kind != LayerKind::NoCache) ++count[kind];
  }
  if (count.empty()) r.fail("no layer keeps a KV cache");
  // vLLM's grouping: groups of the fewest layers any kind has.
  std::uint32_t group_size = 0xFFFFFFFFU;
  for (const auto& [kind, n] : count) group_size = std::min(group_size, n);
  m.layer_places.resize(m.layers);
  for (const LayerKind kind : kKindOrder) {
    if (!count.contains(kind)) continue;
    const auto first_group = static_cast<std::uint32_t>(m.groups.size());
    std::uint32_t seen = 0;
    for (std::uint32_t layer = 0; layer < m.layers; ++layer) {
      if (kinds[layer] != kind) continue;
      m.layer_places[layer] = LayerPlace{.group = first_group + seen / group_size, .index = seen % group_size};
      ++seen;
    }
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
        g.conv_state_bytes = conv * dtype_bytes(dtype);
        break;
      }
      case LayerKind::Mamba2: {
        // vLLM's mamba2_state_shape: the conv's last kernel-1 inputs over the
        // inner width and both B and C of every group, and an SSM state per head.
        g.kind = GroupKind::Mamba;
        g.mamba_mode = MambaMode::Align;
        const std::uint64_t inner = std::uint64_t{r.u32("mamba_num_heads")} * r.u32("mamba_head_dim");
        const std::uint64_t conv =
            (r.u32("conv_kernel") - 1ULL) * (inner + 2ULL * r.u32("n_groups") * r.u32("ssm_state_size"));
        const std::uint64_t ssm = inner * r.u32("ssm_state_size");
        g.state_bytes = (conv + ssm) * dtype_bytes(dtype);
        g.conv_state_bytes = conv * dtype_bytes(dtype);
        break;
      }
      case LayerKind::NoCache:
        break;
    }
    if (kind != LayerKind::Linear && kind != LayerKind::Mamba2) {
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
  const bool mla = full.kind == GroupKind::MlaAttention || full.kind == GroupKind::SlidingWindowMla;
  full.kind = mla ? GroupKind::MlaAttention : GroupKind::FullAttention;
  full.sliding_window = 0;
  full.attention_chunk_size = 0;
  full.layers = 0;
  for (std::optional<LayerPlace>& place : one.layer_places) {
    if (place) place = LayerPlace{.group = 0, .index = full.layers++};
  }
  one.groups.push_back(full);
  one.layer_summary = std::to_string(model.layers) + " " + group_kind_name(full.kind) + " (--no-hybrid)";
  return one;
}

ModelDescription with_kv_cache_dtype(const ModelDescription& model, KvQuant quant) {
  ModelDescription out = model;
  for (std::size_t i = 0; i < out.groups.size(); ++i) {
    GroupSpec& g = out.groups[i];
    if (g.kind == GroupKind::Mamba) continue;  // a recurrent state keeps its own dtype
    g.quant = quant;
    try {
      validate_page_format(g.format_at(16), "");
    } catch (const ConfigError& error) {
      throw ConfigError(model.name + ": --kv-cache-dtype " + kv_quant_name(quant) + " does not fit group " +
                        std::to_string(i) + " (" + group_kind_name(g.kind) + "): " + error.what());
    }
  }
  if (quant != KvQuant::None) out.layer_summary += std::string(", KV cache ") + kv_quant_name(quant);
  return out;
}

ModelDescription with_kv_cache_dtype(const ModelDescription& model, std::string_view name) {
  if (name == "auto") return model;
  static const std::map<std::string_view, KvDtype> kDtypes{
      {"bfloat16", KvDtype::Bf16}, {"float16", KvDtype::Fp16}, {"float32", KvDtype::Fp32}};
  const auto dtype = kDtypes.find(name);
  if (dtype == kDtypes.end()) return with_kv_cache_dtype(model, parse_kv_quant(name));
  ModelDescription out = model;
  for (GroupSpec& g : out.groups) {
    if (g.kind != GroupKind::Mamba) g.dtype = dtype->second;
  }
  out.layer_summary += ", KV cache " + std::string(name);
  return out;
}

std::uint64_t pages_in(const ModelGeometry& geometry, double gib) {
  if (!(gib > 0) || !std::isfinite(gib)) throw ConfigError("the KV cache memory must be a positive number of GiB");
  return static_cast<std::uint64_t>(std::floor(gib * 1073741824.0 / static_cast<double>(geometry.page_bytes())));
}

}  // namespace kvtier::model
