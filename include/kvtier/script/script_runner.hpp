#pragma once
#include <cstddef>
#include <istream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string_view>

namespace kvtier::script {

/// Runs `kvtier script` operations (spec/script-format.md) against one
/// G1Manager and a KvPool of real pages. One JSON object comes back per
/// operation line; a refused line leaves every state as it was.
class ScriptRunner {
 public:
  ScriptRunner();
  ~ScriptRunner();
  ScriptRunner(const ScriptRunner&) = delete;
  ScriptRunner& operator=(const ScriptRunner&) = delete;

  /// nullopt for a blank or `#` comment line; otherwise the operation's output.
  std::optional<nlohmann::ordered_json> run_line(std::string_view line, std::size_t line_number);
  /// True once an `init` succeeded.
  bool initialized() const noexcept;

 private:
  class State;
  std::unique_ptr<State> state_;
};

/// Reads JSON Lines from `in`, writes one output line per operation to `out`.
/// Returns 0 when every line succeeded, 1 when any failed, 2 when the first
/// operation is not a successful `init`.
int run_script(std::istream& in, std::ostream& out);

}  // namespace kvtier::script
