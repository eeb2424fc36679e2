#pragma once
// The offline optimum beside a replay (docs/replay.md "The bound"): the most
// hits any cache of the replay's G1 size (and of its whole stack) could have
// had on the replay's own blocks, looked up and computed in the order the
// replay made them, with its hits counted as the replay counts them. No run
// can hit more.
#include <nlohmann/json.hpp>
#include <vector>

#include "kvtier/replay/replayer.hpp"
#include "kvtier/replay/trace.hpp"

namespace kvtier::cli {

/// Whether the replay must record its steps for add_offline_bounds.
bool wants_prefix_steps(const replay::ReplayConfig& config);

/// Adds `bound_g1_hit_rate` and `bound_stack_hit_rate` with their capacities
/// in blocks of one instance (`bound_g1_blocks`, `bound_stack_blocks`) from
/// each instance's steps (`instances`, as replay_instances gave them); a
/// bound that cannot be had is null and `bound_note` says why.
void add_offline_bounds(nlohmann::ordered_json& report, const std::vector<replay::TraceRequest>& requests,
                        const replay::ReplayConfig& config, const std::vector<replay::ReplayReport>& instances);

}  // namespace kvtier::cli
