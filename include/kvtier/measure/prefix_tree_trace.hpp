#pragma once
// A request trace as paths in its prefix tree, the one input every cache
// policy figure reads (docs/policies.md). Each entry of a request's
// `hash_ids` is one block — the last, partial one included — and a node of
// the tree: equal ids share their whole prefix, so an id has one parent.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvtier/replay/trace.hpp"

namespace kvtier::measure {

inline constexpr std::uint32_t kNoParentBlock = 0xFFFFFFFFU;

struct PrefixTreeTrace {
  /// Each request's blocks, root first, as dense block ids 0..unique_blocks()-1.
  std::vector<std::vector<std::uint32_t>> requests;
  /// Per dense block: its parent (kNoParentBlock at a root), its depth (0 at a
  /// root) and the trace's hash id it came from.
  std::vector<std::uint32_t> parent;
  std::vector<std::uint32_t> depth;
  std::vector<std::uint64_t> hash_id;
  /// Per request: whether its hits count. A request that does not count only
  /// makes its blocks resident, as a computation that was never a lookup does
  /// (a replay's prefill chunks: docs/replay.md "The bound"). Empty: every
  /// request counts.
  std::vector<bool> counted;

  bool counts(std::size_t request) const noexcept { return counted.empty() || counted[request]; }

  std::size_t unique_blocks() const noexcept { return parent.size(); }
  /// Blocks over all requests that count: the hit rate's denominator.
  std::size_t prompt_blocks() const noexcept;
  /// Blocks a request never needs beyond: the longest request.
  std::size_t longest_request() const noexcept;
};

/// The tree of these requests. ConfigError when the ids are not a prefix
/// tree: an id seen after two different parents (an id twice in one request
/// is one of those).
PrefixTreeTrace prefix_tree_trace(const std::vector<replay::TraceRequest>& requests);

/// A trace from paths of hash ids (tests, small examples); same checks.
PrefixTreeTrace prefix_tree_trace(const std::vector<std::vector<std::uint64_t>>& paths);

}  // namespace kvtier::measure
