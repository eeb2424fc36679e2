#pragma once
// KV events on the wire routers already read: a ZMQ PUB socket sending
// vLLM's multipart messages (topic, 8-byte big-endian sequence number,
// msgpack KVEventBatch: kvtier/events/vllm_event_encoding.hpp), and a ROUTER
// replay socket holding the last `buffer_steps` batches, as vLLM's
// ZmqEventPublisher does since vLLM PR #45177 (2026-06): a request
// [identity, "", start_seq (8 bytes)] gets [identity, "", topic, seq, payload]
// for each buffered batch from start_seq on, then [identity, "", "", -1
// (8 bytes), ""]; the older answer without the topic frame is
// ReplayFormat::Pre45177. Every buffered batch is delivered (flow control:
// the replay waits for a slow DEALER up to `replay_send_timeout_ms`, never
// drops). A sink of the allocator: events collect into the open batch,
// flush() queues it for the sending thread; the queue is bounded and never
// blocks (a full queue drops the batch and counts it), so a slow subscriber
// never slows allocation.
#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kvtier/core/kv_event_sink.hpp"
#include "kvtier/events/vllm_event_encoding.hpp"

namespace kvtier::events {

/// The replay socket's answer frames (docs/events.md).
enum class ReplayFormat : std::uint8_t {
  Current,   ///< [topic, seq, payload] per batch, end ["", -1, ""] (vLLM PR #45177, vLLM >= 0.26)
  Pre45177,  ///< [seq, payload] per batch, end [-1, ""] (older vLLM)
};
const char* replay_format_name(ReplayFormat format) noexcept;
/// "current" or "pre-45177"; ConfigError otherwise.
ReplayFormat parse_replay_format(const std::string& name);

/// Whether the PUB socket binds its endpoint or connects to it.
enum class EndpointMode : std::uint8_t {
  Auto,  ///< as vLLM: bind a wildcard ('*'), ipc:// or inproc:// endpoint or a local host; connect to a remote one
  Bind,
  Connect,  ///< a router that binds its own SUB socket (llm-d's centralized mode)
};
const char* endpoint_mode_name(EndpointMode mode) noexcept;
/// "auto", "bind" or "connect"; ConfigError otherwise.
EndpointMode parse_endpoint_mode(const std::string& name);
/// What Auto does with `endpoint`: Bind or Connect.
EndpointMode resolve_endpoint_mode(const std::string& endpoint, EndpointMode mode);

struct ZmqPublisherConfig {
  std::string endpoint;           // PUB: "tcp://127.0.0.1:5557", "tcp://*:5557", "tcp://127.0.0.1:*", "ipc://..."
  std::string replay_endpoint{};  // ROUTER, always bound; empty: no replay socket
  std::string topic{};
  std::size_t buffer_steps = 10000;  // batches kept for replay
  int hwm = 100000;                  // the PUB socket's send high-water mark (messages)
  std::size_t max_queue = 100000;    // batches waiting for the sending thread
  std::uint32_t block_size = 16;     // BlockStored's block_size
  std::uint32_t data_parallel_rank = 0;
  ReplayFormat replay_format = ReplayFormat::Current;
  VllmWireFormat wire{};  // event encoding (map | array) and each tier's medium name
  EndpointMode endpoint_mode = EndpointMode::Auto;
  /// How long one replay answer may wait for a DEALER that does not read
  /// before that replay is abandoned (counted in replays_abandoned).
  int replay_send_timeout_ms = 10000;
};

struct ZmqPublisherStats {
  std::uint64_t events = 0;  // events received
  std::uint64_t batches_queued = 0;
  std::uint64_t batches_dropped = 0;  // the queue was full
  std::uint64_t events_dropped = 0;   // the events of those batches
  std::uint64_t batches_sent = 0;
  std::uint64_t replays_served = 0;
  std::uint64_t replays_abandoned = 0;  // the client stopped reading (or left) before the end marker
};

class ZmqEventPublisher final : public KvEventSink {
 public:
  /// Binds (or connects, EndpointMode) the sockets and starts the sending
  /// thread; ConfigError (with ZMQ's message) for an endpoint that cannot be
  /// bound or connected (a host that does not resolve) or a zero buffer or queue.
  explicit ZmqEventPublisher(ZmqPublisherConfig config);
  /// Sends what is queued, then closes (ZMQ lingers up to a second for
  /// messages a subscriber has not taken yet).
  ~ZmqEventPublisher() override;
  ZmqEventPublisher(const ZmqEventPublisher&) = delete;
  ZmqEventPublisher& operator=(const ZmqEventPublisher&) = delete;

  void publish(const KvEvent& event) override;
  /// Closes the open batch (if it holds events) and queues it, stamped now.
  void flush();
  /// The block size later BlockStored events report (a script learns it at init).
  void set_block_size(std::uint32_t block_size) noexcept { block_size_ = block_size; }
  /// Waits until the sending thread has sent every queued batch (tests).
  void drain();

  /// The addresses actually bound (a wildcard port resolved), or connected to.
  const std::string& endpoint() const noexcept { return bound_endpoint_; }
  /// Bind or Connect: what the PUB socket did with its endpoint.
  EndpointMode endpoint_mode() const noexcept { return mode_; }
  const std::string& replay_endpoint() const noexcept { return bound_replay_endpoint_; }
  ZmqPublisherStats stats() const;

 private:
  struct Batch {
    double timestamp_s = 0.0;
    std::uint32_t block_size = 0;
    std::vector<KvEvent> events;
  };
  void run();
  void send_batch(Batch batch);
  void serve_replay();

  ZmqPublisherConfig config_;
  void* context_ = nullptr;
  void* pub_ = nullptr;
  void* replay_ = nullptr;
  std::string bound_endpoint_;
  std::string bound_replay_endpoint_;
  EndpointMode mode_ = EndpointMode::Bind;
  std::vector<KvEvent> open_;  // the caller's thread only
  std::uint32_t block_size_;   // the caller's thread only

  mutable std::mutex mutex_;  // guards queue_, stats_, stopping_
  std::deque<Batch> queue_;
  ZmqPublisherStats stats_;
  bool stopping_ = false;
  bool sending_ = false;  // the thread holds a batch it has not sent yet

  // The sending thread's own.
  std::uint64_t next_sequence_ = 0;
  std::deque<std::pair<std::uint64_t, std::string>> sent_;  // replay buffer
  std::thread thread_;
};

}  // namespace kvtier::events
