#include <gtest/gtest.h>

#include <stdexcept>

#include "kvtier/core/kv_event_json.hpp"
#include "kvtier/core/kv_event_publisher.hpp"

namespace kvtier {
namespace {

TEST(KvEventJson, StoredMatchesTheScriptFormat) {
  const KvEvent event{.id = 0,
                      .dp_rank = 0,
                      .tier = StorageTier::Device,
                      .data = KvStored{.parent = SequenceHash(5),
                                       .blocks = {{SequenceHash(10), LocalBlockHash(1010)}},
                                       .token_ids = BlockTokenIds{{1, 2, 3, 4}}}};
  EXPECT_EQ(to_json(event), nlohmann::ordered_json::parse(R"({"id": 0, "dp_rank": 0, "tier": "device", "type": "stored",
      "parent": 5, "blocks": [{"hash": 10, "local": 1010}], "token_ids": [[1,2,3,4]]})"));
}

TEST(KvEventJson, RootRunHasNullParentAndNoTokenIdsUnlessGiven) {
  const KvEvent event{.id = 3,
                      .dp_rank = 2,
                      .tier = StorageTier::HostPinned,
                      .data = KvStored{.parent = std::nullopt,
                                       .blocks = {{SequenceHash(18446744073709551615ULL), LocalBlockHash(0)}},
                                       .token_ids = std::nullopt}};
  const nlohmann::ordered_json json = to_json(event);
  EXPECT_TRUE(json["parent"].is_null());
  EXPECT_FALSE(json.contains("token_ids"));
  EXPECT_EQ(json["tier"], "host_pinned");
  EXPECT_EQ(json["dp_rank"], 2);
  EXPECT_EQ(json["blocks"][0]["hash"].get<std::uint64_t>(), 18446744073709551615ULL);  // u64 round-trips
}

TEST(KvEventJson, RemovedListsHashesInOrder) {
  const KvEvent event{
      .id = 1, .dp_rank = 0, .tier = StorageTier::Device, .data = KvRemoved{{SequenceHash(4), SequenceHash(3)}}};
  EXPECT_EQ(to_json(event), nlohmann::ordered_json::parse(
                                R"({"id": 1, "dp_rank": 0, "tier": "device", "type": "removed", "hashes": [4, 3]})"));
}

class ThrowingSink final : public KvEventSink {
 public:
  void publish(const KvEvent&) override { throw std::runtime_error("router unreachable"); }
};

TEST(KvEventPublisher, PublishesNothingAndCountsNothingWithoutSinks) {
  KvEventPublisher publisher(1);
  publisher.publish_removed(StorageTier::Device, KvRemoved{{SequenceHash(1)}});
  EXPECT_EQ(publisher.next_event_id(), 0U);
}

TEST(KvEventPublisher, NumbersEventsPerManagerAndSkipsEmptyOnes) {
  KvEventPublisher publisher(7);
  auto sink = std::make_shared<RecordingEventSink>();
  publisher.attach(sink);
  publisher.publish_stored(StorageTier::Device, KvStored{});    // empty: dropped
  publisher.publish_removed(StorageTier::Device, KvRemoved{});  // empty: dropped
  publisher.publish_stored(
      StorageTier::Device,
      KvStored{.parent = std::nullopt, .blocks = {{SequenceHash(7), LocalBlockHash(107)}}, .token_ids = std::nullopt});
  publisher.publish_removed(StorageTier::HostPinned, KvRemoved{{SequenceHash(7)}});
  ASSERT_EQ(sink->events().size(), 2U);
  EXPECT_EQ(sink->events()[0].id, 0U);
  EXPECT_EQ(sink->events()[1].id, 1U);
  EXPECT_EQ(sink->events()[1].dp_rank, 7U);
  EXPECT_EQ(sink->events()[1].tier, StorageTier::HostPinned);
}

TEST(KvEventPublisher, AFailingSinkDoesNotStopTheOthers) {
  KvEventPublisher publisher;
  auto sink = std::make_shared<RecordingEventSink>();
  publisher.attach(std::make_shared<ThrowingSink>());
  publisher.attach(sink);
  EXPECT_NO_THROW(publisher.publish_removed(StorageTier::Device, KvRemoved{{SequenceHash(9)}}));
  ASSERT_EQ(sink->events().size(), 1U);
  EXPECT_EQ(publisher.next_event_id(), 1U);
}

}  // namespace
}  // namespace kvtier
