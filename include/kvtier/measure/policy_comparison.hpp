#pragma once
// `kvtier bench policy`: at each capacity, every online policy's hit rate in
// kvtier's managers beside the same-run bound, ceiling and FIFO floor
// (docs/policies.md).
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvtier/measure/offline_policies.hpp"
#include "kvtier/measure/online_policy_run.hpp"
#include "kvtier/measure/policy_stack_run.hpp"
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
  double fraction_of_bound = 0.0;    // hits / the bound's hits at this capacity (1 when both are 0)
  double seconds = 0.0;              // wall time of this row's run
  std::optional<StackHits> stack{};  // an online policy run over a tier stack: what each tier did
};

/// Per capacity: the bound, the ceiling, FIFO, then each policy in order.
std::vector<PolicyRow> compare_policies(const PrefixTreeTrace& trace, const std::vector<std::string>& capacities,
                                        const std::vector<OnlinePolicy>& policies);

/// The same over a tier stack: per capacity the bound at G1's size, the
/// bound at the stack's ("bound_stack", G1 + G2 + G3 blocks), the ceiling,
/// FIFO, then each policy replayed with G1 at that capacity over `stack`
/// (its hits: every tier's; fraction_of_bound: of bound_stack).
std::vector<PolicyRow> compare_policies_in_stack(const std::vector<replay::TraceRequest>& requests,
                                                 const std::vector<std::string>& capacities,
                                                 const std::vector<OnlinePolicy>& policies, const PolicyStack& stack);

}  // namespace kvtier::measure
