#pragma once
#include <algorithm>
#include <array>

#include "g1/eviction/leaf_priority_policy.hpp"

namespace kvtier::g1 {

/// ARC (Megiddo and Modha, FAST'03) on leaves: blocks seen once recently
/// (T1) and blocks seen again (T2), each in recency order, and a target size
/// for T1 that a ghost hit moves — up when a block evicted from T1 comes
/// back (recency would have kept it), down when one from T2 does. The victim
/// is T1's oldest leaf while T1 holds more than its target, else T2's.
/// Sizes count the inactive pool (an active block is not a candidate), and
/// the ghosts are the frame's bounded table.
class ArcEvictionPolicy final : public LeafPriorityPolicy {
 public:
  using LeafPriorityPolicy::LeafPriorityPolicy;
  /// T1's target size now (tests).
  std::uint64_t target() const noexcept { return target_; }

 private:
  static constexpr std::uint32_t kSeenOnce = 0;   // T1 / B1
  static constexpr std::uint32_t kSeenAgain = 1;  // T2 / B2
  Priority accessed(History& h, Access how, const Priority&, std::uint64_t) override {
    if (how == Access::Recalled) {
      const std::uint64_t b1 = std::max<std::uint64_t>(ghosts_[kSeenOnce], 1);
      const std::uint64_t b2 = std::max<std::uint64_t>(ghosts_[kSeenAgain], 1);
      if (h.state == kSeenOnce) {
        target_ = std::min<std::uint64_t>(capacity(), target_ + std::max<std::uint64_t>(1, b2 / b1));
      } else {
        target_ -= std::min(target_, std::max<std::uint64_t>(1, b1 / b2));
      }
    }
    h.state = how == Access::New ? kSeenOnce : kSeenAgain;
    return {h.state, h.last};
  }
  std::optional<std::uint64_t> preferred_class() const override {
    return resident_[kSeenOnce] > target_ ? kSeenOnce : kSeenAgain;
  }
  void entered(const Priority& p) override { ++resident_[p.first]; }
  void left(const Priority& p) override { --resident_[p.first]; }
  void ghost_added(const History& h) override { ++ghosts_[h.state]; }
  void ghost_dropped(const History& h) override { --ghosts_[h.state]; }

  std::uint64_t target_ = 0;
  std::array<std::uint64_t, 2> resident_{};
  std::array<std::uint64_t, 2> ghosts_{};
};

}  // namespace kvtier::g1
