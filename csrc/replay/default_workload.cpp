#include "kvtier/replay/default_workload.hpp"

#include <algorithm>
#include <random>

namespace kvtier::replay {

std::vector<TraceRequest> default_workload(std::uint64_t seed) {
  constexpr std::uint64_t kSystemPrompts = 4;
  constexpr std::uint64_t kSystemBlocks = 2;
  constexpr int kConversations = 48;
  constexpr int kTurns = 4;
  std::mt19937_64 rng(seed);
  std::vector<TraceRequest> requests;
  std::uint64_t next_id = kSystemPrompts * kSystemBlocks;  // ids below are the system prompts'
  double start = 0.0;
  for (int c = 0; c < kConversations; ++c) {
    start += static_cast<double>(rng() % 401);
    const std::uint64_t system = rng() % kSystemPrompts;
    std::vector<std::uint64_t> history;
    for (std::uint64_t b = 0; b < kSystemBlocks; ++b) history.push_back(system * kSystemBlocks + b);
    for (int turn = 0; turn < kTurns; ++turn) {
      history.push_back(next_id++);
      const std::size_t last = 64 + rng() % (kTraceBlockTokens - 64);  // the new block is partly filled
      requests.push_back(TraceRequest{.timestamp_ms = start + 2000.0 * turn,
                                      .input_length = (history.size() - 1) * kTraceBlockTokens + last,
                                      .output_length = 32,
                                      .hash_ids = history});
    }
  }
  std::stable_sort(requests.begin(), requests.end(),
                   [](const TraceRequest& a, const TraceRequest& b) { return a.timestamp_ms < b.timestamp_ms; });
  return requests;
}

}  // namespace kvtier::replay
