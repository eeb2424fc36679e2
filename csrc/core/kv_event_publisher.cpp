#include "kvtier/core/kv_event_publisher.hpp"

#include <exception>
#include <iostream>

namespace kvtier {

void KvEventPublisher::attach(std::shared_ptr<KvEventSink> sink) {
  if (sink) sinks_.push_back(std::move(sink));
}

void KvEventPublisher::publish_stored(StorageTier tier, KvStored stored, std::optional<KvEventGroup> group) {
  if (stored.blocks.empty()) return;
  publish(tier, std::move(stored), std::move(group));
}

void KvEventPublisher::publish_removed(StorageTier tier, KvRemoved removed, std::optional<KvEventGroup> group) {
  if (removed.hashes.empty()) return;
  publish(tier, std::move(removed), std::move(group));
}

void KvEventPublisher::publish(StorageTier tier, std::variant<KvStored, KvRemoved> data,
                               std::optional<KvEventGroup> group) {
  if (sinks_.empty()) return;
  const KvEvent event{
      .id = next_id_++, .dp_rank = dp_rank_, .tier = tier, .data = std::move(data), .group = std::move(group)};
  for (const auto& sink : sinks_) {
    try {
      sink->publish(event);
    } catch (const std::exception& error) {
      std::cerr << "kvtier: KV event sink failed on event " << event.id << ": " << error.what() << '\n';
    } catch (...) {
      std::cerr << "kvtier: KV event sink failed on event " << event.id << '\n';
    }
  }
}

}  // namespace kvtier
