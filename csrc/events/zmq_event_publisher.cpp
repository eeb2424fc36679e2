#include "kvtier/events/zmq_event_publisher.hpp"

#include <netdb.h>
#include <sys/socket.h>
#include <zmq.h>

#include <array>
#include <chrono>
#include <cstring>
#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/events/vllm_event_encoding.hpp"

namespace kvtier::events {
namespace {

std::array<char, 8> big_endian(std::int64_t value) {
  std::array<char, 8> bytes{};
  const auto bits = static_cast<std::uint64_t>(value);
  for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<char>(bits >> (8 * (7 - i)));
  return bytes;
}

/// A tcp endpoint's port must be a port: ZMQ itself reads "70000" as 70000 mod 65536.
void check_tcp_port(const std::string& endpoint, const char* what) {
  if (endpoint.rfind("tcp://", 0) != 0) return;  // ipc://, inproc://: no port
  const std::size_t colon = endpoint.rfind(':');
  const std::string port = colon == std::string::npos || colon < 6 ? "" : endpoint.substr(colon + 1);
  if (port == "*") return;
  const bool digits = !port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || std::stoul(port) > 65535) {
    throw ConfigError(std::string("the ") + what + " endpoint '" + endpoint +
                      "' needs a port in 0-65535 or * (tcp://HOST:PORT)");
  }
}

/// The HOST of tcp://HOST:PORT (brackets of an IPv6 literal kept); empty for other transports.
std::string tcp_host(const std::string& endpoint) {
  if (endpoint.rfind("tcp://", 0) != 0) return "";
  const std::size_t colon = endpoint.rfind(':');
  return colon == std::string::npos || colon < 6 ? endpoint.substr(6) : endpoint.substr(6, colon - 6);
}

/// Connects `socket`; ConfigError for a host that does not resolve (ZMQ would
/// retry it silently forever) or ZMQ's refusal.
std::string connect_socket(void* socket, const std::string& endpoint, const char* what) {
  check_tcp_port(endpoint, what);
  std::string host = tcp_host(endpoint);
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (!host.empty()) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int status = getaddrinfo(host.c_str(), nullptr, &hints, &found);
    if (status != 0) {
      throw ConfigError(std::string("cannot connect the ") + what + " socket to '" + endpoint + "': host '" + host +
                        "' does not resolve (" + gai_strerror(status) + ")");
    }
    freeaddrinfo(found);
  }
  if (zmq_connect(socket, endpoint.c_str()) != 0) {
    throw ConfigError(std::string("cannot connect the ") + what + " socket to '" + endpoint +
                      "': " + zmq_strerror(zmq_errno()));
  }
  return endpoint;
}

/// Binds `socket`; the address bound, or ConfigError with ZMQ's reason.
std::string bind_socket(void* socket, const std::string& endpoint, const char* what) {
  check_tcp_port(endpoint, what);
  if (zmq_bind(socket, endpoint.c_str()) != 0) {
    throw ConfigError(std::string("cannot bind the ") + what + " socket to '" + endpoint +
                      "': " + zmq_strerror(zmq_errno()));
  }
  std::array<char, 256> bound{};
  std::size_t size = bound.size();
  zmq_getsockopt(socket, ZMQ_LAST_ENDPOINT, bound.data(), &size);
  return std::string(bound.data());
}

/// Sends frames as one multipart message; false if ZMQ refused it.
bool send_frames(void* socket, std::initializer_list<std::pair<const void*, std::size_t>> frames, int flags) {
  std::size_t i = 0;
  for (const auto& [data, size] : frames) {
    const int more = ++i < frames.size() ? ZMQ_SNDMORE : 0;
    if (zmq_send(socket, data, size, flags | more) < 0) return false;
  }
  return true;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

const char* replay_format_name(ReplayFormat format) noexcept {
  return format == ReplayFormat::Current ? "current" : "pre-45177";
}

ReplayFormat parse_replay_format(const std::string& name) {
  if (name == "current") return ReplayFormat::Current;
  if (name == "pre-45177") return ReplayFormat::Pre45177;
  throw ConfigError("replay format must be current or pre-45177, not '" + name + "'");
}

const char* endpoint_mode_name(EndpointMode mode) noexcept {
  switch (mode) {
    case EndpointMode::Auto:
      return "auto";
    case EndpointMode::Bind:
      return "bind";
    case EndpointMode::Connect:
      return "connect";
  }
  return "?";
}

EndpointMode parse_endpoint_mode(const std::string& name) {
  for (const EndpointMode mode : {EndpointMode::Auto, EndpointMode::Bind, EndpointMode::Connect}) {
    if (name == endpoint_mode_name(mode)) return mode;
  }
  throw ConfigError("endpoint mode must be auto, bind or connect, not '" + name + "'");
}

EndpointMode resolve_endpoint_mode(const std::string& endpoint, EndpointMode mode) {
  if (mode != EndpointMode::Auto) return mode;
  // vLLM binds a wildcard, ipc:// and inproc:// and connects otherwise; a
  // loopback host is bound too (a router on this machine connects to it).
  if (endpoint.find('*') != std::string::npos || endpoint.find("::") != std::string::npos ||
      endpoint.rfind("tcp://", 0) != 0) {
    return EndpointMode::Bind;
  }
  const std::string host = tcp_host(endpoint);
  const bool local = host == "localhost" || host.rfind("127.", 0) == 0 || host == "0.0.0.0" || host == "[::1]";
  return local ? EndpointMode::Bind : EndpointMode::Connect;
}

ZmqEventPublisher::ZmqEventPublisher(ZmqPublisherConfig config)
    : config_(std::move(config)), block_size_(config_.block_size) {
  if (config_.endpoint.empty()) throw ConfigError("the KV event endpoint is empty");
  if (config_.buffer_steps == 0 || config_.max_queue == 0)
    throw ConfigError("the KV event buffer and queue must hold at least one batch");
  if (config_.hwm < 0) throw ConfigError("the high-water mark must not be negative");
  if (config_.replay_send_timeout_ms < 1) throw ConfigError("the replay send timeout must be at least 1 ms");
  if (config_.wire.device_medium.empty() || config_.wire.host_medium.empty() || config_.wire.disk_medium.empty() ||
      config_.wire.external_medium.empty()) {
    throw ConfigError("a KV event medium name must not be empty");
  }
  mode_ = resolve_endpoint_mode(config_.endpoint, config_.endpoint_mode);
  context_ = zmq_ctx_new();
  if (context_ == nullptr) throw ConfigError(std::string("cannot create a ZMQ context: ") + zmq_strerror(zmq_errno()));
  try {
    pub_ = zmq_socket(context_, ZMQ_PUB);
    if (pub_ == nullptr)
      throw ConfigError(std::string("cannot create the KV event socket: ") + zmq_strerror(zmq_errno()));
    zmq_setsockopt(pub_, ZMQ_SNDHWM, &config_.hwm, sizeof config_.hwm);
    const int linger = 1000;  // a closing publisher gives queued messages a second
    zmq_setsockopt(pub_, ZMQ_LINGER, &linger, sizeof linger);
    bound_endpoint_ = mode_ == EndpointMode::Bind ? bind_socket(pub_, config_.endpoint, "KV event")
                                                  : connect_socket(pub_, config_.endpoint, "KV event");
    if (!config_.replay_endpoint.empty()) {
      replay_ = zmq_socket(context_, ZMQ_ROUTER);
      if (replay_ == nullptr) {
        throw ConfigError(std::string("cannot create the KV event replay socket: ") + zmq_strerror(zmq_errno()));
      }
      const int no_linger = 0;
      zmq_setsockopt(replay_, ZMQ_LINGER, &no_linger, sizeof no_linger);
      // Flow control, not drops: a full pipe makes a send wait (up to the
      // timeout) instead of ROUTER's silent discard; a gone client is an error.
      const int mandatory = 1;
      zmq_setsockopt(replay_, ZMQ_ROUTER_MANDATORY, &mandatory, sizeof mandatory);
      zmq_setsockopt(replay_, ZMQ_SNDTIMEO, &config_.replay_send_timeout_ms, sizeof config_.replay_send_timeout_ms);
      bound_replay_endpoint_ = bind_socket(replay_, config_.replay_endpoint, "KV event replay");
    }
  } catch (...) {
    if (replay_ != nullptr) zmq_close(replay_);
    if (pub_ != nullptr) zmq_close(pub_);
    zmq_ctx_term(context_);
    throw;
  }
  thread_ = std::thread([this] { run(); });  // the sockets are the thread's from here on
}

ZmqEventPublisher::~ZmqEventPublisher() {
  flush();
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  thread_.join();
  if (replay_ != nullptr) zmq_close(replay_);
  zmq_close(pub_);
  zmq_ctx_term(context_);
}

void ZmqEventPublisher::publish(const KvEvent& event) { open_.push_back(event); }

void ZmqEventPublisher::flush() {
  if (open_.empty()) return;
  Batch batch{.timestamp_s = now_seconds(), .block_size = block_size_, .events = std::move(open_)};
  open_.clear();
  std::lock_guard lock(mutex_);
  stats_.events += batch.events.size();
  if (queue_.size() >= config_.max_queue) {
    ++stats_.batches_dropped;  // never block the allocator: a slow subscriber loses batches
    stats_.events_dropped += batch.events.size();
    return;
  }
  queue_.push_back(std::move(batch));
  ++stats_.batches_queued;
}

void ZmqEventPublisher::drain() {
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (queue_.empty() && !sending_) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

ZmqPublisherStats ZmqEventPublisher::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void ZmqEventPublisher::run() {
  zmq_pollitem_t replay_item{.socket = replay_, .fd = 0, .events = ZMQ_POLLIN, .revents = 0};
  for (;;) {
    if (replay_ != nullptr && zmq_poll(&replay_item, 1, 0) > 0) serve_replay();
    Batch batch;
    bool have = false;
    bool stop = false;
    {
      std::lock_guard lock(mutex_);
      if (!queue_.empty()) {
        batch = std::move(queue_.front());
        queue_.pop_front();
        have = true;
        sending_ = true;
      } else {
        stop = stopping_;
      }
    }
    if (have) {
      send_batch(std::move(batch));
      continue;
    }
    if (stop) return;
    // Nothing queued: wait for a replay request, or sleep briefly.
    if (replay_ != nullptr) {
      if (zmq_poll(&replay_item, 1, 5) > 0) serve_replay();
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
}

void ZmqEventPublisher::send_batch(Batch batch) {
  const std::uint64_t sequence = next_sequence_++;
  std::string payload = encode_vllm_event_batch(batch.timestamp_s, batch.events, batch.block_size,
                                                config_.data_parallel_rank, config_.wire);
  const auto seq = big_endian(static_cast<std::int64_t>(sequence));
  // PUB never blocks: past the high-water mark ZMQ drops for that subscriber.
  const bool sent = send_frames(
      pub_, {{config_.topic.data(), config_.topic.size()}, {seq.data(), seq.size()}, {payload.data(), payload.size()}},
      ZMQ_DONTWAIT);
  if (replay_ != nullptr) {
    sent_.emplace_back(sequence, std::move(payload));
    if (sent_.size() > config_.buffer_steps) sent_.pop_front();
  }
  std::lock_guard lock(mutex_);
  sending_ = false;
  if (sent) ++stats_.batches_sent;
}

void ZmqEventPublisher::serve_replay() {
  // [identity, "", start sequence]; anything else is ignored.
  std::vector<std::string> frames;
  int more = 1;
  while (more != 0) {
    zmq_msg_t message;
    zmq_msg_init(&message);
    if (zmq_msg_recv(&message, replay_, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&message);
      return;
    }
    frames.emplace_back(static_cast<const char*>(zmq_msg_data(&message)), zmq_msg_size(&message));
    more = zmq_msg_more(&message);
    zmq_msg_close(&message);
  }
  if (frames.size() != 3 || !frames[1].empty() || frames[2].size() != 8) return;
  std::uint64_t start = 0;
  for (const char byte : frames[2]) start = start << 8 | static_cast<unsigned char>(byte);
  const std::string& identity = frames[0];
  const bool with_topic = config_.replay_format == ReplayFormat::Current;
  const std::pair<const void*, std::size_t> id{identity.data(), identity.size()};
  const std::pair<const void*, std::size_t> empty{"", 0};
  const std::pair<const void*, std::size_t> topic{config_.topic.data(), config_.topic.size()};
  // Blocking sends: ROUTER_MANDATORY makes a full pipe wait (up to ZMQ_SNDTIMEO) and a gone client fail.
  const auto send = [this](std::initializer_list<std::pair<const void*, std::size_t>> parts) {
    return send_frames(replay_, parts, 0);
  };
  bool delivered = true;
  for (const auto& [sequence, payload] : sent_) {
    if (sequence < start) continue;
    const auto seq = big_endian(static_cast<std::int64_t>(sequence));
    const std::pair<const void*, std::size_t> number{seq.data(), seq.size()};
    const std::pair<const void*, std::size_t> body{payload.data(), payload.size()};
    delivered = with_topic ? send({id, empty, topic, number, body}) : send({id, empty, number, body});
    if (!delivered) break;
  }
  if (delivered) {
    const auto end = big_endian(-1);
    const std::pair<const void*, std::size_t> marker{end.data(), end.size()};
    delivered = with_topic ? send({id, empty, empty, marker, empty}) : send({id, empty, marker, empty});
  }
  std::lock_guard lock(mutex_);
  ++(delivered ? stats_.replays_served : stats_.replays_abandoned);
}

}  // namespace kvtier::events
