#include "replay_bounds.hpp"

#include "kvtier/core/errors.hpp"
#include "kvtier/measure/offline_policies.hpp"
#include "kvtier/measure/prefix_tree_trace.hpp"

namespace kvtier::cli {

void add_offline_bounds(nlohmann::ordered_json& report, const std::vector<replay::TraceRequest>& requests,
                        const replay::ReplayConfig& config) {
  const std::size_t block = config.session.manager.block_size;
  const auto in_trace_blocks = [&](std::size_t pages) { return pages * block / replay::kTraceBlockTokens; };
  const std::size_t g1 = in_trace_blocks(config.session.manager.capacity);
  const std::size_t stack = in_trace_blocks(std::size_t{config.session.manager.capacity} + config.session.host_blocks +
                                            (config.session.disk ? config.session.disk->blocks : 0));
  report["bound_g1_blocks"] = g1;
  report["bound_stack_blocks"] = stack;
  report["bound_g1_hit_rate"] = nullptr;
  report["bound_stack_hit_rate"] = nullptr;
  try {
    const measure::PrefixTreeTrace trace = measure::prefix_tree_trace(requests);
    if (g1 > 0) report["bound_g1_hit_rate"] = measure::belady_bound(trace, g1).rate();
    if (stack > 0) report["bound_stack_hit_rate"] = measure::belady_bound(trace, stack).rate();
  } catch (const ConfigError&) {
    // ids that are not a prefix tree have no bound here; the replay itself is unaffected
  }
}

}  // namespace kvtier::cli
