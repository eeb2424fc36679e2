#include "kvtier/events/vllm_event_encoding.hpp"

#include <msgpack.hpp>
#include <sstream>
#include <variant>

namespace kvtier::events {
namespace {

using Packer = msgpack::packer<msgpack::sbuffer>;

void pack_key(Packer& pk, const char* key) { pk.pack(std::string_view(key)); }

void pack_stored(Packer& pk, const KvStored& stored, StorageTier tier, std::uint32_t block_size) {
  pk.pack_map(8);
  pack_key(pk, "type");
  pk.pack(std::string_view("BlockStored"));
  pack_key(pk, "block_hashes");
  pk.pack_array(static_cast<std::uint32_t>(stored.blocks.size()));
  for (const StoredBlock& block : stored.blocks) pk.pack(block.hash.value());
  pack_key(pk, "parent_block_hash");
  if (stored.parent) {
    pk.pack(stored.parent->value());
  } else {
    pk.pack_nil();
  }
  pack_key(pk, "token_ids");
  const std::span<const TokenId> tokens = stored.token_ids ? stored.token_ids->flat() : std::span<const TokenId>{};
  pk.pack_array(static_cast<std::uint32_t>(tokens.size()));
  for (const TokenId token : tokens) pk.pack(token);
  pack_key(pk, "block_size");
  pk.pack(block_size);
  pack_key(pk, "lora_id");
  pk.pack_nil();
  pack_key(pk, "medium");
  pk.pack(std::string_view(vllm_medium(tier)));
  pack_key(pk, "lora_name");
  pk.pack_nil();
}

void pack_removed(Packer& pk, const KvRemoved& removed, StorageTier tier) {
  pk.pack_map(3);
  pack_key(pk, "type");
  pk.pack(std::string_view("BlockRemoved"));
  pack_key(pk, "block_hashes");
  pk.pack_array(static_cast<std::uint32_t>(removed.hashes.size()));
  for (const SequenceHash& hash : removed.hashes) pk.pack(hash.value());
  pack_key(pk, "medium");
  pk.pack(std::string_view(vllm_medium(tier)));
}

}  // namespace

const char* vllm_medium(StorageTier tier) noexcept { return tier == StorageTier::Device ? "GPU" : "CPU"; }

std::string encode_vllm_event_batch(double timestamp_s, std::span<const KvEvent> events, std::uint32_t block_size,
                                    std::uint32_t data_parallel_rank) {
  msgpack::sbuffer buffer;
  Packer pk(buffer);
  pk.pack_array(3);
  pk.pack_double(timestamp_s);
  pk.pack_array(static_cast<std::uint32_t>(events.size()));
  for (const KvEvent& event : events) {
    if (const auto* stored = std::get_if<KvStored>(&event.data)) {
      pack_stored(pk, *stored, event.tier, block_size);
    } else {
      pack_removed(pk, std::get<KvRemoved>(event.data), event.tier);
    }
  }
  pk.pack(data_parallel_rank);
  return std::string(buffer.data(), buffer.size());
}

}  // namespace kvtier::events
