#include "bench_policy.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvtier/core/errors.hpp"
#include "kvtier/measure/policy_comparison.hpp"
#include "kvtier/replay/trace.hpp"
#include "option_checks.hpp"
#include "result_table.hpp"

namespace kvtier::cli {
namespace {

struct PolicyOptions {
  std::string trace = KVTIER_DEFAULT_TRACE;
  std::vector<std::string> capacities{"0.3%", "1%", "3%", "10%", "30%"};
  std::vector<std::string> policies;  // empty: every online policy
  std::size_t requests = 0;           // 0: the whole trace
  std::uint32_t host_blocks = 0;      // > 0: the policies run over a tier stack
  std::uint32_t disk_blocks = 0;
  std::string disk_dir;  // empty: a fresh directory under the system's temporary directory
  std::string g2_admission = "all";
  std::string g3_admission = "all";
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
  std::vector<measure::PolicyRow> rows;
  if (o.host_blocks > 0) {
    const std::filesystem::path dir = o.disk_dir.empty() ? std::filesystem::temp_directory_path() /
                                                               ("kvtier-bench-policy-" + std::to_string(::getpid()))
                                                         : std::filesystem::path(o.disk_dir);
    const measure::PolicyStack stack{.host_blocks = o.host_blocks,
                                     .disk_blocks = o.disk_blocks,
                                     .disk_dir = dir,
                                     .g2_admission = offload::parse_tier_admission(o.g2_admission),
                                     .g3_admission = offload::parse_tier_admission(o.g3_admission)};
    rows = measure::compare_policies_in_stack(requests, o.capacities, policies, stack);
    if (o.disk_dir.empty()) std::filesystem::remove_all(dir);
  } else {
    if (o.disk_blocks > 0 || o.g2_admission != "all" || o.g3_admission != "all") {
      throw ConfigError("--disk-blocks and the admissions shape a tier stack: they need --host-blocks");
    }
    rows = measure::compare_policies(trace, o.capacities, policies);
  }
  nlohmann::ordered_json table = nlohmann::ordered_json::array();
  nlohmann::ordered_json json = nlohmann::ordered_json::array();
  for (const measure::PolicyRow& r : rows) {
    nlohmann::ordered_json row{{"policy", r.policy},        {"capacity_blocks", r.capacity_blocks},
                               {"hit_rate", r.hits.rate()}, {"fraction_of_bound", r.fraction_of_bound},
                               {"capacity", r.capacity},    {"backend", r.backend},
                               {"hits", r.hits.hits},       {"prompt_blocks", r.hits.prompt_blocks},
                               {"seconds", r.seconds}};
    if (o.host_blocks > 0) {  // what each tier served, wrote and read back (null for the offline rows)
      const auto tier = [&](auto field) {
        return r.stack ? nlohmann::ordered_json(field(*r.stack)) : nlohmann::ordered_json(nullptr);
      };
      const auto rate = [&](std::size_t hits) {
        return static_cast<double>(hits) / static_cast<double>(std::max<std::size_t>(r.hits.prompt_blocks, 1));
      };
      row["g1_hit_rate"] = tier([&](const measure::StackHits& s) { return rate(s.g1); });
      row["g2_hit_rate"] = tier([&](const measure::StackHits& s) { return rate(s.g2); });
      row["g3_hit_rate"] = tier([&](const measure::StackHits& s) { return rate(s.g3); });
      row["g2_bytes_written"] = tier([](const measure::StackHits& s) { return s.g2_bytes_written; });
      row["g2_bytes_read"] = tier([](const measure::StackHits& s) { return s.g2_bytes_read; });
      row["g3_bytes_written"] = tier([](const measure::StackHits& s) { return s.g3_bytes_written; });
      row["g3_bytes_read"] = tier([](const measure::StackHits& s) { return s.g3_bytes_read; });
      row["mismatches"] = tier([](const measure::StackHits& s) { return s.mismatches; });
    }
    json.push_back(row);
    table.push_back(std::move(row));
  }
  print_table(std::cout, table);
  if (!o.json.empty()) write_json(o.json, json);
  if (!o.csv.empty()) write_csv(o.csv, table);
  for (const measure::PolicyRow& r : rows) {
    if (r.stack && r.stack->mismatches > 0) return 1;  // a tier served bytes that differ
  }
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
  cmd->add_option("--host-blocks", o->host_blocks,
                  "> 0: each policy replayed with a G2 of this many pages (and --disk-blocks of G3) under G1")
      ->capture_default_str();
  cmd->add_option("--disk-blocks", o->disk_blocks, "G3 blocks under G2 (with --host-blocks)")->capture_default_str();
  cmd->add_option("--disk-dir", o->disk_dir, "where G3's files go (default: a fresh temporary directory)")
      ->check(non_empty());
  cmd->add_option("--g2-admission", o->g2_admission, "all | second_offer")->capture_default_str();
  cmd->add_option("--g3-admission", o->g3_admission, "all | second_offer")->capture_default_str();
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
