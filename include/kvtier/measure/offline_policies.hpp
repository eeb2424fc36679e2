#pragma once
// The offline figures every online cache policy is measured against
// (docs/policies.md), computed from the trace alone: the optimum (Belady on
// the prefix tree, with bypass), the ceiling (an unbounded cache) and a FIFO
// floor. One hit-rate definition for all of them: requests arrive one at a
// time in trace order; a request's hits are the longest prefix of its blocks
// resident when it arrives; afterwards all its blocks are resident until the
// policy evicts down to the capacity (the optimum may evict the request's own
// new blocks: bypass). A request whose hits do not count
// (PrefixTreeTrace::counted) only makes its blocks resident.
#include <cstddef>

#include "kvtier/measure/prefix_tree_trace.hpp"

namespace kvtier::measure {

struct PolicyHits {
  std::size_t hits = 0;           // blocks found in the resident prefix, over all requests
  std::size_t prompt_blocks = 0;  // blocks over all requests
  double rate() const noexcept {
    return prompt_blocks == 0 ? 0.0 : static_cast<double>(hits) / static_cast<double>(prompt_blocks);
  }
};

/// The most hits any policy of `capacity` blocks can have: after each request
/// it evicts the block whose next use is farthest (never used again first),
/// the deeper block on ties. A parent is used whenever its child is, so its
/// next use is never later: the resident set stays closed under parents and
/// every resident block of a request lies in its hit prefix, which makes
/// Belady's exchange argument hold for prefix hits too. A block a request that
/// does not count makes resident again before its next counted use is worth
/// nothing until then: it goes first. O(B log B).
PolicyHits belady_bound(const PrefixTreeTrace& trace, std::size_t capacity);

/// An unbounded cache: every block seen before is a hit.
PolicyHits unbounded_ceiling(const PrefixTreeTrace& trace);

/// Plain FIFO of first insertion, hits never refreshing a block, blind to the
/// tree (a parent may leave before its child): the floor a policy must beat.
PolicyHits fifo_floor(const PrefixTreeTrace& trace, std::size_t capacity);

}  // namespace kvtier::measure
