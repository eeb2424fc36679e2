#pragma once
#include <algorithm>

#include "g1/eviction/leaf_priority_policy.hpp"

namespace kvtier::g1 {

/// S3-FIFO (Yang et al., SOSP'23) on leaves: a small FIFO queue that new
/// blocks enter and a main FIFO queue, each in order of entry; a hit only
/// raises a block's frequency (at most 3). While the small queue holds a
/// tenth of the capacity or more, its oldest leaf is the candidate: a block
/// hit while there moves to the main queue, one never hit leaves (its
/// history stays in the ghost table). Otherwise the main queue's oldest leaf:
/// re-queued at the tail with one frequency less while it has any. A block
/// back from the ghost table enters the main queue directly.
class S3FifoEvictionPolicy final : public LeafPriorityPolicy {
 public:
  using LeafPriorityPolicy::LeafPriorityPolicy;

 private:
  static constexpr std::uint32_t kSmall = 0;
  static constexpr std::uint32_t kMain = 1;
  static constexpr std::uint32_t kMaxFrequency = 3;
  Priority accessed(History& h, Access how, const Priority& previous, std::uint64_t) override {
    if (how == Access::Again) {  // a hit does not move the block
      h.credit = std::min(h.credit + 1, kMaxFrequency);
      return previous;
    }
    h.state = how == Access::Recalled ? kMain : kSmall;
    h.credit = 0;
    h.mark = h.last;
    return {h.state, h.mark};
  }
  Priority refreshed(const History&, const Priority& previous) override { return previous; }  // FIFO: entry order
  std::optional<std::uint64_t> preferred_class() const override {
    return small_ * 10 >= std::max<std::uint64_t>(capacity(), 1) ? kSmall : kMain;
  }
  bool second_chance(History& h, Priority& p) override {
    if (h.credit == 0) return false;
    if (h.state == kSmall) {
      h.state = kMain;
      h.credit = 0;
    } else {
      --h.credit;
    }
    h.mark = tick();
    p = {h.state, h.mark};
    return true;
  }
  void entered(const Priority& p) override { small_ += p.first == kSmall ? 1 : 0; }
  void left(const Priority& p) override { small_ -= p.first == kSmall ? 1 : 0; }

  std::uint64_t small_ = 0;  // inactive blocks in the small queue
};

}  // namespace kvtier::g1
