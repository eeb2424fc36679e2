#include "script_command.hpp"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "kv_events_options.hpp"
#include "kvtier/g1/g1_manager.hpp"
#include "kvtier/script/script_runner.hpp"

namespace kvtier::cli {
namespace {

struct ScriptOptions {
  std::string path;
  KvEventsOptions kv_events;
};

int run(const ScriptOptions& o) {
  std::ifstream file;
  std::istream* in = &std::cin;
  if (o.path != "-") {
    std::error_code error;
    if (std::filesystem::is_directory(o.path, error)) {
      std::cerr << "kvtier script: " << o.path << " is a directory, not a script\n";
      return 2;
    }
    file.open(o.path);
    if (!file) {
      std::cerr << "kvtier script: cannot read " << o.path << '\n';
      return 2;
    }
    in = &file;
  }
  std::unique_ptr<KvEventsOutput> kv_events;
  try {
    kv_events = open_kv_events(o.kv_events, 16, 0);  // the block size is the init line's
  } catch (const std::exception& error) {
    std::cerr << "kvtier script: " << error.what() << '\n';
    return 2;
  }
  if (!kv_events) return script::run_script(*in, std::cout, std::cerr);
  script::ScriptHooks hooks{.event_sinks = {kv_events->sink()},
                            .after_line = [out = kv_events.get()](const g1::G1Manager& manager) {
                              out->set_block_size(manager.block_size());
                              out->flush();  // one batch per operation line
                            }};
  const int status = script::run_script(*in, std::cout, std::cerr, hooks);
  std::cerr << kv_events->finish() << '\n';  // stdout holds the script's JSON lines only
  return status;
}

}  // namespace

void add_script_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ScriptOptions>();
  CLI::App* command = app.add_subcommand("script", "Run an operation script against one G1 manager on real pages");
  command->add_option("file", o->path, "JSON Lines script, or - for standard input")->required();
  add_kv_events_options(*command, o->kv_events);
  command->callback([o, &exit_code] { exit_code = run(*o); });
}

}  // namespace kvtier::cli
