#pragma once
// How many tokens one scheduler step prefills for a request. A model with a
// Mamba group in `align` mode caches only the states a step lands on, so its
// chunks end on the block size (vLLM's Scheduler._mamba_block_aligned_split):
// a chunk short of the prompt's last aligned position is cut to a multiple
// of the unit, one that would pass it stops on it, and the prompt's last
// few tokens follow; a request with generated tokens (recomputing after a
// preemption) is not aligned.
#include <cstddef>

namespace kvtier::replay {

/// The tokens after `computed` to prefill with `budget` tokens left, for a
/// sequence of `length` tokens whose first `prompt` are its prompt;
/// `align_unit` 0: no alignment. 0 means none fits now: the request waits
/// for a step with more budget.
std::size_t prefill_chunk(std::size_t computed, std::size_t length, std::size_t prompt, std::size_t budget,
                          std::size_t align_unit);

}  // namespace kvtier::replay
