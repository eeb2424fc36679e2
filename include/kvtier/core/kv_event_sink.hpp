#pragma once
#include <vector>

#include "kvtier/core/kv_event.hpp"

namespace kvtier {

/// Receives published KV events (a router client, a recorder, a log).
/// Implementations may throw; the publisher reports and ignores the error.
class KvEventSink {
 public:
  virtual ~KvEventSink() = default;
  virtual void publish(const KvEvent& event) = 0;
};

/// Keeps every event it receives, in order (tests, the script runner).
class RecordingEventSink final : public KvEventSink {
 public:
  void publish(const KvEvent& event) override { events_.push_back(event); }
  const std::vector<KvEvent>& events() const noexcept { return events_; }
  void clear() noexcept { events_.clear(); }

 private:
  std::vector<KvEvent> events_;
};

}  // namespace kvtier
