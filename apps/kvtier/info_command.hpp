#pragma once
#include <CLI/CLI.hpp>

namespace kvtier::cli {

/// Registers `kvtier info`: the chosen runtime, the device, and the page size
/// of a KV layout.
void add_info_command(CLI::App& app, int& exit_code);

}  // namespace kvtier::cli
