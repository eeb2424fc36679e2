#pragma once
// The native backend of a manager with KV cache groups (a hybrid model: more
// than one group, or a group other than full attention): one
// GroupCoordinator, driven by requests — allocate slots, finalize what was
// computed, free — as vLLM's KVCacheManager is. Dynamo's MoveBlock signals
// name one block table per request and have no groups, so every signal call
// is refused with a ContractError that says what to use instead. An offload
// tier keeps each group's blocks under (hash, group) (grouped_backend_tier.cpp).
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "g1/common/block_manager.hpp"
#include "g1/common/reservation_ledger.hpp"
#include "g1/native/groups/group_coordinator.hpp"
#include "kvtier/core/kv_event_publisher.hpp"

namespace kvtier::g1 {

class GroupedBackend final : public BlockManager {
 public:
  GroupedBackend(ModelGeometry geometry, std::uint32_t capacity, bool enable_prefix_caching,
                 KvEventPublisher& publisher);

  // The requests' calls (G1Manager's allocate_slots, finalize_computed_prefix, free_slots).
  G1Acquire allocate(OwnerId owner, const ActiveSequence& sequence, std::size_t tokens, std::size_t reuse_tokens);
  void finalize(OwnerId owner, const ActiveSequence& sequence, std::size_t computed);
  void free(OwnerId owner);
  void begin_step() noexcept { coordinator_.begin_step(); }
  std::vector<PageId> take_pages_to_zero() { return coordinator_.take_pages_to_zero(); }
  /// The owner's pages in `group` but the null page, and the pattern identity
  /// of the block each backs now, for the table's blocks [first_block,
  /// end_block) (G1Manager::group_patterns).
  GroupPatterns patterns(OwnerId owner, const ActiveSequence& sequence, std::size_t group, std::size_t first_block,
                         std::size_t end_block) const;
  const GroupCoordinator& coordinator() const noexcept { return coordinator_; }
  /// The event fields of `group` (group_idx, kind, window, block size).
  KvEventGroup event_group(std::size_t group) const;

  // The offload tier (grouped_backend_tier.cpp).
  void attach_offload(OffloadTier* tier) override;
  void release_quarantined(std::span<const PageId> pages) override;
  std::size_t quarantined() const override { return coordinator_.quarantined_pages(); }
  /// Pins G1 blocks named by group_tier_key.
  std::optional<std::uint64_t> pin_prefix(std::span<const PositionalLineageHash> plhs) override;
  void release_pins(std::uint64_t pins) override;
  SlotGrant reserve_slots(std::size_t count) override;
  std::span<const PageId> reserved_slots(std::uint64_t slots) const override { return slots_.at(slots); }
  void release_slots(std::uint64_t slots) override;
  std::optional<std::size_t> register_swapped_in(std::uint64_t slots, std::span<const TieredBlock> blocks) override;
  /// The blocks a swap-in brings back before `sequence`'s first allocation
  /// (G1Manager::group_swap_in_plan): the fixed point over G1 and the tier.
  SwapInPlan plan_swap_in(const ActiveSequence& sequence, std::size_t prompt_tokens) const;

  // Signals: refused.
  G1Acquire process(OwnerId, const MoveBlock&, std::size_t) override { refuse_signal(); }
  G1Acquire process_use(OwnerId, const UseSignal&, std::size_t) override { refuse_signal(); }
  void process_deref(OwnerId, const DerefSignal&) override { refuse_signal(); }
  void finalize_computed_prefix(OwnerId, std::size_t, std::size_t) override { refuse_signal(); }
  std::optional<std::uint64_t> reserve_decode_blocks(std::size_t) override { refuse_signal(); }
  G1Acquire process_decode(OwnerId, const MoveBlock&, std::uint64_t) override { refuse_signal(); }
  void release_decode(std::uint64_t) override { refuse_signal(); }
  std::optional<DestinationGrant> reserve_destination(OwnerId, const ActiveSequence&, double) override {
    refuse_signal();
  }
  void activate_destination(std::uint64_t) override { refuse_signal(); }
  void cancel_destination(std::uint64_t) override { refuse_signal(); }

  PrefillCost prefill_cost(const ActiveSequence& sequence) const override;
  G1Metrics metrics() const override;
  bool has_owner(OwnerId owner) const override { return coordinator_.has_owner(owner); }
  /// Group 0's table.
  std::span<const PageId> block_table(OwnerId owner) const override { return coordinator_.table(owner, 0); }
  std::span<const UniqueBlock> owned_blocks(OwnerId) const override;
  std::vector<OwnerId> owners() const override;
  /// A copy of `hash` cached for group 0.
  bool is_cached(SequenceHash hash) const override;
  std::size_t metadata_bytes() const override;
  void audit() const override { coordinator_.audit(); }
  std::vector<std::pair<PageId, SequenceHash>> registered_blocks() const override;

 private:
  [[noreturn]] static void refuse_signal();
  /// The sequence's chained hashes at the hash unit (the manager's block
  /// size), a complete tail not yet promoted included; the first `limit`.
  std::vector<SequenceHash> hashes_of(const ActiveSequence& sequence, std::size_t limit = SIZE_MAX) const;
  void check_sequence(const ActiveSequence& sequence) const;
  /// Removed events of every group's evictions since the last call.
  void publish_removed();
  /// Remembers what the tier needs of the blocks `group` just cached (their parent and local hash).
  void remember_for_tier(std::size_t group, std::span<const GroupCoordinator::CachedBlock> cached,
                         const KvStored& stored, std::span<const SequenceHash> hashes);
  /// The tier block of (hash, group) cached on `page`, as finalize remembered it.
  TieredBlock tier_block(PageId page, SequenceHash hash, std::size_t group) const;
  /// Hands the quarantined victims of the last reservation to the tier:
  /// the transfer that copies them, 0 when every one was filtered (their
  /// pages are free: retry now), nullopt when there were none.
  std::optional<std::uint64_t> swap_out_quarantined();
  /// BlockedOnOffload on `transfer`, with the tier's earliest deadline (§5.3).
  G1Acquire blocked_on(std::uint64_t transfer) const;

  GroupCoordinator coordinator_;
  bool caching_;
  KvEventPublisher& publisher_;
  OffloadTier* tier_ = nullptr;
  std::unordered_map<std::uint32_t, TieredBlock> tier_blocks_;  // by page: what a cached copy is to the tier
  detail::ReservationIds reservation_ids_;
  detail::ReservationLedger<NativeReservation> pins_{"prefix pin"};
  detail::ReservationLedger<std::vector<PageId>> slots_{"slot"};
};

}  // namespace kvtier::g1
