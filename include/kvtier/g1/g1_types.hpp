#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kvtier/core/strong_id.hpp"

namespace kvtier::g1 {

struct OwnerIdTag;
/// A request that owns G1 blocks (Dynamo's request UUID; any unique integer).
using OwnerId = StrongId<OwnerIdTag, std::uint64_t>;

/// Which G1 implementation a G1Manager forwards to.
enum class G1Backend : std::uint8_t { Native, Kvbm };
const char* backend_name(G1Backend backend) noexcept;

/// Outcome of an allocating operation (Dynamo's `G1Acquire<usize>`). Expected
/// outcomes are values; contract violations throw ContractError.
struct G1Acquire {
  enum class Kind : std::uint8_t { Ready, CapacityExhausted, BlockedOnOffload };
  Kind kind = Kind::Ready;
  std::size_t count = 0;         // Ready: blocks processed
  std::uint64_t offload_id = 0;  // BlockedOnOffload
  double deadline_ms = 0.0;      // BlockedOnOffload: an estimate, not a completion time

  static G1Acquire ready(std::size_t n) { return {Kind::Ready, n, 0, 0.0}; }
  static G1Acquire capacity_exhausted() { return {Kind::CapacityExhausted, 0, 0, 0.0}; }
  bool is_ready() const noexcept { return kind == Kind::Ready; }
  friend bool operator==(const G1Acquire&, const G1Acquire&) = default;
};

/// What admitting a sequence costs (docs/semantics.md §3.7).
struct PrefillCost {
  std::size_t new_blocks = 0;
  std::size_t new_tokens = 0;
  std::size_t cached_tokens = 0;
  std::size_t active_cached_tokens = 0;
  /// A manager with KV cache groups: the shared prefix the first group looked
  /// up could serve beyond `cached_tokens` but a sparse group has not
  /// checkpointed (vLLM's uncached common prefix). 0 otherwise.
  std::size_t uncached_common_prefix_tokens = 0;
  friend bool operator==(const PrefillCost&, const PrefillCost&) = default;
};

/// Pages of one group of a request and, aligned, the identity of the block
/// each backs now: what a pattern writes and a check expects.
struct GroupPatterns {
  std::vector<PageId> pages;
  std::vector<std::uint64_t> identities;
};

/// Pages of one KV cache group: held by requests (active) and cached with no holder (inactive).
struct GroupUsage {
  std::size_t active = 0;
  std::size_t inactive = 0;
  friend bool operator==(const GroupUsage&, const GroupUsage&) = default;
};

/// The reported block counts of docs/semantics.md §1.4.
struct G1Metrics {
  std::size_t active_blocks = 0;
  std::size_t active_block_refs = 0;
  std::size_t inactive_blocks = 0;
  std::size_t capacity = 0;
  double active_perc() const noexcept {
    return capacity == 0 ? 0.0 : static_cast<double>(active_blocks) / static_cast<double>(capacity);
  }
};

/// A handle to capacity a backend promised for decode growth. Move it into
/// the call that consumes or releases it; using it with another manager or
/// backend is a ContractError.
struct DecodeReservation {
  std::uint64_t manager = 0;
  std::uint64_t id = 0;
  G1Backend backend = G1Backend::Native;
  std::size_t blocks = 0;
};

/// A handle to the prompt capacity of a request whose KV arrives by transfer
/// (disaggregated decode side).
struct DestinationReservation {
  std::uint64_t manager = 0;
  std::uint64_t id = 0;
  G1Backend backend = G1Backend::Native;
  OwnerId owner;
  /// fresh_blocks x block_size: what must actually be transferred.
  std::size_t transferable_prompt_tokens = 0;
};

}  // namespace kvtier::g1
