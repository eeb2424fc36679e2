#include "kvtier/events/vllm_event_encoding.hpp"

#include <msgpack.hpp>
#include <optional>
#include <variant>

#include "kvtier/core/errors.hpp"

namespace kvtier::events {
namespace {

using Packer = msgpack::packer<msgpack::sbuffer>;

/// Writes one event's fields in vLLM's declared order, as a tagged map or a
/// tagged array: the field names are written only in the map.
class EventWriter {
 public:
  EventWriter(Packer& pk, VllmEventEncoding encoding, const char* type, std::uint32_t fields)
      : pk_(pk), map_(encoding == VllmEventEncoding::Map) {
    if (map_) {
      pk_.pack_map(fields + 1);
      pk_.pack(std::string_view("type"));
    } else {
      pk_.pack_array(fields + 1);
    }
    pk_.pack(std::string_view(type));
  }
  Packer& field(const char* name) {
    if (map_) pk_.pack(std::string_view(name));
    return pk_;
  }

 private:
  Packer& pk_;
  bool map_;
};

/// vLLM's group fields, after its trailing defaults (lora_name, extra_keys)
/// in the array: the group's index, its kind and window.
void pack_group(EventWriter& event, const KvEventGroup& group) {
  event.field("group_idx").pack(group.index);
  event.field("kv_cache_spec_kind").pack(std::string_view(group.kind));
  if (group.sliding_window) {
    event.field("kv_cache_spec_sliding_window").pack(*group.sliding_window);
  } else {
    event.field("kv_cache_spec_sliding_window").pack_nil();
  }
}

void pack_stored(Packer& pk, const KvStored& stored, StorageTier tier, std::uint32_t manager_block_size,
                 const std::optional<KvEventGroup>& group, const VllmWireFormat& format) {
  const bool map = format.encoding == VllmEventEncoding::Map;
  // A group's event carries its block size and, after the defaults it must
  // then spell out (lora_name, extra_keys), its three group fields.
  const std::uint32_t fields = group ? 11 : (map ? 7 : 6);
  const std::uint32_t block_size = group ? group->block_size : manager_block_size;
  EventWriter event(pk, format.encoding, "BlockStored", fields);
  event.field("block_hashes").pack_array(static_cast<std::uint32_t>(stored.blocks.size()));
  for (const StoredBlock& block : stored.blocks) pk.pack(block.hash.value());
  if (stored.parent) {
    event.field("parent_block_hash").pack(stored.parent->value());
  } else {
    event.field("parent_block_hash").pack_nil();
  }
  const std::span<const TokenId> tokens = stored.token_ids ? stored.token_ids->flat() : std::span<const TokenId>{};
  event.field("token_ids").pack_array(static_cast<std::uint32_t>(tokens.size()));
  for (const TokenId token : tokens) pk.pack(token);
  event.field("block_size").pack(block_size);
  event.field("lora_id").pack_nil();
  event.field("medium").pack(std::string_view(format.medium(tier)));
  if (map || group) event.field("lora_name").pack_nil();  // a trailing default: left out of the array
  if (group) {
    event.field("extra_keys").pack_nil();
    pack_group(event, *group);
  }
}

void pack_removed(Packer& pk, const KvRemoved& removed, StorageTier tier, const std::optional<KvEventGroup>& group,
                  const VllmWireFormat& format) {
  EventWriter event(pk, format.encoding, "BlockRemoved", group ? 3 : 2);
  event.field("block_hashes").pack_array(static_cast<std::uint32_t>(removed.hashes.size()));
  for (const SequenceHash& hash : removed.hashes) pk.pack(hash.value());
  event.field("medium").pack(std::string_view(format.medium(tier)));
  if (group) event.field("group_idx").pack(group->index);
}

}  // namespace

const char* vllm_event_encoding_name(VllmEventEncoding encoding) noexcept {
  return encoding == VllmEventEncoding::Map ? "map" : "array";
}

VllmEventEncoding parse_vllm_event_encoding(const std::string& name) {
  if (name == "map") return VllmEventEncoding::Map;
  if (name == "array") return VllmEventEncoding::Array;
  throw ConfigError("KV event encoding must be map or array, not '" + name + "'");
}

std::string encode_vllm_event_batch(double timestamp_s, std::span<const KvEvent> events, std::uint32_t block_size,
                                    std::uint32_t data_parallel_rank, const VllmWireFormat& format) {
  msgpack::sbuffer buffer;
  Packer pk(buffer);
  pk.pack_array(3);
  pk.pack_double(timestamp_s);
  pk.pack_array(static_cast<std::uint32_t>(events.size()));
  for (const KvEvent& event : events) {
    if (const auto* stored = std::get_if<KvStored>(&event.data)) {
      pack_stored(pk, *stored, event.tier, block_size, event.group, format);
    } else {
      pack_removed(pk, std::get<KvRemoved>(event.data), event.tier, event.group, format);
    }
  }
  pk.pack(data_parallel_rank);
  return std::string(buffer.data(), buffer.size());
}

}  // namespace kvtier::events
