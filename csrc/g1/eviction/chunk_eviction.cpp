#include "kvtier/g1/chunk_eviction.hpp"

#include <string>

#include <xxhash.h>

#include "g1/eviction/adaptive_eviction_policy.hpp"
#include "g1/eviction/arc_eviction_policy.hpp"
#include "g1/eviction/lfu_da_eviction_policy.hpp"
#include "g1/eviction/lru2_eviction_policy.hpp"
#include "g1/eviction/s3_fifo_eviction_policy.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::g1 {
namespace {

/// History kept for an engine's host cache: two generations of four
/// capacities each (G1's pools keep two). Chosen on the shipped trace through
/// vLLM's own manager (docs/performance.md, "kvtier's cache policy inside
/// vLLM's CPU tier": the hits at 2, 4 and 8, and on parts of the trace).
constexpr std::uint32_t kHistoryCapacities = 4;

std::unique_ptr<LeafPriorityPolicy> make_leaf_policy(EvictionBackend order, std::uint32_t capacity) {
  switch (order) {
    case EvictionBackend::Lru2:
      return std::make_unique<Lru2EvictionPolicy>(capacity, kHistoryCapacities);
    case EvictionBackend::LfuDa:
      return std::make_unique<LfuDaEvictionPolicy>(capacity, kHistoryCapacities);
    case EvictionBackend::Arc:
      return std::make_unique<ArcEvictionPolicy>(capacity, kHistoryCapacities);
    case EvictionBackend::S3Fifo:
      return std::make_unique<S3FifoEvictionPolicy>(capacity, kHistoryCapacities);
    case EvictionBackend::Adaptive:
      return std::make_unique<AdaptiveEvictionPolicy>(capacity, kHistoryCapacities);
    case EvictionBackend::Lineage:
    case EvictionBackend::Lru:
    case EvictionBackend::MultiLru:
      break;
  }
  throw ConfigError(std::string("'") + eviction_backend_name(order) +
                    "' is not a leaf-first order (expected lru2, lfu_da, arc, s3fifo or adaptive)");
}

LeafPriorityPolicy::NodeKey node(const ChunkKey& key) { return {key.high, key.low}; }

std::uint32_t checked_capacity(std::uint32_t capacity) {
  if (capacity == 0) throw ConfigError("a chunk cache of 0 chunks");
  return capacity;
}

}  // namespace

ChunkEviction::ChunkEviction(EvictionBackend order, std::uint32_t capacity)
    : order_(order), capacity_(checked_capacity(capacity)), policy_(make_leaf_policy(order, capacity)) {}

ChunkEviction::~ChunkEviction() = default;

ChunkKey ChunkEviction::key_hash(std::span<const std::byte> key) noexcept {
  const XXH128_hash_t hash = XXH3_128bits(key.data(), key.size());
  return {hash.high64, hash.low64};
}

void ChunkEviction::check_held(std::uint32_t chunk) const {
  KVTIER_EXPECTS(policy_->holds(chunk), "chunk " + std::to_string(chunk) + " holds no key");
}

void ChunkEviction::stored(std::uint32_t chunk, const ChunkKey& key, const std::optional<ChunkKey>& parent) {
  KVTIER_EXPECTS(chunk < capacity_,
                 "chunk " + std::to_string(chunk) + " is outside the cache of " + std::to_string(capacity_));
  KVTIER_EXPECTS(!policy_->holds(chunk), "chunk " + std::to_string(chunk) + " holds a key already");
  std::optional<LeafPriorityPolicy::NodeKey> parent_node;
  if (parent) parent_node = node(*parent);
  policy_->record_use(chunk, node(key), parent_node,
                      PositionalLineageHash::from_raw(key.high, key.low));  // as record_use_again keys it
}

void ChunkEviction::accessed(std::span<const std::uint32_t> chunks, std::span<const std::uint8_t> reused) {
  KVTIER_EXPECTS(chunks.size() == reused.size(),
                 std::to_string(chunks.size()) + " chunks with " + std::to_string(reused.size()) + " reuse flags");
  for (const std::uint32_t chunk : chunks) check_held(chunk);
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    if (reused[i] != 0) {
      policy_->record_use_again(chunks[i]);
    } else {
      policy_->record_recency(chunks[i]);
    }
  }
}

void ChunkEviction::evictable(std::uint32_t chunk) {
  check_held(chunk);
  if (!policy_->in_pool(chunk)) policy_->enter_pool(chunk);
}

void ChunkEviction::pinned(std::uint32_t chunk) {
  check_held(chunk);
  if (policy_->in_pool(chunk)) policy_->leave_pool(chunk);
}

void ChunkEviction::removed(std::uint32_t chunk) {
  check_held(chunk);
  policy_->forget(chunk);
}

std::optional<std::vector<std::uint32_t>> ChunkEviction::evict(std::size_t n, std::span<const std::uint32_t> spared) {
  return policy_->evict_exactly(n, spared);
}

void ChunkEviction::clear() { policy_ = make_leaf_policy(order_, capacity_); }

bool ChunkEviction::holds(std::uint32_t chunk) const noexcept { return policy_->holds(chunk); }
bool ChunkEviction::is_evictable(std::uint32_t chunk) const noexcept { return policy_->in_pool(chunk); }
std::size_t ChunkEviction::evictable_count() const noexcept { return policy_->size(); }
std::size_t ChunkEviction::metadata_bytes() const noexcept { return policy_->metadata_bytes(); }

}  // namespace kvtier::g1
