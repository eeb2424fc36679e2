#include "script_groups.hpp"

#include <string>

namespace kvtier::script {
namespace {

GroupSpec parse_group(const Fields& f, std::size_t index, const KvGeometry& manager_layout) {
  const std::string where = "group " + std::to_string(index) + ": ";
  GroupSpec g;
  try {
    g.kind = parse_group_kind(f.string("kind"));
    g.mamba_mode = parse_mamba_mode(f.string_or("mamba_mode", "none"));
  } catch (const ConfigError& error) {
    f.fail(where + error.what());
  }
  g.layers = f.u32_or("layers", 1);
  g.block_size = f.u32_or("block_size", 0);
  g.sliding_window = f.u32_or("sliding_window", 0);
  g.attention_chunk_size = f.u32_or("attention_chunk_size", 0);
  if (g.kind != GroupKind::Mamba && f.has("mamba_mode")) f.fail(where + "mamba_mode is for mamba groups");
  const nlohmann::json empty = nlohmann::json::object();
  const nlohmann::json& given = f.has("layout") ? f.raw("layout") : empty;
  if (!given.is_object()) f.fail(where + "field 'layout' must be an object");
  const Fields layout(given, f.line());
  if (holds_key_and_value(g.kind)) {
    g.kv_heads = layout.u32_or("kv_heads", manager_layout.kv_heads);
    g.head_dim = layout.u32_or("head_dim", manager_layout.head_dim);
    g.head_dim_v = layout.u32_or("head_dim_v", 0);
    g.dtype = parse_dtype(layout.string_or("dtype", dtype_name(manager_layout.dtype)));
    if (layout.string_or("quant", "none") != "none") {
      f.fail(where + "quantized K/V pages (quant) come with MLA and quantized page formats (not yet)");
    }
  } else if (g.kind == GroupKind::Mamba) {
    g.state_bytes = layout.u64("state_bytes");
  } else {
    g.latent_dim = layout.u32("latent_dim");
    g.rope_dim = layout.u32_or("rope_dim", 0);
    g.dtype = parse_dtype(layout.string_or("dtype", "bf16"));
    if (layout.string_or("format", "plain") != "plain") {
      f.fail(where + "MLA page formats other than plain (format) come with part 2 of model geometry (not yet)");
    }
  }
  return g;
}

}  // namespace

std::vector<GroupSpec> parse_groups(const Fields& init, const KvGeometry& manager_layout) {
  const nlohmann::json& list = init.raw("groups");
  if (!list.is_array() || list.empty()) init.fail("field 'groups' must be a non-empty list of objects");
  std::vector<GroupSpec> groups;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_object()) init.fail("group " + std::to_string(i) + " must be an object");
    groups.push_back(parse_group(Fields(list[i], init.line()), i, manager_layout));
  }
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

}  // namespace kvtier::script
