#pragma once
// Runs one trial: random lines through a fresh ScriptRunner with every
// invariant checked after each line, then "a refused line changes nothing"
// (the script without that line gives every other line the same answer,
// byte for byte), and shrinks a failing script to a minimal one.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "harness/trial_config.hpp"

namespace kvtier::harness {

struct TrialFailure {
  std::size_t line = 0;  // 0-based index into the script's lines
  std::string what;
};

struct TrialOutcome {
  std::vector<std::string> lines;    // the init line first
  std::vector<std::string> answers;  // aligned with lines; empty for a skipped line
  std::vector<std::size_t> refused;  // lines answered ok:false
  std::size_t replays = 0;           // refused lines checked by replaying without them
  std::optional<TrialFailure> failure;
};

/// Draws `operations` lines for `config` and checks everything; replays the
/// script without up to `replays` of its refused lines.
TrialOutcome run_random_trial(const TrialConfig& config, std::size_t operations, std::size_t replays);

/// Runs fixed lines (line numbers are their 1-based index; `skip` is left out
/// but keeps its number) and checks every invariant; with `all_replays`, every
/// refused line is also replayed away.
TrialOutcome run_lines(const std::vector<std::string>& lines, std::optional<std::size_t> skip = std::nullopt,
                       bool all_replays = false);

/// The smallest script found (greedy chunk removal) that still fails; the
/// init line always stays.
std::vector<std::string> shrink(std::vector<std::string> lines, double seconds);

}  // namespace kvtier::harness
