#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "kvtier/g1/eviction_policy.hpp"

namespace kvtier::g1 {

class LeafPriorityPolicy;

/// kvtier's leaf-first orders (docs/policies.md: lru2, lfu_da, arc, s3fifo,
/// adaptive) for an engine's host cache of chunks — vLLM's CPU offloading
/// tier (docs/vllm.md, "kvtier's cache policy"). Chunks are the engine's
/// slots 0..capacity-1; each holds one node of the prefix tree, a 128-bit
/// hash of the engine's key, with the previous key of its request as its
/// parent when the engine knew it. Uses and evictability come apart, as in
/// vLLM's CachePolicy: a store is a chunk's first use and a reuse the next,
/// while only chunks marked evictable (no transfer reads them) are victims.
/// Nothing is kept per key beyond the frame's bounded history.
/// A node: the 128-bit hash of an engine's key (ChunkEviction::key_hash).
struct ChunkKey {
  std::uint64_t high = 0;
  std::uint64_t low = 0;
  friend bool operator==(const ChunkKey&, const ChunkKey&) = default;
};

class ChunkEviction {
 public:
  /// ConfigError for an order that is not a leaf-first one (lineage, lru, multi_lru) or capacity 0.
  ChunkEviction(EvictionBackend order, std::uint32_t capacity);
  ~ChunkEviction();
  ChunkEviction(const ChunkEviction&) = delete;
  ChunkEviction& operator=(const ChunkEviction&) = delete;

  /// The node of an engine's key bytes (XXH3-128).
  static ChunkKey key_hash(std::span<const std::byte> key) noexcept;

  /// Slot `chunk` now holds `key` (`parent`: its prefix's last key), stored
  /// by a request: its first use, not yet evictable. ContractError, nothing
  /// changed, for a slot outside the cache or one that holds a key.
  void stored(std::uint32_t chunk, const ChunkKey& key, const std::optional<ChunkKey>& parent);
  /// The chunks a request touched, in this order (its tail first, as G1
  /// releases): `reused[i]` nonzero is one more use of chunks[i], zero its
  /// recency renewed without a use (a chunk the request stored itself).
  /// ContractError, nothing changed, for a slot that holds no key or lengths that differ.
  void accessed(std::span<const std::uint32_t> chunks, std::span<const std::uint8_t> reused);
  /// No transfer reads the chunk any more: it may be a victim.
  void evictable(std::uint32_t chunk);
  /// A transfer reads it: not a victim until evictable again.
  void pinned(std::uint32_t chunk);
  /// The slot holds nothing (a store that failed): its history is dropped.
  void removed(std::uint32_t chunk);
  /// Exactly n victims, leaf first, none of `spared`; nullopt and nothing
  /// changed when fewer than n evictable chunks are outside `spared`.
  std::optional<std::vector<std::uint32_t>> evict(std::size_t n, std::span<const std::uint32_t> spared);
  /// Everything forgotten: chunks, history, the policy's adaptive state.
  void clear();

  bool holds(std::uint32_t chunk) const noexcept;
  bool is_evictable(std::uint32_t chunk) const noexcept;
  std::size_t evictable_count() const noexcept;
  std::uint32_t capacity() const noexcept { return capacity_; }
  EvictionBackend order() const noexcept { return order_; }
  std::size_t metadata_bytes() const noexcept;

 private:
  void check_held(std::uint32_t chunk) const;

  EvictionBackend order_;
  std::uint32_t capacity_;
  std::unique_ptr<LeafPriorityPolicy> policy_;
};

}  // namespace kvtier::g1
