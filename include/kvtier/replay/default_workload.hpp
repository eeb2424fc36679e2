#pragma once
// The built-in workload `kvtier replay` runs without --trace: multi-turn
// conversations over a few shared system prompts, in the trace format (so
// the same reader-free path replays it), seeded and small enough to replay in
// seconds on a CPU.
#include <cstdint>
#include <vector>

#include "kvtier/replay/trace.hpp"

namespace kvtier::replay {

/// 48 conversations of 4 turns over 4 system prompts of 2 trace blocks: each
/// turn's prompt is the system prompt, the earlier turns and one new 512-token
/// block (the previous answer and the new question); conversations start a
/// random 0–400 ms apart, their turns 2 s apart; 32 output tokens each.
std::vector<TraceRequest> default_workload(std::uint64_t seed);

}  // namespace kvtier::replay
