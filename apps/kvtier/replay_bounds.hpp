#pragma once
// The offline optimum beside a replay (docs/policies.md): what any cache of
// the replay's G1 size, and of its whole stack, could have hit on the same
// requests, one request at a time.
#include <nlohmann/json.hpp>
#include <vector>

#include "kvtier/replay/replayer.hpp"
#include "kvtier/replay/trace.hpp"

namespace kvtier::cli {

/// Adds `bound_g1_hit_rate` and `bound_stack_hit_rate` (null when the
/// requests' ids are not a prefix tree, or a size holds no 512-token block)
/// with their capacities in trace blocks.
void add_offline_bounds(nlohmann::ordered_json& report, const std::vector<replay::TraceRequest>& requests,
                        const replay::ReplayConfig& config);

}  // namespace kvtier::cli
