#include "script_command.hpp"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "kvtier/script/script_runner.hpp"

namespace kvtier::cli {

void add_script_command(CLI::App& app, int& exit_code) {
  auto path = std::make_shared<std::string>();
  CLI::App* command = app.add_subcommand("script", "Run an operation script against one G1 manager on real pages");
  command->add_option("file", *path, "JSON Lines script, or - for standard input")->required();
  command->callback([path, &exit_code] {
    if (*path == "-") {
      exit_code = script::run_script(std::cin, std::cout, std::cerr);
      return;
    }
    std::error_code error;
    if (std::filesystem::is_directory(*path, error)) {
      std::cerr << "kvtier script: " << *path << " is a directory, not a script\n";
      exit_code = 2;
      return;
    }
    std::ifstream file(*path);
    if (!file) {
      std::cerr << "kvtier script: cannot read " << *path << '\n';
      exit_code = 2;
      return;
    }
    exit_code = script::run_script(file, std::cout, std::cerr);
  });
}

}  // namespace kvtier::cli
