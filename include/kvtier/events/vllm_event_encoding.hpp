#pragma once
// KV events in vLLM's wire format (vllm/distributed/kv_events.py): a batch is
// the msgpack array [ts, events, data_parallel_rank] (EventBatch is msgspec
// `array_like`). Each event, with VllmEventEncoding::Map (vLLM's current
// types: msgspec tag=True, omit_defaults), a map whose first key "type" names
// it — BlockStored {block_hashes, parent_block_hash, token_ids, block_size,
// lora_id, medium, lora_name}, BlockRemoved {block_hashes, medium} — every
// field vLLM declares without a default written; with ::Array (vLLM's older
// array_like events, which AIBrix and older llm-d read) a tagged array
// ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size,
// lora_id, medium] / ["BlockRemoved", block_hashes, medium], positions as
// declared and the trailing default (lora_name = None) left out as
// omit_defaults does. Hashes are the 64-bit sequence hashes (unsigned ints);
// medium names the tier (VllmWireFormat).
#include <cstdint>
#include <span>
#include <string>

#include "kvtier/core/kv_event.hpp"

namespace kvtier::events {

enum class VllmEventEncoding : std::uint8_t { Map, Array };
const char* vllm_event_encoding_name(VllmEventEncoding encoding) noexcept;
/// "map" or "array"; ConfigError otherwise.
VllmEventEncoding parse_vllm_event_encoding(const std::string& name);

/// How events are written and what each tier is called on the wire. The G2
/// default is "CPU_PINNED", what Dynamo's router maps to its host tier (older
/// Dynamo mapped vLLM's own "CPU" to the device tier); "CPU" is one setting away.
struct VllmWireFormat {
  VllmEventEncoding encoding = VllmEventEncoding::Map;
  std::string device_medium = "GPU";         // G1
  std::string host_medium = "CPU_PINNED";    // G2 (pinned host memory)
  std::string disk_medium = "DISK";          // G3 (local disk): vLLM's and Dynamo's name
  std::string external_medium = "EXTERNAL";  // G4 (a store shared by instances)
  const std::string& medium(StorageTier tier) const noexcept {
    switch (tier) {
      case StorageTier::Device:
        return device_medium;
      case StorageTier::HostPinned:
        return host_medium;
      case StorageTier::Disk:
        return disk_medium;
      case StorageTier::External:
        break;
    }
    return external_medium;
  }
};

/// One KVEventBatch payload. `block_size` is the tokens per block a
/// BlockStored reports; token_ids are the stored blocks' tokens, flattened
/// (empty when the event carries none).
std::string encode_vllm_event_batch(double timestamp_s, std::span<const KvEvent> events, std::uint32_t block_size,
                                    std::uint32_t data_parallel_rank, const VllmWireFormat& format = {});

}  // namespace kvtier::events
