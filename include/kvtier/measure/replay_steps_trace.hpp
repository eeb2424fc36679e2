#pragma once
// A replay's lookups and computations (replay::PrefixStep) as a prefix-tree
// trace, so that the offline optimum is computed on the replay's own blocks,
// in the order it made them, with the same hits counted (docs/replay.md
// "The bound").
#include <cstddef>
#include <vector>

#include "kvtier/measure/prefix_tree_trace.hpp"
#include "kvtier/replay/replayer.hpp"
#include "kvtier/replay/trace.hpp"

namespace kvtier::measure {

/// Each step becomes one request of the trace: the first `blocks` blocks of
/// `block_tokens` tokens (a divisor of the trace's 512) of its request's
/// prompt, counted when the step is. Block j of a prompt is its tokens
/// [j * block_tokens, (j + 1) * block_tokens): the same block in every request
/// whose ids lead to it, as the replay's hashes make it. ConfigError when
/// `block_tokens` does not divide 512 or a step names no request.
PrefixTreeTrace replay_steps_trace(const std::vector<replay::TraceRequest>& requests,
                                   const std::vector<replay::PrefixStep>& steps, std::size_t block_tokens);

}  // namespace kvtier::measure
