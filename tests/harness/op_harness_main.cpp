// kvtier_op_harness: seeded random operation scripts through the script
// runner, every invariant checked after every line; a failing seed is shrunk
// to a minimal script and printed. Reproducible: the same seeds, the same run.
#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>

#include "harness/operation_trial.hpp"

int main(int argc, char** argv) {
  using namespace kvtier::harness;
  CLI::App app{"kvtier operation harness: random scripts, invariants after every line"};
  std::uint64_t first_seed = 1;
  std::uint64_t seeds = 100;
  std::size_t operations = 400;
  std::size_t replays = 4;
  double seconds = 0;
  bool show = false;
  app.add_option("--first-seed", first_seed, "first seed");
  app.add_option("--seeds", seeds, "how many seeds (one trial each)");
  app.add_option("--ops", operations, "operations per trial");
  app.add_option("--replays", replays, "refused lines per trial replayed away (a refused line changes nothing)");
  app.add_option("--seconds", seconds, "start no new trial after this many seconds (0: no limit)");
  app.add_flag("--show", show, "print every trial's script and answers (for reading what the harness does)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : 2;
  }

  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::uint64_t trials = 0;
  std::size_t lines = 0;
  std::size_t refused = 0;
  std::size_t replayed = 0;
  for (std::uint64_t seed = first_seed; seed < first_seed + seeds; ++seed) {
    if (seconds > 0 && elapsed() > seconds) break;
    const TrialConfig config = TrialConfig::from_seed(seed);
    const TrialOutcome outcome = run_random_trial(config, operations, replays);
    ++trials;
    lines += outcome.lines.size();
    refused += outcome.refused.size();
    replayed += outcome.replays;
    if (show) {
      for (std::size_t i = 0; i < outcome.lines.size(); ++i)
        std::cout << outcome.lines[i] << "\n  -> " << outcome.answers[i] << "\n";
    }
    if (!outcome.failure) continue;
    std::cout << "FAILED " << config.describe() << "\n  line " << outcome.failure->line + 1 << ": "
              << outcome.lines[outcome.failure->line] << "\n  " << outcome.failure->what << "\n";
    std::vector<std::string> script(outcome.lines.begin(),
                                    outcome.lines.begin() + static_cast<std::ptrdiff_t>(outcome.failure->line + 1));
    if (!run_lines(script, std::nullopt, true).failure) script = outcome.lines;
    const auto minimal = shrink(script, 60);
    const TrialOutcome again = run_lines(minimal, std::nullopt, true);
    std::cout << "minimal script (" << minimal.size() << " lines; `kvtier script -` replays it):\n";
    for (const auto& line : minimal) std::cout << line << "\n";
    if (again.failure) std::cout << "fails at line " << again.failure->line + 1 << ": " << again.failure->what << "\n";
    return 1;
  }
  std::cout << "op harness: " << trials << " seeds (" << first_seed << ".." << first_seed + trials - 1 << ") x "
            << operations << " ops: " << lines << " lines, " << refused << " refused, " << replayed
            << " refused lines replayed away; every invariant held (" << elapsed() << " s)\n";
  return 0;
}
