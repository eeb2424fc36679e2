#pragma once
// A circuit breaker per Redis node, shared by every connection of the
// process to it (each instance's lookups and worker): a node that failed
// (no answer within the timeout, refused, reset) is not asked again until a
// back-off has passed — 1x, then 2x, 4x, ... the retry interval, at most
// kMaxBackoff — and then by one caller alone (the probe) while the others
// miss at once. So a stalled store costs the scheduler one timeout per
// back-off period, not one per lookup per instance (docs/shared-tier.md,
// "A store that stops answering").
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>

#include "kvtier/tiers/shared/redis_url.hpp"

namespace kvtier::tiers::shared {

class NodeBreaker {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kMaxBackoff{30000};

  /// The process's breaker for `endpoint` (made on first use).
  static std::shared_ptr<NodeBreaker> of(const RedisEndpoint& endpoint);

  /// Whether a caller may talk to the node now: yes while it is healthy; no
  /// while its back-off runs; after it, yes for one caller (the probe) until
  /// that caller reports. Every yes must be followed by succeeded() or failed().
  bool allow(Clock::time_point now);
  void succeeded();
  /// Opens the breaker: the back-off starts at `retry_after` and doubles with each failure in a row.
  void failed(Clock::time_point now, std::chrono::milliseconds retry_after);
  /// A caller that was allowed and sent nothing (its deadline passed first).
  void abandon();
  /// Failures in a row (0: healthy).
  std::uint32_t consecutive_failures() const;

 private:
  mutable std::mutex mutex_;
  std::uint32_t failures_ = 0;
  Clock::time_point open_until_{};
  bool probing_ = false;
};

}  // namespace kvtier::tiers::shared
