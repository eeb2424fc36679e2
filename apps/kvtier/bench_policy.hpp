#pragma once
#include <CLI/CLI.hpp>

namespace kvtier::cli {

/// `kvtier bench policy`: every cache policy's hit rate on a trace beside the
/// same-run offline bound, ceiling and FIFO floor (docs/policies.md).
void add_bench_policy_command(CLI::App& bench, int& exit_code);

}  // namespace kvtier::cli
