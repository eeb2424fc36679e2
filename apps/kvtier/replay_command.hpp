#pragma once
#include <CLI/CLI.hpp>

namespace kvtier::cli {

/// Registers `kvtier replay`: a request trace (or the built-in workload) on
/// real memory, with every reused page checked; exit status 1 on a mismatch.
void add_replay_command(CLI::App& app, int& exit_code);

}  // namespace kvtier::cli
