#pragma once
// `kvtier bench policy`: at each capacity, every online policy's hit rate in
// kvtier's managers beside the same-run bound, ceiling and FIFO floor
// (docs/policies.md).
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "kvtier/measure/offline_policies.hpp"
#include "kvtier/measure/online_policy_run.hpp"
#include "kvtier/measure/prefix_tree_trace.hpp"

namespace kvtier::measure {

/// "1%" (of `unique_blocks`, rounded, at least 1) or a block count "1000".
/// ConfigError for anything else, zero, or a percentage above 100.
std::size_t parse_capacity(std::string_view text, std::size_t unique_blocks);

struct PolicyRow {
  std::string policy;    // "bound", "ceiling", "fifo" or an online policy's name
  std::string backend;   // "offline", "native" or "kvbm"
  std::string capacity;  // as asked ("1%", "1000")
  std::size_t capacity_blocks = 0;
  PolicyHits hits;
  double fraction_of_bound = 0.0;  // hits / the bound's hits at this capacity (1 when both are 0)
  double seconds = 0.0;            // wall time of this row's run
};

/// Per capacity: the bound, the ceiling, FIFO, then each policy in order.
std::vector<PolicyRow> compare_policies(const PrefixTreeTrace& trace, const std::vector<std::string>& capacities,
                                        const std::vector<OnlinePolicy>& policies);

}  // namespace kvtier::measure
