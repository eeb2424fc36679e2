#pragma once
#include <cstddef>
#include <functional>
#include <istream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvtier/core/strong_id.hpp"
#include "kvtier/core/unique_block.hpp"
#include "kvtier/g1/g1_types.hpp"

namespace kvtier {
class KvEventSink;
}
namespace kvtier::g1 {
class G1Manager;
}

namespace kvtier::script {

/// Runs `kvtier script` operations (docs/spec/script-format.md) against one
/// G1Manager and a KvPool of real pages. One JSON object comes back per
/// operation line; a refused line leaves every state as it was.
class ScriptRunner {
 public:
  /// `event_sinks` also receive the manager's events (a ZMQ publisher).
  explicit ScriptRunner(std::vector<std::shared_ptr<KvEventSink>> event_sinks = {});
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
  /// The manager's id of a script owner label (nullopt if never named).
  std::optional<g1::OwnerId> owner_id(const std::string& label) const;
  /// The script's label of a partial block (its UUID text when it has none).
  std::string partial_label(const Uuid& uuid) const;
  /// What `verify` checks, for any pages: those whose bytes differ from the
  /// pattern `write` fills for the block each backs (aligned lists).
  std::vector<PageId> mismatched_pages(std::span<const PageId> pages, std::span<const UniqueBlock> blocks) const;
  /// A manager with KV cache groups: the owner's pages of every group and the
  /// pattern `write` fills each with now (nullopt: no pages, or no sequence
  /// of that owner to name them).
  std::optional<g1::GroupPatterns> owner_patterns(const std::string& label) const;
  /// The pages among `pages` whose bytes differ from the patterns of `identities` (aligned lists).
  std::vector<PageId> mismatched_patterns(std::span<const PageId> pages,
                                          std::span<const std::uint64_t> identities) const;

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

/// What a caller attaches to a script run: more event sinks, and a call after
/// each operation line once `init` succeeded (a publisher's flush: one batch
/// per line).
struct ScriptHooks {
  std::vector<std::shared_ptr<KvEventSink>> event_sinks{};
  std::function<void(const g1::G1Manager&)> after_line{};
};
int run_script(std::istream& in, std::ostream& out, std::ostream& err, const ScriptHooks& hooks);

}  // namespace kvtier::script
