#pragma once
#include <nlohmann/json.hpp>

#include "kvtier/core/kv_event.hpp"

namespace kvtier {

/// The event's JSON form of docs/spec/script-format.md ("stored"/"removed",
/// "device"/"host_pinned", `token_ids` only when present), fields in the
/// order the spec prints them.
nlohmann::ordered_json to_json(const KvEvent& event);

}  // namespace kvtier
