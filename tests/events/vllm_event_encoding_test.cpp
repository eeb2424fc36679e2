// KV event batches in vLLM's wire format, decoded by a test-side reader.
#include "kvtier/events/vllm_event_encoding.hpp"

#include <gtest/gtest.h>

#include "events/vllm_wire_decoder.hpp"
#include "kvtier/core/errors.hpp"

namespace kvtier::events {
namespace {

using testing::decode_wire_batch;

TEST(VllmEventEncoding, ABatchIsAnArrayOfTimestampEventsAndRank) {
  const std::vector<KvEvent> none;
  const auto batch = decode_wire_batch(encode_vllm_event_batch(1234.5, none, 16, 3));
  EXPECT_DOUBLE_EQ(batch.ts, 1234.5);
  EXPECT_TRUE(batch.events.empty());
  EXPECT_EQ(batch.data_parallel_rank, 3U);
}

TEST(VllmEventEncoding, StoredAndRemovedCarryEveryRequiredFieldInVllmOrder) {
  const std::uint64_t big = 0xFEDCBA9876543210ULL;  // past 2^63: an unsigned 64-bit int on the wire
  std::vector<KvEvent> events;
  events.push_back(KvEvent{.id = 1,
                           .dp_rank = 0,
                           .tier = StorageTier::Device,
                           .data = KvStored{.parent = SequenceHash(7),
                                            .blocks = {StoredBlock{SequenceHash(big), LocalBlockHash(1)},
                                                       StoredBlock{SequenceHash(9), LocalBlockHash(2)}},
                                            .token_ids = BlockTokenIds{{1, 2, 3, 4}, {5, 6, 7, 8}}}});
  events.push_back(KvEvent{.id = 2,
                           .dp_rank = 0,
                           .tier = StorageTier::Device,
                           .data = KvStored{.parent = std::nullopt,
                                            .blocks = {StoredBlock{SequenceHash(11), LocalBlockHash(3)}},
                                            .token_ids = std::nullopt}});
  events.push_back(KvEvent{.id = 3,
                           .dp_rank = 0,
                           .tier = StorageTier::HostPinned,
                           .data = KvRemoved{.hashes = {SequenceHash(9), SequenceHash(big)}}});
  const auto batch = decode_wire_batch(encode_vllm_event_batch(1.0, events, 4, 0));
  ASSERT_EQ(batch.events.size(), 3U);
  const auto& stored = batch.events[0];
  EXPECT_EQ(stored.keys, (std::vector<std::string>{"type", "block_hashes", "parent_block_hash", "token_ids",
                                                   "block_size", "lora_id", "medium", "lora_name"}));
  EXPECT_EQ(stored.type, "BlockStored");
  EXPECT_EQ(stored.block_hashes, (std::vector<std::uint64_t>{big, 9}));
  EXPECT_EQ(stored.parent, 7U);
  EXPECT_EQ(stored.token_ids, (std::vector<std::uint32_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(stored.block_size, 4U);
  EXPECT_TRUE(stored.lora_id_nil);
  EXPECT_TRUE(stored.lora_name_nil);
  EXPECT_EQ(stored.medium, "GPU");
  const auto& root = batch.events[1];
  EXPECT_FALSE(root.parent.has_value());  // nil: a root run
  EXPECT_TRUE(root.token_ids.empty());    // no token ids were emitted
  const auto& removed = batch.events[2];
  EXPECT_EQ(removed.keys, (std::vector<std::string>{"type", "block_hashes", "medium"}));
  EXPECT_EQ(removed.type, "BlockRemoved");
  EXPECT_EQ(removed.block_hashes, (std::vector<std::uint64_t>{9, big}));
  EXPECT_EQ(removed.medium, "CPU_PINNED") << "G2's default: what Dynamo maps to its host tier";
}

TEST(VllmEventEncoding, TheArrayEncodingIsATaggedArrayInDeclaredOrderWithoutTheTrailingDefault) {
  std::vector<KvEvent> events;
  events.push_back(KvEvent{.id = 1,
                           .dp_rank = 0,
                           .tier = StorageTier::HostPinned,
                           .data = KvStored{.parent = SequenceHash(7),
                                            .blocks = {StoredBlock{SequenceHash(10), LocalBlockHash(1)}},
                                            .token_ids = BlockTokenIds{{1, 2, 3, 4}}}});
  events.push_back(
      KvEvent{.id = 2, .dp_rank = 0, .tier = StorageTier::Device, .data = KvRemoved{.hashes = {SequenceHash(10)}}});
  const VllmWireFormat format{.encoding = VllmEventEncoding::Array, .device_medium = "GPU", .host_medium = "CPU"};
  const auto batch = decode_wire_batch(encode_vllm_event_batch(2.0, events, 4, 1, format));
  ASSERT_EQ(batch.events.size(), 2U);
  const auto& stored = batch.events[0];
  EXPECT_TRUE(stored.array);
  EXPECT_EQ(stored.keys, (std::vector<std::string>{"type", "block_hashes", "parent_block_hash", "token_ids",
                                                   "block_size", "lora_id", "medium"}));
  EXPECT_EQ(stored.type, "BlockStored");
  EXPECT_EQ(stored.block_hashes, (std::vector<std::uint64_t>{10}));
  EXPECT_EQ(stored.parent, 7U);
  EXPECT_EQ(stored.token_ids, (std::vector<std::uint32_t>{1, 2, 3, 4}));
  EXPECT_EQ(stored.medium, "CPU") << "vLLM's own name, chosen";
  const auto& removed = batch.events[1];
  EXPECT_TRUE(removed.array);
  EXPECT_EQ(removed.keys, (std::vector<std::string>{"type", "block_hashes", "medium"}));
  EXPECT_EQ(removed.medium, "GPU");
  EXPECT_EQ(parse_vllm_event_encoding("array"), VllmEventEncoding::Array);
  EXPECT_THROW(parse_vllm_event_encoding("cbor"), ConfigError);
}

}  // namespace
}  // namespace kvtier::events
