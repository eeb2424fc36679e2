#pragma once
// What both G1 backends are made of: the signal dispatch, the offload tier's
// attachment, reservation ids, owner tables and swap-in slots.
#include <cstdint>
#include <span>
#include <vector>

#include "g1/common/block_manager.hpp"
#include "g1/common/owner_tables.hpp"
#include "g1/common/reservation_ledger.hpp"
#include "kvtier/core/kv_event_publisher.hpp"

namespace kvtier::g1::detail {

class BackendCommon : public BlockManager {
 public:
  /// A Use goes to process_use, a Deref to process_deref, a Promote to promote.
  G1Acquire process(OwnerId owner, const MoveBlock& signal, std::size_t reusable_prefix_blocks) final;
  /// Once; a second tier is a ContractError.
  void attach_offload(OffloadTier* tier) final;

 protected:
  BackendCommon(std::uint32_t block_size, KvEventPublisher& publisher)
      : block_size_(block_size), publisher_(publisher) {}
  virtual void promote(OwnerId owner, const PromoteSignal& signal) = 0;
  /// The tier is attached (tier_ is set).
  virtual void on_offload_attached() {}

  /// BlockedOnOffload on `transfer`, with the tier's earliest deadline (§5.3).
  G1Acquire blocked_on(std::uint64_t transfer) const;
  /// The cost of admitting `blocks` blocks of `length` tokens whose first
  /// `overlap` are resident, `active` of them held by a request (§3.7).
  PrefillCost prefill_cost_of(std::size_t overlap, std::size_t active, std::size_t blocks, std::size_t length) const;

  std::uint32_t block_size_;
  KvEventPublisher& publisher_;
  OffloadTier* tier_ = nullptr;
  ReservationIds reservation_ids_;
};

/// BackendCommon with the owners' tables (`Table`: `pages`, `blocks`, `clear()`)
/// and the swap-in slots (fresh pages no table holds yet).
template <class Table>
class TabledBackend : public BackendCommon {
 public:
  bool has_owner(OwnerId owner) const final { return tables_.contains(owner); }
  std::span<const PageId> block_table(OwnerId owner) const final { return tables_.at(owner).pages; }
  std::span<const UniqueBlock> owned_blocks(OwnerId owner) const final { return tables_.at(owner).blocks; }
  std::vector<OwnerId> owners() const final { return tables_.owners(); }
  std::span<const PageId> reserved_slots(std::uint64_t slots) const final { return swap_in_slots_.at(slots); }

 protected:
  using BackendCommon::BackendCommon;

  OwnerTables<Table> tables_;
  ReservationLedger<std::vector<PageId>> swap_in_slots_{"slot"};
};

}  // namespace kvtier::g1::detail
