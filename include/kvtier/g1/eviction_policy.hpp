#pragma once
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "kvtier/core/lineage_hash.hpp"
#include "kvtier/core/strong_id.hpp"

namespace kvtier::g1 {

/// How the KVBM inactive pool picks victims: Dynamo's `MockerEvictionBackend`
/// (Lineage, Lru, MultiLru), then kvtier's history-aware policies on leaves
/// (docs/policies.md).
enum class EvictionBackend : std::uint8_t { Lineage, Lru, MultiLru, Lru2, LfuDa, Arc, S3Fifo, Adaptive };
const char* eviction_backend_name(EvictionBackend backend) noexcept;
/// "lineage", "lru", "multi_lru", "lru2", "lfu_da", "arc", "s3fifo" or "adaptive";
/// throws ConfigError otherwise.
EvictionBackend parse_eviction_backend(std::string_view name);

/// The KVBM inactive pool: registered blocks that no request owns, each on its
/// own page, evicted in the policy's order (docs/semantics.md §4.2). Pages are the handles;
/// every policy is sized once for the G1 capacity.
class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;

  /// Why inserting these blocks (in order) would fail — a duplicate, or
  /// (Lineage) a colliding (position, fragment) — or nullopt when it would not.
  virtual std::optional<std::string> insert_refusal(std::span<const PositionalLineageHash> plhs) const = 0;
  /// ContractError with insert_refusal's reason, if there is one.
  void check_insertable(std::span<const PositionalLineageHash> plhs) const;
  /// `page`, holding the registered block `plh`, lost its last owner.
  virtual void insert(PageId page, const PositionalLineageHash& plh) = 0;
  /// A match took the page back. Precondition: contains(page).
  virtual void remove(PageId page) = 0;
  virtual bool contains(PageId page) const = 0;
  /// Removes and returns the next victim; nullopt when the pool is empty.
  virtual std::optional<PageId> evict() = 0;
  /// Evictable blocks held (Lineage ghosts excluded).
  virtual std::size_t size() const = 0;
  /// A registration or a match of `plh` (frequency signal; MultiLru only).
  virtual void touch(const PositionalLineageHash& /*plh*/) {}
  virtual std::size_t metadata_bytes() const = 0;
};

std::unique_ptr<EvictionPolicy> make_eviction_policy(EvictionBackend backend, std::uint32_t capacity);

}  // namespace kvtier::g1
