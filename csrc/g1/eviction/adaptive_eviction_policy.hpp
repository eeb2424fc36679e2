#pragma once
#include <array>
#include <cstdint>
#include <set>
#include <tuple>
#include <unordered_map>

#include "g1/eviction/leaf_priority_policy.hpp"

namespace kvtier::g1 {

/// kvtier's own policy (docs/policies.md): frequency classes on leaves — a
/// block's class is its remembered access count capped at `cap`, recency
/// orders each class — with the cap chosen online between 1 (recency: LRU)
/// and 2 (second sight: a block seen twice outranks every block seen once).
/// Blocks whose hash falls in a 1/16 sample also run through one small
/// shadow cache per cap (capacity/16 blocks each, hits counted per block);
/// the cap whose shadow hit most over the recent past (hits halve every
/// `capacity` sampled accesses) ranks the pool, re-ranked when it changes.
class AdaptiveEvictionPolicy final : public LeafPriorityPolicy {
 public:
  explicit AdaptiveEvictionPolicy(std::uint32_t capacity, std::uint32_t history_capacities = 2);
  static constexpr std::array<std::uint64_t, 2> kCaps{1, 2};
  /// The cap ranking accesses now (tests).
  std::uint64_t cap() const noexcept { return kCaps[leader_]; }

 private:
  static constexpr std::uint64_t kSampleOneIn = 16;
  /// A challenger leads once it beats the leader by a tenth (and one hit):
  /// every change re-ranks the whole pool.
  static constexpr double kSwitchMargin = 1.1;
  struct Shadow {
    std::set<std::tuple<std::uint64_t, std::uint64_t, std::uint64_t>> order;  // (class, last, block)
    std::unordered_map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> where;
    double hits = 0.0;
  };
  Priority accessed(History& h, Access how, const Priority& previous, std::uint64_t block) override;
  void observe(const History& h, std::uint64_t block);

  std::array<Shadow, kCaps.size()> shadows_;
  std::size_t shadow_capacity_;
  std::uint64_t sampled_ = 0;
  std::size_t leader_ = 1;  // cap 2 until the shadows have spoken
};

}  // namespace kvtier::g1
