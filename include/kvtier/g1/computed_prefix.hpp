#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvtier/core/strong_id.hpp"

namespace kvtier::g1 {

/// vLLM's `get_computed_blocks` result, which `allocate_slots` takes: the
/// resident leading run of a request's full blocks and, where the backend
/// addresses copies by hash (native), the pages holding them when probed.
/// Handed to G1Manager::process_for_request, the Use pins those pages
/// without looking the run up again — unless the backend's hash index has
/// changed since the probe, in which case it looks the run up as a reuse
/// count would (same pages, same errors). Reuse one across requests: probing
/// into it allocates nothing once its vector has grown.
struct ComputedPrefix {
  std::size_t blocks = 0;        // full blocks resident from the first on
  std::vector<PageId> pages;     // native: the copy each of them is on; otherwise empty
  std::uint64_t generation = 0;  // the backend's index generation at the probe
};

}  // namespace kvtier::g1
