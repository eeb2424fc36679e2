#include "harness/operation_trial.hpp"

#include <chrono>
#include <random>

#include "harness/invariant_checker.hpp"
#include "harness/random_operations.hpp"
#include "kvtier/script/script_runner.hpp"

namespace kvtier::harness {
namespace {

/// One line through the runner and the checker; returns its formatted answer.
std::string step(script::ScriptRunner& runner, InvariantChecker& checker, TrialOutcome& outcome,
                 const std::string& line, std::size_t index) {
  const auto answer = runner.run_line(line, index + 1);
  if (!answer) return {};
  if (!answer->at("ok").get<bool>()) outcome.refused.push_back(index);
  if (!outcome.failure) {
    if (auto broken = checker.check(runner, line, *answer)) outcome.failure = TrialFailure{index, *broken};
  }
  return script::format_answer(*answer);
}

/// Replays without refused line `r`: every other answer must be unchanged.
std::optional<TrialFailure> replay_without(const TrialOutcome& original, std::size_t r) {
  const TrialOutcome again = run_lines(original.lines, r);
  if (again.failure) return again.failure;
  for (std::size_t i = 0; i < original.lines.size(); ++i) {
    if (i == r || again.answers[i] == original.answers[i]) continue;
    return TrialFailure{r, "refused line " + std::to_string(r + 1) + " changed something: without it, line " +
                               std::to_string(i + 1) + " answers " + again.answers[i] + " instead of " +
                               original.answers[i]};
  }
  return std::nullopt;
}

}  // namespace

TrialOutcome run_lines(const std::vector<std::string>& lines, std::optional<std::size_t> skip, bool all_replays) {
  TrialOutcome outcome;
  outcome.lines = lines;
  outcome.answers.resize(lines.size());
  script::ScriptRunner runner;
  InvariantChecker checker;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (skip && *skip == i) continue;
    outcome.answers[i] = step(runner, checker, outcome, lines[i], i);
  }
  if (!all_replays || outcome.failure) return outcome;
  for (const std::size_t r : outcome.refused) {
    if (r == 0) continue;  // without init nothing runs
    ++outcome.replays;
    if ((outcome.failure = replay_without(outcome, r))) break;
  }
  return outcome;
}

TrialOutcome run_random_trial(const TrialConfig& config, std::size_t operations, std::size_t replays) {
  TrialOutcome outcome;
  script::ScriptRunner runner;
  InvariantChecker checker;
  RandomOperations generator(config);
  outcome.lines.push_back(config.init_line());
  outcome.answers.push_back(step(runner, checker, outcome, outcome.lines[0], 0));
  for (std::size_t i = 1; i <= operations && !outcome.failure; ++i) {
    outcome.lines.push_back(generator.next(runner));
    outcome.answers.push_back(step(runner, checker, outcome, outcome.lines[i], i));
    if (!outcome.answers[i].empty())
      generator.observe(outcome.lines[i], nlohmann::ordered_json::parse(outcome.answers[i]));
  }
  if (outcome.failure || outcome.refused.empty()) return outcome;
  std::mt19937_64 rng(config.seed);
  for (std::size_t n = 0; n < replays; ++n) {
    const std::size_t r = outcome.refused[rng() % outcome.refused.size()];
    if (r == 0) continue;
    ++outcome.replays;
    if ((outcome.failure = replay_without(outcome, r))) break;
  }
  return outcome;
}

std::vector<std::string> shrink(std::vector<std::string> lines, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  const auto fails = [](const std::vector<std::string>& candidate) {
    return run_lines(candidate, std::nullopt, true).failure.has_value();
  };
  for (std::size_t chunk = (lines.size() - 1) / 2; chunk >= 1; chunk /= 2) {
    for (std::size_t start = 1; start < lines.size() && std::chrono::steady_clock::now() < deadline;) {
      std::vector<std::string> candidate(lines.begin(), lines.begin() + static_cast<std::ptrdiff_t>(start));
      const std::size_t end = std::min(lines.size(), start + chunk);
      candidate.insert(candidate.end(), lines.begin() + static_cast<std::ptrdiff_t>(end), lines.end());
      if (fails(candidate)) {
        lines = std::move(candidate);  // keep the removal; try the same place again
      } else {
        start += chunk;
      }
    }
    if (chunk == 1) break;
  }
  return lines;
}

}  // namespace kvtier::harness
