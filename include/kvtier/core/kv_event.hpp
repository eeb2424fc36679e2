#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "kvtier/core/block_hash.hpp"
#include "kvtier/core/stored_token_ids.hpp"

namespace kvtier {

/// Router storage tier of an event: G1 device memory, G2 pinned host memory
/// or G3 local disk.
enum class StorageTier : std::uint8_t { Device, HostPinned, Disk, External };

struct StoredBlock {
  SequenceHash hash;
  LocalBlockHash local;  // 0 when unknown
  friend bool operator==(const StoredBlock&, const StoredBlock&) = default;
};

/// A run of consecutive blocks became visible. Block k's parent is block k-1;
/// block 0's parent is `parent` (nullopt for a root run).
struct KvStored {
  std::optional<SequenceHash> parent;
  std::vector<StoredBlock> blocks;
  /// Per-block token ids, only when token-id emission is on.
  std::optional<StoredTokenIds> token_ids;
  friend bool operator==(const KvStored&, const KvStored&) = default;
};

/// The last copy of each listed block left the tier (in eviction order).
struct KvRemoved {
  std::vector<SequenceHash> hashes;
  friend bool operator==(const KvRemoved&, const KvRemoved&) = default;
};

/// The KV cache group an event of a manager with groups speaks for
/// (docs/spec/model-geometry.md section 6; vLLM's `group_idx`,
/// `kv_cache_spec_kind`, `kv_cache_spec_sliding_window`, and the group's `block_size`).
struct KvEventGroup {
  std::uint32_t index = 0;
  std::string kind{};                             // vLLM's KVCacheSpecKind string
  std::optional<std::uint32_t> sliding_window{};  // windowed kinds only
  std::uint32_t block_size = 0;
  friend bool operator==(const KvEventGroup&, const KvEventGroup&) = default;
};

/// Dynamo's `KvCacheEvent` with its tier.
struct KvEvent {
  std::uint64_t id = 0;
  std::uint32_t dp_rank = 0;
  StorageTier tier = StorageTier::Device;
  std::variant<KvStored, KvRemoved> data;
  /// Only from a manager with KV cache groups: a single-group manager's events are unchanged.
  std::optional<KvEventGroup> group{};
  friend bool operator==(const KvEvent&, const KvEvent&) = default;
};

const char* tier_name(StorageTier tier) noexcept;

}  // namespace kvtier
