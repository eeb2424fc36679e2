#pragma once
#include <unordered_map>
#include <unordered_set>

#include "kvtier/core/kv_event_publisher.hpp"
#include "kvtier/g1/block_manager.hpp"
#include "kvtier/g1/native_block_pool.hpp"

namespace kvtier::g1 {

/// The vLLM-style G1 backend, generation N1 (docs/semantics.md §2.4): MoveBlock signals per
/// request owner on a NativeBlockPool. Fresh full blocks are private until
/// finalize_computed_prefix (computed-only visibility); Stored is published
/// then, Removed when the last copy of a hash is evicted (before any Stored of
/// the same operation). With prefix caching off nothing is cached and no event
/// is published.
class NativeBackend final : public BlockManager {
 public:
  NativeBackend(std::uint32_t capacity, std::uint32_t block_size, bool enable_prefix_caching,
                KvEventPublisher& publisher);

  G1Acquire process(OwnerId owner, const MoveBlock& signal, std::size_t reusable_prefix_blocks) override;
  G1Acquire process_use(OwnerId owner, const UseSignal& signal, std::size_t reusable_prefix_blocks) override {
    return use(owner, signal, reusable_prefix_blocks, nullptr);
  }
  void process_deref(OwnerId owner, const DerefSignal& signal) override { deref(owner, signal); }
  void finalize_computed_prefix(OwnerId owner, std::size_t before, std::size_t after) override;
  PrefillCost prefill_cost(const ActiveSequence& sequence) const override;
  std::optional<std::uint64_t> reserve_decode_blocks(std::size_t blocks) override;
  G1Acquire process_decode(OwnerId owner, const MoveBlock& signal, std::uint64_t reservation) override;
  void release_decode(std::uint64_t reservation) override;
  std::optional<DestinationGrant> reserve_destination(OwnerId owner, const ActiveSequence& sequence,
                                                      double now_ms) override;
  void activate_destination(std::uint64_t reservation) override;
  void cancel_destination(std::uint64_t reservation) override;
  G1Metrics metrics() const override;
  bool has_owner(OwnerId owner) const override { return tables_.contains(owner); }
  std::span<const PageId> block_table(OwnerId owner) const override;
  std::span<const UniqueBlock> owned_blocks(OwnerId owner) const override;
  std::vector<OwnerId> owners() const override;
  bool is_cached(SequenceHash hash) const override { return pool_.is_resident(hash); }
  std::size_t metadata_bytes() const override;
  void audit() const override;
  std::vector<std::pair<PageId, SequenceHash>> registered_blocks() const override;

  void attach_offload(OffloadTier* tier) override;
  void release_quarantined(std::span<const PageId> pages) override;
  std::size_t quarantined() const override { return pool_.quarantined(); }
  std::optional<std::uint64_t> pin_prefix(std::span<const PositionalLineageHash> keys) override;
  void release_pins(std::uint64_t pins) override;
  SlotGrant reserve_slots(std::size_t count) override;
  std::span<const PageId> reserved_slots(std::uint64_t slots) const override;
  void release_slots(std::uint64_t slots) override;
  std::size_t register_swapped_in(std::uint64_t slots, std::span<const TieredBlock> blocks) override;

  const NativeBlockPool& pool() const noexcept { return pool_; }

 private:
  /// Store metadata of an owned block, kept until it becomes visible.
  struct BlockMeta {
    std::uint64_t store_parent = 0;
    std::uint64_t local = 0;
    bool pending_store = false;
    bool has_store_parent = false;
    bool has_local = false;
    bool has_token_ids = false;  // its block_size ids are in OwnerTable::token_ids
  };
  struct OwnerTable {
    std::vector<PageId> pages;
    std::vector<UniqueBlock> blocks;
    std::vector<BlockMeta> meta;
    /// Token ids where given, flat: position p's are [p * block_size, (p + 1) *
    /// block_size) when meta[p].has_token_ids (no allocation per block).
    std::vector<TokenId> token_ids;
    std::span<const TokenId> token_ids_at(std::size_t position, std::size_t block_size) const {
      if (!meta[position].has_token_ids) return {};
      return {token_ids.data() + position * block_size, block_size};
    }
    /// Stores the ids of the block being appended at `position` (the last one).
    void append_token_ids(std::size_t position, std::span<const TokenId> ids) {
      token_ids.resize(position * ids.size());
      token_ids.insert(token_ids.end(), ids.begin(), ids.end());
    }
    /// Empty, capacity kept (a spare table).
    void clear() noexcept {
      pages.clear();
      blocks.clear();
      meta.clear();
      token_ids.clear();
    }
  };
  struct Destination {
    NativeReservation reservation;
    OwnerId owner;
    std::vector<UniqueBlock> blocks;
    std::vector<LocalBlockHash> local_hashes;  // aligned with the full blocks, empty when unknown
    std::optional<BlockTokenIds> token_ids;
  };
  /// A block that became visible in this operation, or a gap that splits runs.
  struct VisibleBlock {
    bool gap = false;
    std::optional<SequenceHash> parent;
    StoredBlock block;
    bool has_local = false;
    bool has_token_ids = false;
    std::span<const TokenId> token_ids{};  // valid until the blocks are published
    static VisibleBlock run_gap() {
      VisibleBlock gap;
      gap.gap = true;
      return gap;
    }
  };

  G1Acquire use(OwnerId owner, const UseSignal& signal, std::size_t reusable, NativeReservation* decode);
  void validate_use(OwnerId owner, const UseSignal& signal, std::size_t reusable) const;
  void commit_use(OwnerId owner, const UseSignal& signal, NativeReservation& reservation);
  void deref(OwnerId owner, const DerefSignal& signal);
  void promote(OwnerId owner, const PromoteSignal& signal);
  const OwnerTable& table(OwnerId owner) const;
  void publish_removed(std::vector<SequenceHash> removed);
  /// A pool reservation that hands its evicted last copies to the offload
  /// tier (docs/offload.md): nullopt with `blocked` set when a copy now reads
  /// some of them, nullopt alone when capacity is exhausted. Removed events
  /// of the evictions are published either way.
  template <class Reserve>
  std::optional<NativeReserveOutcome> reserve_with_offload(Reserve reserve, G1Acquire& blocked);
  /// What the tier must know of a cached page's block when it is evicted.
  void remember_for_tier(PageId page, const TieredBlock& block);
  void publish_visible_runs(const std::vector<VisibleBlock>& visible);


  std::uint32_t block_size_;
  bool caching_;
  KvEventPublisher& publisher_;
  NativeBlockPool pool_;
  std::unordered_map<OwnerId, OwnerTable> tables_;
  std::vector<std::unordered_map<OwnerId, OwnerTable>::node_type> spare_tables_;  // detail::retire_table
  std::vector<VisibleBlock> visible_;  // finalize's scratch, reused
  std::unordered_set<Uuid> live_partials_;
  std::unordered_map<std::uint64_t, NativeReservation> decode_reservations_;
  std::unordered_map<std::uint64_t, Destination> destinations_;
  std::uint64_t next_reservation_id_ = 1;
  OffloadTier* tier_ = nullptr;
  std::unordered_map<std::uint32_t, TieredBlock> tier_blocks_;  // by page; only with a tier, overwritten on reuse
  std::unordered_map<std::uint64_t, NativeReservation> prefix_pins_;
  std::unordered_map<std::uint64_t, std::vector<PageId>> swap_in_slots_;  // private pages no table holds yet
};

}  // namespace kvtier::g1
