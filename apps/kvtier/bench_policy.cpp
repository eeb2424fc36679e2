#include "bench_policy.hpp"

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvtier/measure/policy_comparison.hpp"
#include "kvtier/replay/trace.hpp"
#include "option_checks.hpp"
#include "result_table.hpp"

namespace kvtier::cli {
namespace {

struct PolicyOptions {
  std::string trace = "../shared/traces/mooncake_synthetic_trace.jsonl";
  std::vector<std::string> capacities{"0.3%", "1%", "3%", "10%", "30%"};
  std::vector<std::string> policies;  // empty: every online policy
  std::size_t requests = 0;           // 0: the whole trace
  std::string json;
  std::string csv;
};

int run_policy(const PolicyOptions& o) {
  std::vector<measure::OnlinePolicy> policies;
  if (o.policies.empty()) policies = measure::online_policies();
  for (const std::string& name : o.policies) policies.push_back(measure::online_policy(name));
  const auto requests =
      o.requests == 0 ? replay::read_trace_file(o.trace) : replay::read_trace_file(o.trace, o.requests);
  const measure::PrefixTreeTrace trace = measure::prefix_tree_trace(requests);
  std::cerr << "kvtier bench policy: " << trace.requests.size() << " requests, " << trace.prompt_blocks()
            << " prompt blocks, " << trace.unique_blocks() << " unique\n";
  nlohmann::ordered_json table = nlohmann::ordered_json::array();
  nlohmann::ordered_json json = nlohmann::ordered_json::array();
  for (const measure::PolicyRow& r : measure::compare_policies(trace, o.capacities, policies)) {
    nlohmann::ordered_json row{{"policy", r.policy},        {"capacity_blocks", r.capacity_blocks},
                               {"hit_rate", r.hits.rate()}, {"fraction_of_bound", r.fraction_of_bound},
                               {"capacity", r.capacity},    {"backend", r.backend},
                               {"hits", r.hits.hits},       {"prompt_blocks", r.hits.prompt_blocks},
                               {"seconds", r.seconds}};
    json.push_back(row);
    table.push_back(std::move(row));
  }
  print_table(std::cout, table);
  if (!o.json.empty()) write_json(o.json, json);
  if (!o.csv.empty()) write_csv(o.csv, table);
  return 0;
}

}  // namespace

void add_bench_policy_command(CLI::App& bench, int& exit_code) {
  auto o = std::make_shared<PolicyOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "policy",
      "Hit rate of every cache policy in kvtier's managers on a trace, beside the same-run offline optimum "
      "(Belady on the prefix tree), the unbounded ceiling and a FIFO floor");
  cmd->add_option("--trace", o->trace, "a Mooncake-style JSONL trace (hash_ids per block)")->capture_default_str();
  cmd->add_option("--capacities", o->capacities, "cache sizes: shares of the trace's unique blocks (1%) or blocks")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--policies", o->policies, "online policies to run (default: all)")->delimiter(',');
  cmd->add_option("--requests", o->requests, "the first N requests only (0: all)")->capture_default_str();
  cmd->add_option("--json", o->json, "write the rows as JSON to this file")->check(non_empty());
  cmd->add_option("--csv", o->csv, "write the rows as CSV to this file")->check(non_empty());
  cmd->callback([o, &exit_code] {
    try {
      exit_code = run_policy(*o);
    } catch (const std::exception& error) {
      std::cerr << "kvtier bench policy: " << error.what() << '\n';
      exit_code = 2;
    }
  });
}

}  // namespace kvtier::cli
