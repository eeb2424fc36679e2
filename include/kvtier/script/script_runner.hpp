#pragma once
#include <cstddef>
#include <istream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

namespace kvtier::g1 {
class G1Manager;
}
namespace kvtier::memory {
class KvPool;
}

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
  /// Read-only views for harnesses that check invariants between lines (null
  /// before `init`).
  const g1::G1Manager* manager() const noexcept;
  const memory::KvPool* pool() const noexcept;

 private:
  class State;
  std::unique_ptr<State> state_;
};

/// One answer as its output line (no newline). Bytes that are not valid UTF-8
/// (quoted from a malformed line) are replaced, never a reason to abort.
std::string format_answer(const nlohmann::ordered_json& answer);

/// Reads JSON Lines from `in`, writes one output line per operation to `out`.
/// Returns 0 when every line succeeded, 1 when any failed, 2 when the first
/// operation is not a successful `init` or the input cannot be read or the
/// output cannot be written (said on `err`).
int run_script(std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace kvtier::script
