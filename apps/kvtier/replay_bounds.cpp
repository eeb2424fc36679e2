#include "replay_bounds.hpp"

#include <stdexcept>
#include <string>

#include "kvtier/measure/offline_policies.hpp"
#include "kvtier/measure/replay_steps_trace.hpp"

namespace kvtier::cli {
namespace {

/// Hits of the optimum of `capacity` blocks, summed over the instances (each its own cache).
std::size_t optimum_hits(const std::vector<measure::PrefixTreeTrace>& traces, std::size_t capacity) {
  std::size_t hits = 0;
  for (const measure::PrefixTreeTrace& trace : traces) hits += measure::belady_bound(trace, capacity).hits;
  return hits;
}

}  // namespace

bool wants_prefix_steps(const replay::ReplayConfig& config) { return config.session.manager.groups.empty(); }

void add_offline_bounds(nlohmann::ordered_json& report, const std::vector<replay::TraceRequest>& requests,
                        const replay::ReplayConfig& config, const std::vector<replay::ReplayReport>& instances) {
  const std::size_t g1 = config.session.manager.capacity;
  const std::size_t g3 = config.session.disk ? config.session.disk->blocks : 0;
  const std::size_t stack = g1 + config.session.host_blocks + g3;
  report["bound_g1_blocks"] = g1;
  report["bound_stack_blocks"] = stack;
  report["bound_g1_hit_rate"] = nullptr;
  report["bound_stack_hit_rate"] = nullptr;
  report["bound_note"] = nullptr;
  if (!wants_prefix_steps(config)) {
    report["bound_note"] = "no bound with KV cache groups: a hit's pages differ per group";
    return;
  }
  std::vector<measure::PrefixTreeTrace> traces;
  std::size_t prompt_blocks = 0;
  std::size_t recovered = 0;
  for (const replay::ReplayReport& r : instances) {
    traces.push_back(measure::replay_steps_trace(requests, r.prefix_steps, config.session.manager.block_size));
    if (traces.back().prompt_blocks() != r.prompt_blocks) {
      throw std::logic_error("the bound's blocks (" + std::to_string(traces.back().prompt_blocks()) +
                             ") are not the replay's (" + std::to_string(r.prompt_blocks) + ")");
    }
    prompt_blocks += r.prompt_blocks;
    recovered += r.g3_recovered_blocks;
  }
  if (prompt_blocks == 0) {
    report["bound_note"] = "no prompt block was looked up: no hit rate to bound";
    return;
  }
  const auto rate = [&](std::size_t hits) { return static_cast<double>(hits) / static_cast<double>(prompt_blocks); };
  const double g1_bound = rate(optimum_hits(traces, g1));
  report["bound_g1_hit_rate"] = g1_bound;
  if (config.session.shared) {
    report["bound_note"] = "no bound for the stack: G4 holds what other instances and earlier runs published";
  } else if (recovered > 0) {
    report["bound_note"] = "no bound for the stack: G3 held " + std::to_string(recovered) +
                           " blocks of an earlier run when the replay started";
  } else {
    report["bound_stack_hit_rate"] = stack == g1 ? g1_bound : rate(optimum_hits(traces, stack));
  }
}

}  // namespace kvtier::cli
