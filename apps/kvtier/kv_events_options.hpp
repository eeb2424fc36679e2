#pragma once
// `--kv-events` and its companions, shared by `kvtier replay` and `kvtier
// script`: KV events on a ZMQ PUB socket in vLLM's wire format
// (kvtier/events/zmq_event_publisher.hpp), when kvtier was built with libzmq
// and msgpack-cxx.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvtier/core/kv_event_sink.hpp"

namespace kvtier::cli {

struct KvEventsOptions {
  std::string endpoint;  // empty: no publisher
  std::string replay_endpoint;
  std::string topic = "kv-events";
  std::size_t buffer_steps = 10000;
  int hwm = 100000;
  std::size_t max_queue = 100000;
  double linger_s = 0.0;                  // after the run, keep serving replay requests this long
  std::string replay_format = "current";  // current | pre-45177 (vLLM PR #45177)
  std::string mode = "auto";              // auto | bind | connect: what the PUB socket does with --kv-events
  std::string encoding = "map";           // map | array: vLLM's current tagged maps or its older tagged arrays
  std::string medium_g1 = "GPU";
  std::string medium_g2 = "CPU_PINNED";
  std::string medium_g3 = "DISK";
  std::string medium_g4 = "EXTERNAL";
};

void add_kv_events_options(CLI::App& command, KvEventsOptions& options);

/// An open publisher: a sink for the manager, a batch boundary, and its end.
class KvEventsOutput {
 public:
  virtual ~KvEventsOutput() = default;
  virtual std::shared_ptr<KvEventSink> sink() = 0;
  /// Ends the current batch (one per scheduler step or script line).
  virtual void flush() = 0;
  virtual void set_block_size(std::uint32_t block_size) = 0;
  /// Sends what is queued, keeps the sockets up for --kv-events-linger, and
  /// says what went out ("KV events: ...").
  virtual std::string finish() = 0;
  /// Events received so far, and those lost with the batches a full queue dropped.
  virtual std::uint64_t events_received() const = 0;
  virtual std::uint64_t events_dropped() const = 0;
};

/// nullptr when no endpoint was given. ConfigError for an endpoint that cannot
/// be bound, a replay endpoint without an endpoint, or a kvtier built without ZMQ.
std::unique_ptr<KvEventsOutput> open_kv_events(const KvEventsOptions& options, std::uint32_t block_size,
                                               std::uint32_t data_parallel_rank);

/// One publisher per data-parallel rank first_rank .. first_rank + count - 1,
/// each on the endpoints offset by its rank as vLLM's DP engines offset them
/// (events/dp_rank_endpoint.hpp). Empty when no endpoint was given; errors as
/// open_kv_events, and a port past 65535 once offset.
std::vector<std::unique_ptr<KvEventsOutput>> open_kv_events_per_rank(const KvEventsOptions& options,
                                                                     std::uint32_t block_size, std::uint32_t first_rank,
                                                                     std::uint32_t count);
/// finish() of every output at once (their lingers overlap), the lines in order.
std::string finish_all(std::vector<std::unique_ptr<KvEventsOutput>>& outputs);

}  // namespace kvtier::cli
