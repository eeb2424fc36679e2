#pragma once
// Counts the blocks each tier stored and removed, from the manager's KV
// events: the evictions and arrivals of every tier, whichever front door runs
// the manager. Offload completions may publish from another call's thread,
// so the counts are atomics.
#include <array>
#include <atomic>
#include <cstdint>

#include "kvtier/core/kv_event_sink.hpp"
#include "kvtier/metrics/kv_metrics.hpp"

namespace kvtier::metrics {

class TierEventCounter final : public KvEventSink {
 public:
  void publish(const KvEvent& event) override;
  /// Sets each tier's stored_blocks and evicted_blocks.
  void add_to(KvMetrics& out) const;
  std::uint64_t stored(Tier tier) const noexcept { return stored_[index(tier)].load(std::memory_order_relaxed); }
  std::uint64_t removed(Tier tier) const noexcept { return removed_[index(tier)].load(std::memory_order_relaxed); }

 private:
  static std::size_t index(Tier tier) noexcept { return static_cast<std::size_t>(tier); }
  std::array<std::atomic<std::uint64_t>, kTiers.size()> stored_{};
  std::array<std::atomic<std::uint64_t>, kTiers.size()> removed_{};
};

}  // namespace kvtier::metrics
