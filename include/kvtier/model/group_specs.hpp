#pragma once
// KV cache groups as JSON (docs/spec/model-geometry.md §7, field names
// fixed): what a script's `init.groups` and Python's `Manager(groups=...)`
// take, and the resolved groups as they answer with them.
#include <nlohmann/json.hpp>
#include <vector>

#include "kvtier/core/kv_layout.hpp"
#include "kvtier/core/model_geometry.hpp"

namespace kvtier::model {

/// A non-empty list of `{"kind", "layers" (1), "block_size" (0: the
/// manager's), "sliding_window", "attention_chunk_size", "mamba_mode"
/// ("none"), "layout"}`; a K/V group's layout fields default to
/// `manager_layout`'s; `quant` (K/V) and `format` (MLA) name the page format
/// (docs/page-formats.md). ConfigError naming the group and the field otherwise.
std::vector<GroupSpec> parse_group_specs(const nlohmann::json& list, const KvGeometry& manager_layout);

/// `groups` ({"kind", "block_size", "page_bytes", "padded_page_bytes"} each),
/// `scheduler_block_size` and `hash_block_size`, added to `out`.
void describe_groups(const ModelGeometry& geometry, nlohmann::ordered_json& out);

}  // namespace kvtier::model
