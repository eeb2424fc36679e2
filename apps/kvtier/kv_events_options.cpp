#include "kv_events_options.hpp"

#include "kvtier/core/errors.hpp"
#if KVTIER_WITH_ZMQ
#include "kvtier/events/zmq_event_publisher.hpp"
#endif

namespace kvtier::cli {

void add_kv_events_options(CLI::App& command, KvEventsOptions& o) {
  command.add_option("--kv-events", o.endpoint,
                     "publish KV events in vLLM's wire format on this ZMQ PUB endpoint (bound), e.g. tcp://127.0.0.1:5557");
  command.add_option("--kv-events-replay", o.replay_endpoint, "ZMQ ROUTER endpoint (bound) serving missed batches");
  command.add_option("--kv-events-topic", o.topic, "topic frame of every message")->capture_default_str();
  command.add_option("--kv-events-buffer", o.buffer_steps, "batches the replay socket keeps")->capture_default_str();
  command.add_option("--kv-events-hwm", o.hwm, "the PUB socket's high-water mark")->capture_default_str();
  command.add_option("--kv-events-queue", o.max_queue, "batches waiting to be sent; beyond it they are dropped and counted")
      ->capture_default_str();
}

#if KVTIER_WITH_ZMQ
namespace {

class Attached final : public AttachedKvEvents {
 public:
  explicit Attached(std::shared_ptr<events::ZmqEventPublisher> publisher) : publisher_(std::move(publisher)) {}
  std::string finish() override {
    publisher_->flush();
    publisher_->drain();
    const auto s = publisher_->stats();
    return "KV events:     " + std::to_string(s.events) + " events in " + std::to_string(s.batches_sent) +
           " batches on " + publisher_->endpoint() + ", " + std::to_string(s.batches_dropped) + " batches dropped, " +
           std::to_string(s.replays_served) + " replay requests served";
  }

 private:
  std::shared_ptr<events::ZmqEventPublisher> publisher_;
};

}  // namespace

std::unique_ptr<AttachedKvEvents> attach_kv_events(const KvEventsOptions& o, replay::ReplayConfig& config) {
  if (o.endpoint.empty()) {
    if (!o.replay_endpoint.empty()) throw ConfigError("--kv-events-replay needs --kv-events");
    return nullptr;
  }
  auto publisher = std::make_shared<events::ZmqEventPublisher>(events::ZmqPublisherConfig{
      .endpoint = o.endpoint,
      .replay_endpoint = o.replay_endpoint,
      .topic = o.topic,
      .buffer_steps = o.buffer_steps,
      .hwm = o.hwm,
      .max_queue = o.max_queue,
      .block_size = config.manager.block_size,
      .data_parallel_rank = config.manager.dp_rank});
  config.event_sinks.push_back(publisher);
  config.step_end = [raw = publisher.get()] { raw->flush(); };
  config.emit_token_ids = true;
  return std::make_unique<Attached>(std::move(publisher));
}
#else
std::unique_ptr<AttachedKvEvents> attach_kv_events(const KvEventsOptions& o, replay::ReplayConfig&) {
  if (o.endpoint.empty() && o.replay_endpoint.empty()) return nullptr;
  throw ConfigError("this kvtier was built without libzmq and msgpack-cxx: no --kv-events (scripts/install-deps.sh)");
}
#endif

}  // namespace kvtier::cli
