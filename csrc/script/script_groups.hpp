#pragma once
// The `groups` of a script's `init` (../shared/spec/model-geometry.md section
// 7, field names fixed): KV cache groups read from JSON, and the answer that
// shows how they were resolved into one pool.
#include <nlohmann/json.hpp>
#include <vector>

#include "kvtier/core/kv_layout.hpp"
#include "kvtier/core/model_geometry.hpp"
#include "script_fields.hpp"

namespace kvtier::script {

/// The `groups` list of `init` (ScriptError naming the group and field for
/// anything malformed). A K/V group's `layout` fields default to the
/// manager's `layout`.
std::vector<GroupSpec> parse_groups(const Fields& init, const KvGeometry& manager_layout);

/// `groups` ({"kind", "block_size", "page_bytes", "padded_page_bytes"} each),
/// `scheduler_block_size` and `hash_block_size`, added to `out`.
void describe_groups(const ModelGeometry& geometry, nlohmann::ordered_json& out);

}  // namespace kvtier::script
