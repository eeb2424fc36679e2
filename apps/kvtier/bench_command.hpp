#pragma once
#include <CLI/CLI.hpp>

namespace kvtier::cli {

/// `kvtier bench alloc|swap`: the allocator cycle against the same-run floor,
/// and swap bandwidth against the link's ceiling; a table, JSON and CSV.
void add_bench_command(CLI::App& app, int& exit_code);

}  // namespace kvtier::cli
