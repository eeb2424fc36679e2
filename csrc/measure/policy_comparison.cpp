#include "kvtier/measure/policy_comparison.hpp"

#include <charconv>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>

#include "kvtier/core/errors.hpp"

namespace kvtier::measure {
namespace {

using Clock = std::chrono::steady_clock;

template <class Run>
PolicyRow timed_row(std::string policy, std::string backend, const std::string& capacity, std::size_t blocks, Run run) {
  const auto t0 = Clock::now();
  const PolicyHits hits = run();
  return PolicyRow{.policy = std::move(policy),
                   .backend = std::move(backend),
                   .capacity = capacity,
                   .capacity_blocks = blocks,
                   .hits = hits,
                   .fraction_of_bound = 0.0,
                   .seconds = std::chrono::duration<double>(Clock::now() - t0).count()};
}

/// The offline rows of one capacity: the bound at G1's size, at the stack's
/// when it is larger ("bound_stack"), the ceiling and FIFO.
void add_offline_rows(std::vector<PolicyRow>& rows, const PrefixTreeTrace& trace, const std::string& name,
                      std::size_t size, std::optional<std::size_t> stack_size) {
  rows.push_back(timed_row("bound", "offline", name, size, [&] { return belady_bound(trace, size); }));
  if (stack_size) {
    rows.push_back(timed_row("bound_stack", "offline", name, size, [&] { return belady_bound(trace, *stack_size); }));
  }
  rows.push_back(timed_row("ceiling", "offline", name, size, [&] { return unbounded_ceiling(trace); }));
  rows.push_back(timed_row("fifo", "offline", name, size, [&] { return fifo_floor(trace, size); }));
}

/// Every row from `first` on as a fraction of the bound row `bound` (1 when it has no hits).
void set_fractions(std::vector<PolicyRow>& rows, std::size_t first, std::size_t bound) {
  const double best = static_cast<double>(rows[bound].hits.hits);
  for (std::size_t r = first; r < rows.size(); ++r) {
    rows[r].fraction_of_bound = best == 0.0 ? 1.0 : static_cast<double>(rows[r].hits.hits) / best;
  }
}

std::vector<std::size_t> parse_capacities(const std::vector<std::string>& capacities, std::size_t unique_blocks) {
  std::vector<std::size_t> blocks;  // every capacity parsed before anything runs
  for (const std::string& capacity : capacities) blocks.push_back(parse_capacity(capacity, unique_blocks));
  return blocks;
}

}  // namespace

std::size_t parse_capacity(std::string_view text, std::size_t unique_blocks) {
  const auto refuse = [&](const std::string& why) {
    return ConfigError("capacity '" + std::string(text) + "': " + why);
  };
  const bool percent = !text.empty() && text.back() == '%';
  const std::string_view number = percent ? text.substr(0, text.size() - 1) : text;
  double value = 0.0;
  const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (number.empty() || error != std::errc{} || end != number.data() + number.size() || !std::isfinite(value)) {
    throw refuse("expected a block count (1000) or a share of the trace's unique blocks (1%)");
  }
  if (percent) {
    if (value <= 0.0 || value > 100.0) throw refuse("a share must be in (0, 100]%");
    return std::max<std::size_t>(
        1, static_cast<std::size_t>(std::llround(value / 100.0 * static_cast<double>(unique_blocks))));
  }
  if (value < 1.0 || value != std::floor(value) || value > 4e9) throw refuse("a block count is a whole number >= 1");
  return static_cast<std::size_t>(value);
}

std::vector<PolicyRow> compare_policies(const PrefixTreeTrace& trace, const std::vector<std::string>& capacities,
                                        const std::vector<OnlinePolicy>& policies) {
  const std::vector<std::size_t> blocks = parse_capacities(capacities, trace.unique_blocks());
  const TraceBlocks hashed = trace_blocks(trace);
  std::vector<PolicyRow> rows;
  for (std::size_t c = 0; c < capacities.size(); ++c) {
    const std::size_t first = rows.size();
    const std::string& name = capacities[c];
    const std::size_t size = blocks[c];
    add_offline_rows(rows, trace, name, size, std::nullopt);
    for (const OnlinePolicy& policy : policies) {
      const char* backend = policy.backend == g1::G1Backend::Native ? "native" : "kvbm";
      rows.push_back(
          timed_row(policy.name, backend, name, size, [&] { return run_online_policy(trace, hashed, policy, size); }));
    }
    set_fractions(rows, first, first);
  }
  return rows;
}

std::vector<PolicyRow> compare_policies_in_stack(const std::vector<replay::TraceRequest>& requests,
                                                 const std::vector<std::string>& capacities,
                                                 const std::vector<OnlinePolicy>& policies, const PolicyStack& stack) {
  const PrefixTreeTrace trace = prefix_tree_trace(requests);
  const std::vector<std::size_t> blocks = parse_capacities(capacities, trace.unique_blocks());
  const std::size_t below = std::size_t{stack.host_blocks} + stack.disk_blocks;
  std::vector<PolicyRow> rows;
  for (std::size_t c = 0; c < capacities.size(); ++c) {
    const std::size_t first = rows.size();
    const std::string& name = capacities[c];
    const std::size_t size = blocks[c];
    add_offline_rows(rows, trace, name, size, size + below);
    for (const OnlinePolicy& policy : policies) {
      const char* backend = policy.backend == g1::G1Backend::Native ? "native" : "kvbm";
      StackHits tiers;
      PolicyRow row = timed_row(policy.name, backend, name, size, [&] {
        tiers = run_policy_in_stack(requests, policy, size, stack);
        return PolicyHits{.hits = tiers.hits(), .prompt_blocks = trace.prompt_blocks()};
      });
      row.stack = tiers;
      rows.push_back(std::move(row));
    }
    set_fractions(rows, first, first + 1);  // of the stack's bound, G1's own included
  }
  return rows;
}

}  // namespace kvtier::measure
