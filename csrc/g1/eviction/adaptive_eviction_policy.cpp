#include "g1/eviction/adaptive_eviction_policy.hpp"

#include <algorithm>

namespace kvtier::g1 {

AdaptiveEvictionPolicy::AdaptiveEvictionPolicy(std::uint32_t capacity, std::uint32_t history_capacities)
    : LeafPriorityPolicy(capacity, history_capacities),
      shadow_capacity_(std::max<std::size_t>(capacity / kSampleOneIn, 1)) {}

LeafPriorityPolicy::Priority AdaptiveEvictionPolicy::accessed(History& h, Access, const Priority&,
                                                              std::uint64_t block) {
  observe(h, block);
  return {std::min(h.count, cap()), h.last};
}

void AdaptiveEvictionPolicy::observe(const History& h, std::uint64_t block) {
  // A fixed mix of the block hash picks the sample: the same blocks every time.
  const std::uint64_t mixed = (block ^ (block >> 29)) * 0xBF58476D1CE4E5B9ULL;
  if ((mixed >> 60) % kSampleOneIn != 0) return;
  for (std::size_t s = 0; s < shadows_.size(); ++s) {
    Shadow& shadow = shadows_[s];
    if (const auto it = shadow.where.find(block); it != shadow.where.end()) {
      shadow.hits += 1.0;
      shadow.order.erase({it->second.first, it->second.second, block});
    }
    const std::uint64_t cls = std::min(h.count, kCaps[s]);
    shadow.where[block] = {cls, h.last};
    shadow.order.emplace(cls, h.last, block);
    while (shadow.where.size() > shadow_capacity_) {
      const auto victim = shadow.order.begin();
      shadow.where.erase(std::get<2>(*victim));
      shadow.order.erase(victim);
    }
  }
  if (++sampled_ % std::max<std::uint64_t>(capacity(), 1) == 0) {
    for (Shadow& shadow : shadows_) shadow.hits *= 0.5;
  }
  std::size_t best = leader_;
  for (std::size_t s = 0; s < shadows_.size(); ++s) {
    if (shadows_[s].hits > kSwitchMargin * shadows_[best].hits + 1.0) best = s;
  }
  if (best != leader_) {  // the blocks ranked under the old cap are ranked anew
    leader_ = best;
    rerank_all([cap = kCaps[best]](const History& ranked, const Priority& was) {
      return Priority{std::min(ranked.count, cap), was.second};
    });
  }
}

}  // namespace kvtier::g1
