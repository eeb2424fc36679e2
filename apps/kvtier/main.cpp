// kvtier: the command-line front end. Thin: parses, calls the library, prints.
#include <CLI/CLI.hpp>
#include <string>

#include "bench_command.hpp"
#include "info_command.hpp"
#include "option_checks.hpp"
#include "replay_command.hpp"
#include "script_command.hpp"

int main(int argc, char** argv) {
  CLI::App app{"kvtier: a real-memory KV-cache block allocator for LLM inference"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("kvtier ") + KVTIER_VERSION);
  int exit_code = 0;
  kvtier::cli::add_info_command(app, exit_code);
  kvtier::cli::add_script_command(app, exit_code);
  kvtier::cli::add_replay_command(app, exit_code);
  kvtier::cli::add_bench_command(app, exit_code);
  kvtier::cli::refuse_signed_unsigned_options(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // --help and --version exit 0; every usage error is status 2, as documented.
    return app.exit(error) == 0 ? 0 : 2;
  }
  return exit_code;
}
