#pragma once
// The replay's byte checks on a manager with KV cache groups: every page a
// group's table holds for the tokens a step computed gets the pattern of the
// block it backs — K/V in the group's page format for an attention group
// (GroupKvFill), the page pattern for a Mamba state — (G1Manager::group_patterns: a complete block's hash in that
// group, so requests that share it by prefix hit read the same bytes), and
// every page a request takes as a prefix hit is read back against the
// pattern its block must hold. Counts per group, with the group's cached
// (Stored) and evicted (Removed) blocks from the manager's events.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvtier/core/active_sequence.hpp"
#include "kvtier/core/kv_event_sink.hpp"
#include "kvtier/g1/g1_manager.hpp"
#include "kvtier/memory/kv_pool.hpp"
#include "kvtier/replay/group_kv_fill.hpp"

namespace kvtier::replay {

/// One group's share of a replay.
struct GroupReplayCounts {
  std::string kind;               // group_kind_name
  std::uint32_t block_size = 0;   // tokens
  std::uint64_t hit_pages = 0;    // cached pages requests took as prefix hits
  std::uint64_t fresh_pages = 0;  // pages requests took fresh (hit_pages / both: the group's hit rate)
  std::uint64_t stored_blocks = 0;
  std::uint64_t removed_blocks = 0;  // evicted: the group's Device Removed events
  std::uint64_t pages_written = 0;
  std::uint64_t pages_verified = 0;
  std::uint64_t mismatches = 0;
  /// "kv": pages hold K/V in the group's page format (its own, or one small
  /// head of it when the pages in memory are smaller); "pattern": the page pattern.
  std::string check = "pattern";
  std::uint64_t attention_sequences = 0;  // decode attention checks over the group's pages
  std::uint64_t attention_mismatches = 0;
};

/// Counts each group's Stored and Removed blocks (events carry the group).
class GroupEventCounter final : public KvEventSink {
 public:
  explicit GroupEventCounter(std::size_t groups) : stored_(groups, 0), removed_(groups, 0) {}
  void publish(const KvEvent& event) override;
  std::uint64_t stored(std::size_t group) const { return stored_.at(group); }
  std::uint64_t removed(std::size_t group) const { return removed_.at(group); }

 private:
  std::vector<std::uint64_t> stored_;
  std::vector<std::uint64_t> removed_;
};

class GroupPageCheck {
 public:
  /// `manager` has groups; `pool` is its session's.
  GroupPageCheck(const g1::G1Manager& manager, memory::KvPool& pool, std::shared_ptr<GroupEventCounter> events);

  /// Tokens [from, to) of `sequence` were computed: each group's pages of the
  /// blocks they touch get their patterns (a block completed now gets its
  /// hash's). Returns the pages written.
  std::size_t write(g1::OwnerId owner, const ActiveSequence& sequence, std::size_t from, std::size_t to);
  /// The first `hit_tokens` tokens were prefix hits: each group's non-null
  /// pages of those blocks (every `sample_every`-th and the last one of each
  /// group; 1: all) are compared with their patterns. Returns the mismatched
  /// pages (the first one, for the report).
  std::vector<PageId> verify(g1::OwnerId owner, const ActiveSequence& sequence, std::size_t hit_tokens,
                             std::size_t sample_every);

  std::size_t pages_verified() const noexcept;
  /// The K/V fill of group `group`; null for a group checked by the page pattern.
  const GroupKvFill* kv_fill(std::size_t group) const noexcept { return kv_fills_[group].get(); }
  /// Adds one decode attention check's outcome to group `group`'s counts.
  void count_attention(std::size_t group, std::size_t sequences, std::size_t mismatches);
  /// Per group, with the manager's hit pages and the events' counts now.
  std::vector<GroupReplayCounts> counts() const;

 private:
  /// Tokens [from, to) of `group`'s table get their K/V (GroupKvFill).
  void fill_kv(GroupKvFill& fill, g1::OwnerId owner, const ActiveSequence& sequence, std::size_t group,
               std::size_t from, std::size_t to);

  const g1::G1Manager* manager_;
  memory::KvPool* pool_;
  std::shared_ptr<GroupEventCounter> events_;
  std::vector<GroupReplayCounts> counts_;
  std::vector<std::unique_ptr<GroupKvFill>> kv_fills_;  // by group
};

}  // namespace kvtier::replay
