#include "kvtier/metrics/tier_event_counter.hpp"

#include <variant>

namespace kvtier::metrics {

void TierEventCounter::publish(const KvEvent& event) {
  const std::size_t tier = index(event.tier == StorageTier::Device       ? Tier::G1
                                 : event.tier == StorageTier::HostPinned ? Tier::G2
                                 : event.tier == StorageTier::Disk       ? Tier::G3
                                                                         : Tier::G4);
  if (const auto* removed = std::get_if<KvRemoved>(&event.data)) {
    removed_[tier].fetch_add(removed->hashes.size(), std::memory_order_relaxed);
  } else {
    stored_[tier].fetch_add(std::get<KvStored>(event.data).blocks.size(), std::memory_order_relaxed);
  }
}

void TierEventCounter::add_to(KvMetrics& out) const {
  for (const Tier tier : kTiers) {
    out.tier(tier).stored_blocks = stored(tier);
    out.tier(tier).evicted_blocks = removed(tier);
  }
}

}  // namespace kvtier::metrics
