// The ZMQ publisher on loopback: a SUB socket decodes every batch with its
// sequence number and the events a recording sink saw for the same
// operations; a subscriber that missed batches catches up through the replay
// socket; the queue never blocks the allocator; bad endpoints are refused.
#include "kvtier/events/zmq_event_publisher.hpp"

#include <gtest/gtest.h>
#include <zmq.h>

#include <array>
#include <chrono>
#include <memory>
#include <thread>

#include "events/vllm_wire_decoder.hpp"
#include "kvtier/core/active_sequence.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/driver/request_driver.hpp"
#include "kvtier/g1/g1_manager.hpp"

namespace kvtier::events {
namespace {

using testing::decode_wire_batch;

/// A raw libzmq socket closed with its context (the test's own context).
class TestSocket {
 public:
  TestSocket(int type, const std::string& endpoint) : context_(zmq_ctx_new()), socket_(zmq_socket(context_, type)) {
    const int linger = 0;
    zmq_setsockopt(socket_, ZMQ_LINGER, &linger, sizeof linger);
    if (type == ZMQ_SUB) zmq_setsockopt(socket_, ZMQ_SUBSCRIBE, "", 0);
    EXPECT_EQ(zmq_connect(socket_, endpoint.c_str()), 0) << zmq_strerror(zmq_errno());
  }
  ~TestSocket() {
    zmq_close(socket_);
    zmq_ctx_term(context_);
  }
  /// One multipart message, or nothing within `timeout_ms`.
  std::vector<std::string> receive(int timeout_ms = 2000) {
    zmq_pollitem_t item{.socket = socket_, .fd = 0, .events = ZMQ_POLLIN, .revents = 0};
    if (zmq_poll(&item, 1, timeout_ms) <= 0) return {};
    std::vector<std::string> frames;
    int more = 1;
    while (more != 0) {
      zmq_msg_t message;
      zmq_msg_init(&message);
      zmq_msg_recv(&message, socket_, 0);
      frames.emplace_back(static_cast<const char*>(zmq_msg_data(&message)), zmq_msg_size(&message));
      more = zmq_msg_more(&message);
      zmq_msg_close(&message);
    }
    return frames;
  }
  void send(const std::vector<std::string>& frames) {
    for (std::size_t i = 0; i < frames.size(); ++i) {
      zmq_send(socket_, frames[i].data(), frames[i].size(), i + 1 < frames.size() ? ZMQ_SNDMORE : 0);
    }
  }
  void* raw() const noexcept { return socket_; }

 private:
  void* context_;
  void* socket_;
};

std::int64_t sequence_of(const std::string& frame) {
  std::uint64_t value = 0;
  for (const char byte : frame) value = value << 8 | static_cast<unsigned char>(byte);
  return static_cast<std::int64_t>(value);
}

ZmqPublisherConfig loopback(std::string topic = "kv") {
  return ZmqPublisherConfig{.endpoint = "tcp://127.0.0.1:*",
                            .replay_endpoint = "tcp://127.0.0.1:*",
                            .topic = std::move(topic),
                            .block_size = 4};
}

/// Publishes probe batches until the subscriber sees one (ZMQ's slow joiner),
/// so later batches are not lost to the connection handshake.
void await_subscription(ZmqEventPublisher& publisher, TestSocket& sub) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    publisher.publish(KvEvent{.data = KvRemoved{.hashes = {SequenceHash(1)}}});
    publisher.flush();
    if (!sub.receive(20).empty()) break;
  }
  while (!sub.receive(100).empty()) {
  }
}

class RecordAndPublish final : public KvEventSink {
 public:
  explicit RecordAndPublish(std::shared_ptr<ZmqEventPublisher> publisher) : publisher_(std::move(publisher)) {}
  void publish(const KvEvent& event) override {
    recorded.push_back(event);
    publisher_->publish(event);
  }
  std::vector<KvEvent> recorded;

 private:
  std::shared_ptr<ZmqEventPublisher> publisher_;
};

TEST(ZmqEventPublisher, ASubscriberDecodesEveryBatchInOrderWithTheEventsTheManagerPublished) {
  auto publisher = std::make_shared<ZmqEventPublisher>(loopback());
  EXPECT_NE(publisher->endpoint().find("tcp://127.0.0.1:"), std::string::npos);
  TestSocket sub(ZMQ_SUB, publisher->endpoint());
  await_subscription(*publisher, sub);
  const std::int64_t first = static_cast<std::int64_t>(publisher->stats().batches_queued);

  auto sink = std::make_shared<RecordAndPublish>(publisher);
  g1::G1Manager manager(g1::G1ManagerConfig{.capacity = 8, .block_size = 4, .backend = g1::G1Backend::Native}, {sink});
  driver::RequestDriver driver(manager);
  // Three steps: two requests sharing a block, then one that evicts.
  std::vector<std::vector<KvEvent>> steps;
  const auto run_request = [&](std::vector<TokenId> prompt, g1::OwnerId owner) {
    ActiveSequence sequence(std::move(prompt), ActiveSequenceConfig{.block_size = 4, .emit_token_ids = true});
    ASSERT_TRUE(driver.allocate(owner, sequence, sequence.len()).is_ready());
    driver.finalize(owner, sequence, 0, sequence.len());
    driver.release(owner, sequence);
    steps.emplace_back(sink->recorded);
    sink->recorded.clear();
    publisher->flush();
  };
  run_request({1, 2, 3, 4, 5, 6, 7, 8}, g1::OwnerId(1));
  run_request({1, 2, 3, 4, 9, 9, 9, 9}, g1::OwnerId(2));
  run_request({20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43},
              g1::OwnerId(3));
  publisher->drain();
  for (std::size_t step = 0; step < steps.size(); ++step) {
    const auto frames = sub.receive();
    ASSERT_EQ(frames.size(), 3U) << "step " << step;
    EXPECT_EQ(frames[0], "kv");
    EXPECT_EQ(sequence_of(frames[1]), first + static_cast<std::int64_t>(step));
    const auto batch = decode_wire_batch(frames[2]);
    EXPECT_EQ(batch.data_parallel_rank, 0U);
    ASSERT_EQ(batch.events.size(), steps[step].size()) << "step " << step;
    for (std::size_t i = 0; i < batch.events.size(); ++i) {
      const KvEvent& want = steps[step][i];
      const auto& got = batch.events[i];
      EXPECT_EQ(got.medium, "GPU");
      if (const auto* stored = std::get_if<KvStored>(&want.data)) {
        EXPECT_EQ(got.type, "BlockStored");
        ASSERT_EQ(got.block_hashes.size(), stored->blocks.size());
        for (std::size_t b = 0; b < stored->blocks.size(); ++b)
          EXPECT_EQ(got.block_hashes[b], stored->blocks[b].hash.value());
        EXPECT_EQ(got.parent.has_value(), stored->parent.has_value());
        if (stored->parent) {
          EXPECT_EQ(*got.parent, stored->parent->value());
        }
        EXPECT_EQ(got.token_ids.size(), stored->blocks.size() * 4);
        EXPECT_EQ(got.block_size, 4U);
      } else {
        const auto& removed = std::get<KvRemoved>(want.data);
        EXPECT_EQ(got.type, "BlockRemoved");
        ASSERT_EQ(got.block_hashes.size(), removed.hashes.size());
        for (std::size_t b = 0; b < removed.hashes.size(); ++b)
          EXPECT_EQ(got.block_hashes[b], removed.hashes[b].value());
      }
    }
  }
  EXPECT_FALSE(steps[2].empty());
  EXPECT_TRUE(std::any_of(steps[2].begin(), steps[2].end(),
                          [](const KvEvent& e) { return std::holds_alternative<KvRemoved>(e.data); }));  // it evicted
  EXPECT_EQ(publisher->stats().batches_dropped, 0U);
}

/// One replay answer, split the way its format frames it.
struct ReplayAnswer {
  std::string topic{};
  std::int64_t sequence = 0;
  std::string payload{};
};

ReplayAnswer replay_answer(const std::vector<std::string>& frames, ReplayFormat format) {
  const bool current = format == ReplayFormat::Current;
  EXPECT_EQ(frames.size(), current ? 4U : 3U);
  if (frames.size() != (current ? 4U : 3U)) return ReplayAnswer{.sequence = -2};
  EXPECT_TRUE(frames[0].empty()) << "the DEALER's empty delimiter";
  const std::size_t at = current ? 2 : 1;
  return ReplayAnswer{
      .topic = current ? frames[1] : "", .sequence = sequence_of(frames[at]), .payload = frames[at + 1]};
}

class ReplayFormats : public ::testing::TestWithParam<ReplayFormat> {};

TEST_P(ReplayFormats, ASubscriberThatMissedBatchesCatchesUpThroughTheReplaySocket) {
  ZmqPublisherConfig config = loopback();
  config.replay_format = GetParam();
  ZmqEventPublisher publisher(config);
  for (std::uint64_t i = 0; i < 10; ++i) {  // nobody listens yet: all of them are missed
    publisher.publish(KvEvent{.data = KvRemoved{.hashes = {SequenceHash(100 + i)}}});
    publisher.flush();
  }
  publisher.drain();
  TestSocket replay(ZMQ_DEALER, publisher.replay_endpoint());
  replay.send({"", std::string("\0\0\0\0\0\0\0\4", 8)});  // from sequence 4
  const bool current = GetParam() == ReplayFormat::Current;
  for (std::int64_t want = 4; want < 10; ++want) {
    const ReplayAnswer answer = replay_answer(replay.receive(), GetParam());
    EXPECT_EQ(answer.topic, current ? "kv" : "") << "vLLM PR #45177: the live topic frame";
    EXPECT_EQ(answer.sequence, want);
    const auto batch = decode_wire_batch(answer.payload);
    ASSERT_EQ(batch.events.size(), 1U);
    EXPECT_EQ(batch.events[0].block_hashes, (std::vector<std::uint64_t>{100 + static_cast<std::uint64_t>(want)}));
  }
  const ReplayAnswer end = replay_answer(replay.receive(), GetParam());
  EXPECT_EQ(end.topic, "") << "the end marker's topic frame is empty";
  EXPECT_EQ(end.sequence, -1);
  EXPECT_TRUE(end.payload.empty());
  EXPECT_EQ(publisher.stats().replays_served, 1U);
}

std::string format_name(const ::testing::TestParamInfo<ReplayFormat>& format) {
  return format.param == ReplayFormat::Current ? "Current" : "Pre45177";
}

INSTANTIATE_TEST_SUITE_P(Formats, ReplayFormats, ::testing::Values(ReplayFormat::Current, ReplayFormat::Pre45177),
                         format_name);

TEST(ZmqEventPublisher, TheReplayBufferKeepsOnlyTheLastBatches) {
  ZmqPublisherConfig config = loopback();
  config.buffer_steps = 3;
  ZmqEventPublisher publisher(config);
  for (int i = 0; i < 8; ++i) {
    publisher.publish(KvEvent{.data = KvRemoved{.hashes = {SequenceHash(1)}}});
    publisher.flush();
  }
  publisher.drain();
  TestSocket replay(ZMQ_DEALER, publisher.replay_endpoint());
  replay.send({"", std::string(8, '\0')});  // from the start: only 5, 6, 7 are left
  std::vector<std::int64_t> got;
  for (;;) {
    const ReplayAnswer answer = replay_answer(replay.receive(), ReplayFormat::Current);
    if (answer.sequence < 0) break;
    got.push_back(answer.sequence);
  }
  EXPECT_EQ(got, (std::vector<std::int64_t>{5, 6, 7}));
}

TEST(ZmqEventPublisher, AReplayOfMoreBatchesThanTheHighWaterMarkDeliversEveryOneInOrderThenTheEndMarker) {
  // Regression (issue 22): answers past ZMQ's send high-water mark (1000) were
  // dropped without a word and the end marker never came.
  constexpr std::uint64_t kBatches = 12000;
  ZmqPublisherConfig config = loopback();
  config.buffer_steps = kBatches;
  ZmqEventPublisher publisher(config);
  for (std::uint64_t i = 0; i < kBatches; ++i) {
    publisher.publish(KvEvent{.data = KvRemoved{.hashes = {SequenceHash(i)}}});
    publisher.flush();
  }
  publisher.drain();
  TestSocket replay(ZMQ_DEALER, publisher.replay_endpoint());
  replay.send({"", std::string(8, '\0')});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a slow reader: the pipe fills first
  std::uint64_t next = 0;
  for (;;) {
    const auto frames = replay.receive(5000);
    ASSERT_FALSE(frames.empty()) << "the replay stopped after " << next << " batches";
    const ReplayAnswer answer = replay_answer(frames, ReplayFormat::Current);
    if (answer.sequence == -1) break;
    ASSERT_EQ(answer.sequence, static_cast<std::int64_t>(next)) << "in order, none missing";
    ++next;
  }
  EXPECT_EQ(next, kBatches);
  EXPECT_EQ(publisher.stats().replays_served, 1U);
  EXPECT_EQ(publisher.stats().replays_abandoned, 0U);
}

TEST(ZmqEventPublisher, AReplayClientThatStopsReadingIsAbandonedAndLiveBatchesGoOn) {
  ZmqPublisherConfig config = loopback();
  config.buffer_steps = 5000;
  config.replay_send_timeout_ms = 200;
  auto publisher = std::make_unique<ZmqEventPublisher>(config);
  // About 22 MB of answers: more than ZMQ's pipes and the kernel's socket buffers hold.
  const std::vector<SequenceHash> many(500, SequenceHash(0xFFFFFFFFFFFFULL));
  for (int i = 0; i < 5000; ++i) {
    publisher->publish(KvEvent{.data = KvRemoved{.hashes = many}});
    publisher->flush();
  }
  publisher->drain();
  {
    TestSocket stuck(ZMQ_DEALER, publisher->replay_endpoint());
    const int small = 10;
    zmq_setsockopt(stuck.raw(), ZMQ_RCVHWM, &small, sizeof small);
    stuck.send({"", std::string(8, '\0')});  // asks for everything, reads nothing
    for (int waited = 0; publisher->stats().replays_abandoned == 0 && waited < 200; ++waited) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_EQ(publisher->stats().replays_abandoned, 1U);
    EXPECT_EQ(publisher->stats().replays_served, 0U);
  }
  TestSocket sub(ZMQ_SUB, publisher->endpoint());
  await_subscription(*publisher, sub);
  publisher->publish(KvEvent{.data = KvRemoved{.hashes = {SequenceHash(77)}}});
  publisher->flush();
  const auto frames = sub.receive();
  ASSERT_EQ(frames.size(), 3U) << "the sending thread is not stuck on the replay";
  EXPECT_EQ(decode_wire_batch(frames[2]).events[0].block_hashes, (std::vector<std::uint64_t>{77}));
}

TEST(ZmqEventPublisher, AutoBindsWildcardsAndLocalHostsAndConnectsToRemoteOnes) {
  EXPECT_EQ(resolve_endpoint_mode("tcp://*:5557", EndpointMode::Auto), EndpointMode::Bind);
  EXPECT_EQ(resolve_endpoint_mode("tcp://127.0.0.1:5557", EndpointMode::Auto), EndpointMode::Bind);
  EXPECT_EQ(resolve_endpoint_mode("tcp://localhost:5557", EndpointMode::Auto), EndpointMode::Bind);
  EXPECT_EQ(resolve_endpoint_mode("tcp://[::1]:5557", EndpointMode::Auto), EndpointMode::Bind);
  EXPECT_EQ(resolve_endpoint_mode("ipc:///tmp/kv", EndpointMode::Auto), EndpointMode::Bind);
  EXPECT_EQ(resolve_endpoint_mode("tcp://router.svc:5557", EndpointMode::Auto), EndpointMode::Connect);
  EXPECT_EQ(resolve_endpoint_mode("tcp://10.1.2.3:5557", EndpointMode::Auto), EndpointMode::Connect);
  EXPECT_EQ(resolve_endpoint_mode("tcp://10.1.2.3:5557", EndpointMode::Bind), EndpointMode::Bind);
  EXPECT_EQ(resolve_endpoint_mode("tcp://*:5557", EndpointMode::Connect), EndpointMode::Connect);
}

TEST(ZmqEventPublisher, ConnectModeDeliversToARouterThatBoundItsOwnSubSocket) {
  // llm-d's centralized mode: the router binds SUB, every engine connects PUB.
  void* context = zmq_ctx_new();
  void* router = zmq_socket(context, ZMQ_SUB);
  const int linger = 0;
  zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(router, ZMQ_SUBSCRIBE, "", 0);
  ASSERT_EQ(zmq_bind(router, "tcp://127.0.0.1:*"), 0);
  std::array<char, 256> bound{};
  std::size_t size = bound.size();
  zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, bound.data(), &size);
  {
    ZmqPublisherConfig config = loopback();
    config.endpoint = bound.data();
    config.endpoint_mode = EndpointMode::Connect;
    ZmqEventPublisher publisher(config);
    EXPECT_EQ(publisher.endpoint_mode(), EndpointMode::Connect);
    bool received = false;
    for (int attempt = 0; attempt < 200 && !received; ++attempt) {
      publisher.publish(KvEvent{.data = KvRemoved{.hashes = {SequenceHash(5)}}});
      publisher.flush();
      zmq_pollitem_t item{.socket = router, .fd = 0, .events = ZMQ_POLLIN, .revents = 0};
      received = zmq_poll(&item, 1, 20) > 0;
    }
    EXPECT_TRUE(received);
  }
  zmq_close(router);
  zmq_ctx_term(context);
}

TEST(ZmqEventPublisher, AFullQueueDropsAndCountsBatchesInsteadOfBlocking) {
  ZmqPublisherConfig config = loopback();
  config.max_queue = 2;
  ZmqEventPublisher publisher(config);
  TestSocket slow(ZMQ_SUB, publisher.endpoint());  // never reads
  constexpr std::uint64_t kBatches = 20000;
  for (std::uint64_t i = 0; i < kBatches; ++i) {
    publisher.publish(KvEvent{.data = KvRemoved{.hashes = {SequenceHash(i + 1)}}});
    publisher.flush();
  }
  publisher.drain();
  const auto stats = publisher.stats();
  EXPECT_EQ(stats.batches_queued + stats.batches_dropped, kBatches);
  EXPECT_GT(stats.batches_dropped, 0U);
  EXPECT_EQ(stats.batches_sent, stats.batches_queued);
  EXPECT_EQ(stats.events, kBatches);
}

TEST(ZmqEventPublisher, BadEndpointsAndSettingsAreClearErrors) {
  const auto refused = [](ZmqPublisherConfig config) {
    try {
      ZmqEventPublisher publisher(std::move(config));
    } catch (const ConfigError& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  EXPECT_NE(refused(ZmqPublisherConfig{.endpoint = "bogus://x"}).find("cannot bind"), std::string::npos);
  EXPECT_NE(refused(ZmqPublisherConfig{.endpoint = "tcp://no-such-host-kvtier:5557"}).find("cannot connect"),
            std::string::npos)
      << "a remote host is connected to (as vLLM does), and one that does not resolve is refused";
  EXPECT_NE(
      refused(ZmqPublisherConfig{.endpoint = "tcp://no-such-host-kvtier:5557", .endpoint_mode = EndpointMode::Bind})
          .find("cannot bind"),
      std::string::npos);
  EXPECT_FALSE(refused(ZmqPublisherConfig{.endpoint = ""}).empty());
  EXPECT_FALSE(refused(ZmqPublisherConfig{.endpoint = "tcp://127.0.0.1:*", .buffer_steps = 0}).empty());
  for (const char* endpoint :
       {"tcp://127.0.0.1:70000", "tcp://127.0.0.1:65536", "tcp://127.0.0.1:", "tcp://127.0.0.1:x", "tcp://127.0.0.1"}) {
    // Regression (issue 23): ZMQ bound port 70000 as 4464.
    EXPECT_NE(refused(ZmqPublisherConfig{.endpoint = endpoint}).find("needs a port in 0-65535"), std::string::npos)
        << endpoint;
  }
  ZmqEventPublisher taken(loopback());
  EXPECT_NE(refused(ZmqPublisherConfig{.endpoint = taken.endpoint()}).find("cannot bind"), std::string::npos);
}

}  // namespace
}  // namespace kvtier::events
