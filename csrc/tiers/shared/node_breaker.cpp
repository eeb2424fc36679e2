#include "kvtier/tiers/shared/node_breaker.hpp"

#include <algorithm>
#include <map>
#include <string>

namespace kvtier::tiers::shared {

std::shared_ptr<NodeBreaker> NodeBreaker::of(const RedisEndpoint& endpoint) {
  static std::mutex registry_mutex;
  static std::map<std::string, std::weak_ptr<NodeBreaker>> registry;
  std::lock_guard lock(registry_mutex);
  std::weak_ptr<NodeBreaker>& slot = registry[endpoint.to_string()];
  std::shared_ptr<NodeBreaker> breaker = slot.lock();
  if (!breaker) {
    breaker = std::make_shared<NodeBreaker>();
    slot = breaker;
  }
  return breaker;
}

bool NodeBreaker::allow(Clock::time_point now) {
  std::lock_guard lock(mutex_);
  if (failures_ == 0) return true;
  if (now < open_until_ || probing_) return false;
  probing_ = true;
  return true;
}

void NodeBreaker::succeeded() {
  std::lock_guard lock(mutex_);
  failures_ = 0;
  probing_ = false;
}

void NodeBreaker::failed(Clock::time_point now, std::chrono::milliseconds retry_after) {
  std::lock_guard lock(mutex_);
  const std::uint32_t doublings = std::min<std::uint32_t>(failures_, 16);
  ++failures_;
  probing_ = false;
  const auto backoff = std::min<std::chrono::milliseconds>(retry_after * (1LL << doublings), kMaxBackoff);
  open_until_ = now + std::max(backoff, std::chrono::milliseconds(1));
}

void NodeBreaker::abandon() {
  std::lock_guard lock(mutex_);
  probing_ = false;
}

std::uint32_t NodeBreaker::consecutive_failures() const {
  std::lock_guard lock(mutex_);
  return failures_;
}

}  // namespace kvtier::tiers::shared
