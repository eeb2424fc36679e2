#pragma once
#include <algorithm>

#include "g1/eviction/leaf_priority_policy.hpp"

namespace kvtier::g1 {

/// LFU with dynamic aging (GDSF with unit size and cost; Arlitt et al. 2000)
/// on leaves: a block's key is the cache age at its latest access plus its
/// remembered access count, and the age rises to each victim's key, so a
/// block that was frequent long ago does not stay forever. Recency breaks ties.
class LfuDaEvictionPolicy final : public LeafPriorityPolicy {
 public:
  using LeafPriorityPolicy::LeafPriorityPolicy;

 private:
  Priority accessed(History& h, Access, const Priority&, std::uint64_t) override {
    return {age_ + h.frequency, h.last};
  }
  void evicted(const History&, const Priority& victim) override { age_ = std::max(age_, victim.first); }
  std::uint64_t age_ = 0;
};

}  // namespace kvtier::g1
