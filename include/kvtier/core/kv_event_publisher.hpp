#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "kvtier/core/kv_event_sink.hpp"

namespace kvtier {

/// Numbers and fans out one manager's events. Ids count per manager from 0 and
/// advance only when an event is actually handed to at least one sink; with
/// no sink attached nothing is published. A sink that throws is reported on
/// stderr and ignored (the manager's state never depends on a sink).
class KvEventPublisher {
 public:
  explicit KvEventPublisher(std::uint32_t dp_rank = 0) : dp_rank_(dp_rank) {}

  void attach(std::shared_ptr<KvEventSink> sink);
  bool has_sinks() const noexcept { return !sinks_.empty(); }
  std::uint32_t dp_rank() const noexcept { return dp_rank_; }
  std::uint64_t next_event_id() const noexcept { return next_id_; }

  /// Empty runs are never published. `group`: the KV cache group they belong
  /// to, for a manager with groups only.
  void publish_stored(StorageTier tier, KvStored stored, std::optional<KvEventGroup> group = std::nullopt);
  void publish_removed(StorageTier tier, KvRemoved removed, std::optional<KvEventGroup> group = std::nullopt);

 private:
  void publish(StorageTier tier, std::variant<KvStored, KvRemoved> data, std::optional<KvEventGroup> group);

  std::uint32_t dp_rank_;
  std::uint64_t next_id_ = 0;
  std::vector<std::shared_ptr<KvEventSink>> sinks_;
};

}  // namespace kvtier
