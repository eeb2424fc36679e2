#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kvtier/core/active_sequence.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/core/move_block.hpp"
#include "kvtier/g1/computed_prefix.hpp"
#include "kvtier/g1/g1_types.hpp"
#include "kvtier/g1/offload_tier.hpp"

namespace kvtier::g1 {

/// What a G1 backend implements; G1Manager forwards to one of them. Every
/// method that throws ContractError leaves the backend exactly as it was.
/// Reservation ids are the backend's own; the facade wraps them in handles.
class BlockManager {
 public:
  virtual ~BlockManager() = default;

  virtual G1Acquire process(OwnerId owner, const MoveBlock& signal, std::size_t reusable_prefix_blocks) = 0;
  /// The same for a Use or a Deref the caller holds as such: no MoveBlock is
  /// built around it (that copy would cost one allocation per token-id list).
  virtual G1Acquire process_use(OwnerId owner, const UseSignal& signal, std::size_t reusable_prefix_blocks) = 0;
  /// A request's first Use handed its get_computed_blocks result: the
  /// default reuses its length (a backend that keeps no pages looks it up again).
  virtual G1Acquire process_use_computed(OwnerId owner, const UseSignal& signal, const ComputedPrefix& computed) {
    return process_use(owner, signal, computed.blocks);
  }
  virtual void process_deref(OwnerId owner, const DerefSignal& signal) = 0;
  /// Native: makes computed pending blocks visible. KVBM: no-op.
  virtual void finalize_computed_prefix(OwnerId owner, std::size_t before, std::size_t after) = 0;
  virtual PrefillCost prefill_cost(const ActiveSequence& sequence) const = 0;

  /// nullopt: capacity exhausted.
  virtual std::optional<std::uint64_t> reserve_decode_blocks(std::size_t blocks) = 0;
  virtual G1Acquire process_decode(OwnerId owner, const MoveBlock& signal, std::uint64_t reservation) = 0;
  virtual void release_decode(std::uint64_t reservation) = 0;

  struct DestinationGrant {
    std::uint64_t id = 0;
    std::size_t transferable_prompt_tokens = 0;
  };
  virtual std::optional<DestinationGrant> reserve_destination(OwnerId owner, const ActiveSequence& sequence,
                                                              double now_ms) = 0;
  virtual void activate_destination(std::uint64_t reservation) = 0;
  virtual void cancel_destination(std::uint64_t reservation) = 0;

  virtual G1Metrics metrics() const = 0;
  virtual bool has_owner(OwnerId owner) const = 0;
  /// Physical pages of the owner's blocks, in request order (ContractError for an unknown owner).
  virtual std::span<const PageId> block_table(OwnerId owner) const = 0;
  /// The identities those pages back now, aligned with block_table.
  virtual std::span<const UniqueBlock> owned_blocks(OwnerId owner) const = 0;
  virtual std::vector<OwnerId> owners() const = 0;
  /// A hash-addressable copy of `hash` is resident (active or inactive).
  virtual bool is_cached(SequenceHash hash) const = 0;
  /// vLLM's get_computed_blocks: the resident leading run of `blocks`' full
  /// blocks into `into`. The default asks is_cached block by block and keeps no pages.
  virtual void computed_prefix(std::span<const UniqueBlock> blocks, ComputedPrefix& into) const {
    into.pages.clear();
    into.generation = 0;
    std::size_t n = 0;
    while (n < blocks.size() && blocks[n].is_full() && is_cached(blocks[n].hash())) ++n;
    into.blocks = n;
  }
  /// Bytes of per-page and per-block bookkeeping held now.
  virtual std::size_t metadata_bytes() const = 0;
  /// Checks every internal invariant — each page in a table is held (never
  /// free), page references equal table entries, the free and inactive lists
  /// and the counts agree — and throws InvariantError naming the first broken
  /// one. O(pages + table entries): for tests and the operation harness.
  virtual void audit() const = 0;
  /// Every hash-addressable block resident now (active or inactive) with its
  /// page, in page order: what integrity checks walk.
  virtual std::vector<std::pair<PageId, SequenceHash>> registered_blocks() const = 0;

  // Offload (docs/offload.md). The defaults are a backend without a tier:
  // nothing is quarantined, and every call that needs a tier is refused.
  /// From now on, eviction of a registered block hands it to `tier`
  /// (docs/semantics.md §5.2); an allocation whose victims went to a copy does
  /// not commit and answers BlockedOnOffload (§5.3).
  virtual void attach_offload(OffloadTier* /*tier*/) {
    throw ContractError("this G1 backend cannot attach an offload tier");
  }
  /// The copies reading these quarantined pages have stopped: free them.
  virtual void release_quarantined(std::span<const PageId> /*pages*/) { no_tier(); }
  virtual std::size_t quarantined() const { return 0; }
  /// Pins the registered blocks `plhs` (all of them, or nothing: nullopt).
  virtual std::optional<std::uint64_t> pin_prefix(std::span<const PositionalLineageHash> /*plhs*/) { no_tier(); }
  virtual void release_pins(std::uint64_t /*pins*/) { no_tier(); }
  /// Fresh pages for a swap-in's destination. Ready: `id` names them.
  struct SlotGrant {
    G1Acquire acquire;
    std::uint64_t id = 0;
  };
  virtual SlotGrant reserve_slots(std::size_t /*count*/) { no_tier(); }
  virtual std::span<const PageId> reserved_slots(std::uint64_t /*slots*/) const { no_tier(); }
  virtual void release_slots(std::uint64_t /*slots*/) { no_tier(); }
  /// Registers blocks[i] on reserved slot i as an inactive G1 block (one
  /// already registered keeps its page and the slot is freed), publishes the
  /// Device Stored runs and frees the unused slots; returns how many it
  /// registered. nullopt, with nothing changed and the slots still reserved,
  /// when the eviction pool refuses the blocks (a lineage collision).
  virtual std::optional<std::size_t> register_swapped_in(std::uint64_t /*slots*/,
                                                         std::span<const TieredBlock> /*blocks*/) {
    no_tier();
  }

 private:
  [[noreturn]] static void no_tier() { throw ContractError("this G1 backend has no offload tier"); }
};

}  // namespace kvtier::g1
