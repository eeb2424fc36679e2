#pragma once
#include "g1/eviction/leaf_priority_policy.hpp"

namespace kvtier::g1 {

/// LRU-2 (O'Neil et al., SIGMOD'93) on leaves: the victim is the leaf whose
/// second-latest access is oldest, so a block seen once (no second access
/// remembered) goes before any block seen twice — second-sight admission —
/// and plain recency orders each class.
class Lru2EvictionPolicy final : public LeafPriorityPolicy {
 public:
  using LeafPriorityPolicy::LeafPriorityPolicy;

 private:
  Priority accessed(History& h, Access, const Priority&, std::uint64_t) override { return {h.second_last, h.last}; }
};

}  // namespace kvtier::g1
