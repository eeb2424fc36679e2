// The ZMQ publisher on loopback: a SUB socket decodes every batch with its
// sequence number and the events a recording sink saw for the same
// operations; a subscriber that missed batches catches up through the replay
// socket; the queue never blocks the allocator; bad endpoints are refused.
#include "kvtier/events/zmq_event_publisher.hpp"

#include <gtest/gtest.h>
#include <zmq.h>

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
  return ZmqPublisherConfig{.endpoint = "tcp://127.0.0.1:*", .replay_endpoint = "tcp://127.0.0.1:*",
                            .topic = std::move(topic), .block_size = 4};
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
        for (std::size_t b = 0; b < stored->blocks.size(); ++b) EXPECT_EQ(got.block_hashes[b], stored->blocks[b].hash.value());
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
        for (std::size_t b = 0; b < removed.hashes.size(); ++b) EXPECT_EQ(got.block_hashes[b], removed.hashes[b].value());
      }
    }
  }
  EXPECT_FALSE(steps[2].empty());
  EXPECT_TRUE(std::any_of(steps[2].begin(), steps[2].end(),
                          [](const KvEvent& e) { return std::holds_alternative<KvRemoved>(e.data); }));  // it evicted
  EXPECT_EQ(publisher->stats().batches_dropped, 0U);
}

TEST(ZmqEventPublisher, ASubscriberThatMissedBatchesCatchesUpThroughTheReplaySocket) {
  ZmqEventPublisher publisher(loopback());
  for (std::uint64_t i = 0; i < 10; ++i) {  // nobody listens yet: all of them are missed
    publisher.publish(KvEvent{.data = KvRemoved{.hashes = {SequenceHash(100 + i)}}});
    publisher.flush();
  }
  publisher.drain();
  TestSocket replay(ZMQ_DEALER, publisher.replay_endpoint());
  replay.send({"", std::string("\0\0\0\0\0\0\0\4", 8)});  // from sequence 4
  for (std::int64_t want = 4; want < 10; ++want) {
    const auto frames = replay.receive();
    ASSERT_EQ(frames.size(), 3U);
    EXPECT_TRUE(frames[0].empty());
    EXPECT_EQ(sequence_of(frames[1]), want);
    const auto batch = decode_wire_batch(frames[2]);
    ASSERT_EQ(batch.events.size(), 1U);
    EXPECT_EQ(batch.events[0].block_hashes, (std::vector<std::uint64_t>{100 + static_cast<std::uint64_t>(want)}));
  }
  const auto end = replay.receive();
  ASSERT_EQ(end.size(), 3U);
  EXPECT_EQ(sequence_of(end[1]), -1);
  EXPECT_TRUE(end[2].empty());
  EXPECT_EQ(publisher.stats().replays_served, 1U);
}

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
    const auto frames = replay.receive();
    ASSERT_EQ(frames.size(), 3U);
    if (sequence_of(frames[1]) == -1) break;
    got.push_back(sequence_of(frames[1]));
  }
  EXPECT_EQ(got, (std::vector<std::int64_t>{5, 6, 7}));
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
  EXPECT_NE(refused(ZmqPublisherConfig{.endpoint = "tcp://no-such-host-kvtier:5557"}).find("cannot bind"),
            std::string::npos);
  EXPECT_FALSE(refused(ZmqPublisherConfig{.endpoint = ""}).empty());
  EXPECT_FALSE(refused(ZmqPublisherConfig{.endpoint = "tcp://127.0.0.1:*", .buffer_steps = 0}).empty());
  for (const char* endpoint : {"tcp://127.0.0.1:70000", "tcp://127.0.0.1:65536", "tcp://127.0.0.1:", "tcp://127.0.0.1:x",
                               "tcp://127.0.0.1"}) {
    // Regression (issue 23): ZMQ bound port 70000 as 4464.
    EXPECT_NE(refused(ZmqPublisherConfig{.endpoint = endpoint}).find("needs a port in 0-65535"), std::string::npos)
        << endpoint;
  }
  ZmqEventPublisher taken(loopback());
  EXPECT_NE(refused(ZmqPublisherConfig{.endpoint = taken.endpoint()}).find("cannot bind"), std::string::npos);
}

}  // namespace
}  // namespace kvtier::events
