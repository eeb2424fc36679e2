#pragma once
// `--kv-events` and its companions: the replay's KV events on a ZMQ PUB socket
// in vLLM's wire format (kvtier/events/zmq_event_publisher.hpp), when kvtier
// was built with libzmq and msgpack-cxx.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "kvtier/replay/replayer.hpp"

namespace kvtier::cli {

struct KvEventsOptions {
  std::string endpoint;  // empty: no publisher
  std::string replay_endpoint;
  std::string topic = "kv-events";
  std::size_t buffer_steps = 10000;
  int hwm = 100000;
  std::size_t max_queue = 100000;
};

void add_kv_events_options(CLI::App& command, KvEventsOptions& options);

/// A publisher attached to a replay; its line for the report.
class AttachedKvEvents {
 public:
  virtual ~AttachedKvEvents() = default;
  /// Sends what is queued; "KV events: ..." with the counts.
  virtual std::string finish() = 0;
};

/// Attaches a publisher to `config` (a sink, flushed at each step's end, token
/// ids on); nullptr when no endpoint was given. ConfigError for an endpoint
/// that cannot be bound, or when kvtier was built without ZMQ.
std::unique_ptr<AttachedKvEvents> attach_kv_events(const KvEventsOptions& options, replay::ReplayConfig& config);

}  // namespace kvtier::cli
