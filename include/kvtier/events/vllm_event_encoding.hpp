#pragma once
// KV events in vLLM's wire format (vllm/distributed/kv_events.py, the version
// whose EventBatch is msgspec `array_like` and whose events are tagged maps):
// a batch is the msgpack array [ts, events, data_parallel_rank]; each event a
// map whose first key "type" names it — BlockStored {block_hashes,
// parent_block_hash, token_ids, block_size, lora_id, medium, lora_name},
// BlockRemoved {block_hashes, medium}, AllBlocksCleared {} — with fields at
// their defaults left out, as msgspec's omit_defaults does (every field here
// is required there, so each one is written). Hashes are the 64-bit sequence
// hashes (unsigned ints); medium is "GPU" for G1 and "CPU" for G2.
#include <cstdint>
#include <span>
#include <string>

#include "kvtier/core/kv_event.hpp"

namespace kvtier::events {

const char* vllm_medium(StorageTier tier) noexcept;

/// One KVEventBatch payload. `block_size` is the tokens per block a
/// BlockStored reports; token_ids are the stored blocks' tokens, flattened
/// (empty when the event carries none).
std::string encode_vllm_event_batch(double timestamp_s, std::span<const KvEvent> events, std::uint32_t block_size,
                                    std::uint32_t data_parallel_rank);

}  // namespace kvtier::events
