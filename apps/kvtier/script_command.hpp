#pragma once
#include <CLI/CLI.hpp>

namespace kvtier::cli {

/// Registers `kvtier script FILE|-`: runs an operation script and prints one
/// JSON object per operation (docs/spec/script-format.md).
void add_script_command(CLI::App& app, int& exit_code);

}  // namespace kvtier::cli
