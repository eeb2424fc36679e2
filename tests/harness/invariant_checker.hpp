#pragma once
// What the harness checks after every line: the answer's shape, the event
// stream (ids contiguous, Stored/Removed alternating per hash and agreeing
// with `cached`), the counts, page ownership, the backend's own audit, and
// that bytes an owner wrote still verify while its table is unchanged.
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kvtier/core/strong_id.hpp"
#include "kvtier/core/unique_block.hpp"
#include "kvtier/g1/g1_manager.hpp"
#include "kvtier/script/script_runner.hpp"

namespace kvtier::harness {

class InvariantChecker {
 public:
  /// `consistent_identities`: every sequence hash the script uses keeps one
  /// lineage hash (the harness's generator, and real hashes). A fuzzer's
  /// lines may name one hash under two PLHs, or two hashes under one PLH;
  /// the backends then follow the registry, which may store a hash twice or
  /// put two identities on one page (spec behaviour), so those checks are
  /// relaxed to what still must hold: no partial page shared, no bytes
  /// checked on a page another identity shares.
  explicit InvariantChecker(bool consistent_identities = true) : consistent_(consistent_identities) {}
  /// The first broken invariant after `line` was answered with `answer`.
  std::optional<std::string> check(const script::ScriptRunner& runner, const std::string& line,
                                   const nlohmann::ordered_json& answer);

 private:
  struct Written {
    std::vector<PageId> pages;
    std::vector<UniqueBlock> blocks;
  };
  std::optional<std::string> check_answer(const nlohmann::ordered_json& answer);
  std::optional<std::string> check_events(const nlohmann::ordered_json& events);
  std::optional<std::string> check_host_event(const nlohmann::ordered_json& event);
  std::optional<std::string> check_state(const script::ScriptRunner& runner);
  std::optional<std::string> check_bytes(const script::ScriptRunner& runner, const std::string& line, bool ok);
  /// A manager with KV cache groups: its invariants, and its written bytes.
  std::optional<std::string> check_groups(const g1::G1Manager& manager) const;
  std::optional<std::string> check_group_bytes(const script::ScriptRunner& runner, const std::string& line, bool ok);

  bool consistent_;
  std::set<std::uint32_t> conflicted_;  // pages two tables list under different identities
  std::uint64_t next_event_id_ = 0;
  std::set<std::uint64_t> stored_;                    // device-tier hashes a Stored made visible, not Removed since
  std::set<std::uint64_t> seen_;                      // every hash an event named
  std::set<std::uint64_t> host_stored_;               // HostPinned: resident in G2 by the events (event_key: per group)
  std::map<std::uint64_t, std::size_t> host_copies_;  // by hash: blocks of it resident in G2, every group's
  std::set<std::uint64_t> host_seen_;
  std::map<std::string, Written> written_;                  // owner label -> its table when last written
  std::map<std::string, g1::GroupPatterns> group_written_;  // the same, per group, with groups
};

}  // namespace kvtier::harness
