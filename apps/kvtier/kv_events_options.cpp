#include "kv_events_options.hpp"

#include <chrono>
#include <future>
#include <thread>

#include "kvtier/core/errors.hpp"
#include "option_checks.hpp"
#if KVTIER_WITH_ZMQ
#include "kvtier/events/dp_rank_endpoint.hpp"
#include "kvtier/events/zmq_event_publisher.hpp"
#endif

namespace kvtier::cli {

void add_kv_events_options(CLI::App& command, KvEventsOptions& o) {
  command
      .add_option("--kv-events", o.endpoint,
                  "publish KV events in vLLM's wire format on this ZMQ PUB endpoint, e.g. tcp://127.0.0.1:5557 "
                  "(bound; a remote host is connected to, see --kv-events-mode)")
      ->check(non_empty());
  command
      .add_option("--kv-events-mode", o.mode,
                  "auto | bind | connect: auto binds a wildcard, ipc:// or local endpoint and connects to a remote "
                  "host, as vLLM does")
      ->capture_default_str();
  command.add_option("--kv-events-replay", o.replay_endpoint, "ZMQ ROUTER endpoint (bound) serving missed batches")
      ->check(non_empty());
  command
      .add_option("--kv-events-topic", o.topic,
                  "topic frame of every message (llm-d reads the pod and model from kv@<pod>@<model>)")
      ->capture_default_str();
  command
      .add_option("--kv-events-encoding", o.encoding,
                  "map | array: events as vLLM's current tagged maps, or as the tagged arrays of older vLLM")
      ->capture_default_str();
  command.add_option("--kv-events-medium-g1", o.medium_g1, "the medium G1 (device) events name")
      ->check(non_empty())
      ->capture_default_str();
  command.add_option("--kv-events-medium-g2", o.medium_g2, "the medium G2 (pinned host) events name (vLLM's own: CPU)")
      ->check(non_empty())
      ->capture_default_str();
  command.add_option("--kv-events-medium-g3", o.medium_g3, "the medium G3 (local disk) events name")
      ->check(non_empty())
      ->capture_default_str();
  command.add_option("--kv-events-medium-g4", o.medium_g4, "the medium G4 (the store shared by instances) events name")
      ->check(non_empty())
      ->capture_default_str();
  command
      .add_option("--kv-events-replay-format", o.replay_format,
                  "current | pre-45177: replay answers with the topic frame (vLLM >= 0.26) or without")
      ->capture_default_str();
  command.add_option("--kv-events-buffer", o.buffer_steps, "batches the replay socket keeps")->capture_default_str();
  command.add_option("--kv-events-hwm", o.hwm, "the PUB socket's high-water mark")->capture_default_str();
  command
      .add_option("--kv-events-queue", o.max_queue,
                  "batches waiting to be sent; beyond it they are dropped and counted")
      ->capture_default_str();
  command
      .add_option("--kv-events-linger", o.linger_s, "seconds the sockets stay up after the run (late replay requests)")
      ->check(linger_seconds())
      ->capture_default_str();
}

#if KVTIER_WITH_ZMQ
namespace {

class ZmqOutput final : public KvEventsOutput {
 public:
  ZmqOutput(std::shared_ptr<events::ZmqEventPublisher> publisher, double linger_s)
      : publisher_(std::move(publisher)), linger_s_(linger_s) {}
  std::shared_ptr<KvEventSink> sink() override { return publisher_; }
  void flush() override { publisher_->flush(); }
  void set_block_size(std::uint32_t block_size) override { publisher_->set_block_size(block_size); }
  std::string finish() override {
    publisher_->flush();
    publisher_->drain();
    if (linger_s_ > 0.0) std::this_thread::sleep_for(std::chrono::duration<double>(linger_s_));
    const auto s = publisher_->stats();
    return "KV events:     " + std::to_string(s.events) + " events in " + std::to_string(s.batches_sent) + " batches " +
           (publisher_->endpoint_mode() == events::EndpointMode::Bind ? "on " : "to ") + publisher_->endpoint() + ", " +
           std::to_string(s.batches_dropped) + " batches dropped, " + std::to_string(s.replays_served) +
           " replay requests served, " + std::to_string(s.replays_abandoned) + " abandoned";
  }
  std::uint64_t events_received() const override { return publisher_->stats().events; }
  std::uint64_t events_dropped() const override { return publisher_->stats().events_dropped; }

 private:
  std::shared_ptr<events::ZmqEventPublisher> publisher_;
  double linger_s_;
};

}  // namespace

std::unique_ptr<KvEventsOutput> open_kv_events(const KvEventsOptions& o, std::uint32_t block_size,
                                               std::uint32_t data_parallel_rank) {
  if (o.endpoint.empty()) {
    if (!o.replay_endpoint.empty()) throw ConfigError("--kv-events-replay needs --kv-events");
    return nullptr;
  }
  if (o.linger_s < 0.0) throw ConfigError("--kv-events-linger must not be negative");
  return std::make_unique<ZmqOutput>(
      std::make_shared<events::ZmqEventPublisher>(events::ZmqPublisherConfig{
          .endpoint = o.endpoint,
          .replay_endpoint = o.replay_endpoint,
          .topic = o.topic,
          .buffer_steps = o.buffer_steps,
          .hwm = o.hwm,
          .max_queue = o.max_queue,
          .block_size = block_size,
          .data_parallel_rank = data_parallel_rank,
          .replay_format = events::parse_replay_format(o.replay_format),
          .wire = events::VllmWireFormat{.encoding = events::parse_vllm_event_encoding(o.encoding),
                                         .device_medium = o.medium_g1,
                                         .host_medium = o.medium_g2,
                                         .disk_medium = o.medium_g3,
                                         .external_medium = o.medium_g4},
          .endpoint_mode = events::parse_endpoint_mode(o.mode)}),
      o.linger_s);
}

std::vector<std::unique_ptr<KvEventsOutput>> open_kv_events_per_rank(const KvEventsOptions& o, std::uint32_t block_size,
                                                                     std::uint32_t first_rank, std::uint32_t count) {
  std::vector<std::unique_ptr<KvEventsOutput>> outputs;
  for (std::uint32_t rank = first_rank; rank < first_rank + count; ++rank) {
    KvEventsOptions own = o;
    if (!own.endpoint.empty()) own.endpoint = events::dp_rank_endpoint(o.endpoint, rank);
    if (!own.replay_endpoint.empty()) own.replay_endpoint = events::dp_rank_endpoint(o.replay_endpoint, rank);
    auto output = open_kv_events(own, block_size, rank);
    if (!output) break;
    outputs.push_back(std::move(output));
  }
  return outputs;
}
#else
std::vector<std::unique_ptr<KvEventsOutput>> open_kv_events_per_rank(const KvEventsOptions& o, std::uint32_t,
                                                                     std::uint32_t, std::uint32_t) {
  if (o.endpoint.empty() && o.replay_endpoint.empty()) return {};
  throw ConfigError("this kvtier was built without libzmq and msgpack-cxx: no --kv-events (scripts/install-deps.sh)");
}

std::unique_ptr<KvEventsOutput> open_kv_events(const KvEventsOptions& o, std::uint32_t, std::uint32_t) {
  if (o.endpoint.empty() && o.replay_endpoint.empty()) return nullptr;
  throw ConfigError("this kvtier was built without libzmq and msgpack-cxx: no --kv-events (scripts/install-deps.sh)");
}
#endif

std::string finish_all(std::vector<std::unique_ptr<KvEventsOutput>>& outputs) {
  std::vector<std::future<std::string>> finishing;
  for (auto& output : outputs)
    finishing.push_back(std::async(std::launch::async, [&output] { return output->finish(); }));
  std::string lines;
  for (auto& line : finishing) lines += (lines.empty() ? "" : "\n") + line.get();
  return lines;
}

}  // namespace kvtier::cli
