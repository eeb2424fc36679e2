// libFuzzer target: arbitrary bytes as `kvtier script` lines, after an init
// the first byte picks, with the harness's invariants checked after every
// line. Any crash, sanitizer report or broken invariant is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "harness/invariant_checker.hpp"
#include "harness/trial_config.hpp"
#include "kvtier/script/script_runner.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kvtier;
  if (size == 0) return 0;
  constexpr std::size_t kMaxLines = 256;  // keeps one input fast; depth comes from the corpus
  script::ScriptRunner runner;
  harness::InvariantChecker checker(/*consistent_identities=*/false);  // fuzzed lines name hashes freely
  const std::string init = harness::TrialConfig::from_seed(data[0]).init_line();
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  std::size_t number = 1;
  std::string_view line = init;
  while (true) {
    const auto answer = runner.run_line(line, number);
    if (answer) {
      (void)script::format_answer(*answer);
      if (const auto broken = checker.check(runner, std::string(line), *answer)) {
        std::fprintf(stderr, "invariant broken at line %zu: %s\n", number, broken->c_str());
        std::abort();
      }
    }
    if (rest.empty() || ++number > kMaxLines) break;
    const std::size_t end = rest.find('\n');
    line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
  }
  return 0;
}
