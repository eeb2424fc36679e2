#include "kvtier/model/group_specs.hpp"

#include <string>

#include "kvtier/core/errors.hpp"

namespace kvtier::model {
namespace {

/// One group object's fields, each checked for its type; errors name the group.
class GroupFields {
 public:
  GroupFields(const nlohmann::json& object, std::string where) : o_(object), where_(std::move(where)) {}
  bool has(const char* name) const { return o_.contains(name) && !o_.at(name).is_null(); }
  [[noreturn]] void fail(const std::string& message) const { throw ConfigError(where_ + message); }
  std::uint64_t u64(const char* name, std::uint64_t limit) const {
    if (!has(name)) fail(std::string("field '") + name + "' is missing");
    const nlohmann::json& v = o_.at(name);
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::uint64_t>() > limit) {
      fail(std::string("field '") + name + "' must be a non-negative integer of at most " + std::to_string(limit));
    }
    return v.get<std::uint64_t>();
  }
  std::uint32_t u32_or(const char* name, std::uint32_t fallback) const {
    return has(name) ? static_cast<std::uint32_t>(u64(name, 0xFFFFFFFFULL)) : fallback;
  }
  std::string string_or(const char* name, const std::string& fallback) const {
    if (!has(name)) return fallback;
    if (!o_.at(name).is_string()) fail(std::string("field '") + name + "' must be a string");
    return o_.at(name).get<std::string>();
  }
  const nlohmann::json& object() const { return o_; }
  KvQuant quant_named(const std::string& name) const {
    try {
      return parse_kv_quant(name);
    } catch (const ConfigError& error) {
      fail(error.what());
    }
  }

 private:
  const nlohmann::json& o_;
  std::string where_;
};

GroupSpec parse_group(const nlohmann::json& object, std::size_t index, const KvGeometry& manager_layout) {
  const std::string where = "group " + std::to_string(index) + ": ";
  if (!object.is_object()) throw ConfigError(where + "must be an object");
  const GroupFields f(object, where);
  GroupSpec g;
  try {
    if (!f.has("kind")) f.fail("field 'kind' is missing");
    g.kind = parse_group_kind(f.string_or("kind", ""));
    g.mamba_mode = parse_mamba_mode(f.string_or("mamba_mode", "none"));
  } catch (const ConfigError& error) {
    const std::string message = error.what();
    if (message.rfind(where, 0) == 0) throw;
    f.fail(message);
  }
  g.layers = f.u32_or("layers", 1);
  g.block_size = f.u32_or("block_size", 0);
  g.sliding_window = f.u32_or("sliding_window", 0);
  g.attention_chunk_size = f.u32_or("attention_chunk_size", 0);
  if (g.kind != GroupKind::Mamba && f.has("mamba_mode")) f.fail("mamba_mode is for mamba groups");
  const nlohmann::json empty = nlohmann::json::object();
  const nlohmann::json& given = f.has("layout") ? object.at("layout") : empty;
  if (!given.is_object()) f.fail("field 'layout' must be an object");
  const GroupFields layout(given, where + "layout: ");
  if (holds_key_and_value(g.kind)) {
    g.kv_heads = layout.u32_or("kv_heads", manager_layout.kv_heads);
    g.head_dim = layout.u32_or("head_dim", manager_layout.head_dim);
    g.head_dim_v = layout.u32_or("head_dim_v", 0);
    g.dtype = parse_dtype(layout.string_or("dtype", dtype_name(manager_layout.dtype)));
    g.quant = layout.quant_named(layout.string_or("quant", "none"));
  } else if (g.kind == GroupKind::Mamba) {
    g.state_bytes = layout.u64("state_bytes", std::uint64_t{1} << 40);
    g.conv_state_bytes = layout.has("conv_state_bytes") ? layout.u64("conv_state_bytes", g.state_bytes) : 0;
  } else {
    g.latent_dim = static_cast<std::uint32_t>(layout.u64("latent_dim", 0xFFFFFFFFULL));
    g.rope_dim = layout.u32_or("rope_dim", 0);
    g.dtype = parse_dtype(layout.string_or("dtype", "bf16"));
    // MLA names its format: plain (the dtype), fp8 (per tensor) or fp8_ds_mla.
    const std::string format = layout.string_or("format", "plain");
    g.quant = format == "plain" ? KvQuant::None : layout.quant_named(format);
  }
  return g;
}

}  // namespace

std::vector<GroupSpec> parse_group_specs(const nlohmann::json& list, const KvGeometry& manager_layout) {
  if (!list.is_array() || list.empty()) throw ConfigError("groups must be a non-empty list of objects");
  std::vector<GroupSpec> groups;
  for (std::size_t i = 0; i < list.size(); ++i) groups.push_back(parse_group(list[i], i, manager_layout));
  return groups;
}

void describe_groups(const ModelGeometry& geometry, nlohmann::ordered_json& out) {
  nlohmann::ordered_json groups = nlohmann::ordered_json::array();
  for (const ResolvedGroup& group : geometry.groups()) {
    groups.push_back({{"kind", group_kind_name(group.spec.kind)},
                      {"block_size", group.spec.block_size},
                      {"page_bytes", group.page_bytes},
                      {"padded_page_bytes", group.padded_page_bytes}});
  }
  out["groups"] = std::move(groups);
  out["scheduler_block_size"] = geometry.scheduler_block_size();
  out["hash_block_size"] = geometry.hash_block_size();
}

}  // namespace kvtier::model
