#include "kvtier/measure/hybrid_cycle.hpp"

#include <deque>
#include <memory>

#include "kvtier/core/active_sequence.hpp"

namespace kvtier::measure {
namespace {

/// The stream's prompts as sequences, built outside the timing.
std::vector<ActiveSequence> sequences_of(const RequestStream& s) {
  std::vector<ActiveSequence> out;
  out.reserve(s.requests.size());
  for (const StreamRequest& r : s.requests) {
    out.emplace_back(r.tokens, ActiveSequenceConfig{.block_size = s.block_size, .seed = 0});
  }
  return out;
}

bool replay_through_groups(std::vector<ActiveSequence>& sequences, std::size_t live_limit, g1::G1Manager& manager) {
  std::deque<g1::OwnerId> live;
  for (std::size_t i = 0; i < sequences.size(); ++i) {
    if (live.size() == live_limit) {
      if (manager.has_owner(live.front())) manager.free_slots(live.front());
      live.pop_front();
    }
    const g1::OwnerId owner(i + 1);
    live.push_back(owner);
    ActiveSequence& sequence = sequences[i];
    if (sequence.len() == 0) continue;
    const std::size_t hit = manager.get_prefill_cost(sequence).cached_tokens;  // the scheduler's probe
    if (!manager.allocate_slots(owner, sequence, sequence.len(), hit).is_ready()) return false;
    manager.finalize_computed_prefix(owner, 0, sequence.len(), &sequence);
    manager.begin_step();
  }
  return true;
}

}  // namespace

std::vector<GroupSpec> full_and_sliding_groups() {
  const GroupSpec full{.kind = GroupKind::FullAttention, .layers = 1, .kv_heads = 8, .head_dim = 64};
  GroupSpec sliding = full;
  sliding.kind = GroupKind::SlidingWindow;
  sliding.sliding_window = 128;
  return {full, sliding};
}

AllocatorCycleResult measure_hybrid_cycle(const RequestStream& s, const std::vector<GroupSpec>& groups,
                                          std::size_t rounds) {
  std::vector<ActiveSequence> sequences;  // each round's own, built before its timing starts
  return measure_cycle(
      s, "native/hybrid", rounds,
      [&](std::shared_ptr<KvEventSink> sink) {
        sequences = sequences_of(s);
        return std::make_unique<g1::G1Manager>(
            g1::G1ManagerConfig{.capacity = s.pages, .block_size = s.block_size, .groups = groups},
            std::vector<std::shared_ptr<KvEventSink>>{std::move(sink)});
      },
      [&](g1::G1Manager& manager) { return replay_through_groups(sequences, s.live, manager); });
}

}  // namespace kvtier::measure
