#pragma once
// A test-side decoder of vLLM's KV event wire format, written from the
// format's description (not from kvtier's encoder): a batch is [ts, events,
// data_parallel_rank], each event a map whose first key is "type", or a tagged
// array [type, fields in declared order...] (the older encoding).
#include <msgpack.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace kvtier::events::testing {

struct WireEvent {
  std::string type;
  std::vector<std::string> keys;  // in wire order
  std::vector<std::uint64_t> block_hashes;
  std::optional<std::uint64_t> parent;
  std::vector<std::uint32_t> token_ids;
  std::uint32_t block_size = 0;
  bool lora_id_nil = false;
  bool lora_name_nil = false;
  std::string medium;
  bool array = false;  // a tagged array, not a map
};

struct WireBatch {
  double ts = 0.0;
  std::vector<WireEvent> events;
  std::optional<std::uint32_t> data_parallel_rank;
};

inline WireBatch decode_wire_batch(const std::string& payload) {
  const msgpack::object_handle handle = msgpack::unpack(payload.data(), payload.size());
  const msgpack::object& root = handle.get();
  if (root.type != msgpack::type::ARRAY || root.via.array.size < 2) throw std::runtime_error("batch is not an array");
  WireBatch batch;
  batch.ts = root.via.array.ptr[0].as<double>();
  const msgpack::object& events = root.via.array.ptr[1];
  if (root.via.array.size > 2) batch.data_parallel_rank = root.via.array.ptr[2].as<std::uint32_t>();
  for (std::uint32_t i = 0; i < events.via.array.size; ++i) {
    const msgpack::object& map = events.via.array.ptr[i];
    if (map.type != msgpack::type::MAP && map.type != msgpack::type::ARRAY) {
      throw std::runtime_error("event is neither a map nor an array");
    }
    WireEvent event;
    event.array = map.type == msgpack::type::ARRAY;
    static const std::vector<std::string> stored_fields{
        "type", "block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name"};
    static const std::vector<std::string> removed_fields{"type", "block_hashes", "medium"};
    const std::uint32_t count = event.array ? map.via.array.size : map.via.map.size;
    const bool removed = event.array && count > 0 && map.via.array.ptr[0].as<std::string>() == "BlockRemoved";
    const auto& positions = removed ? removed_fields : stored_fields;
    if (event.array && count > positions.size()) throw std::runtime_error("a tagged array with too many fields");
    for (std::uint32_t k = 0; k < count; ++k) {
      const std::string key = event.array ? positions[k] : map.via.map.ptr[k].key.as<std::string>();
      const msgpack::object& value = event.array ? map.via.array.ptr[k] : map.via.map.ptr[k].val;
      event.keys.push_back(key);
      if (key == "type") event.type = value.as<std::string>();
      if (key == "block_hashes") event.block_hashes = value.as<std::vector<std::uint64_t>>();
      if (key == "parent_block_hash" && !value.is_nil()) event.parent = value.as<std::uint64_t>();
      if (key == "token_ids") event.token_ids = value.as<std::vector<std::uint32_t>>();
      if (key == "block_size") event.block_size = value.as<std::uint32_t>();
      if (key == "lora_id") event.lora_id_nil = value.is_nil();
      if (key == "lora_name") event.lora_name_nil = value.is_nil();
      if (key == "medium") event.medium = value.as<std::string>();
    }
    batch.events.push_back(std::move(event));
  }
  return batch;
}

}  // namespace kvtier::events::testing
