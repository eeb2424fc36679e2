#pragma once
#include <unordered_map>
#include <unordered_set>

#include "g1/common/backend_common.hpp"
#include "g1/common/destination_prompt.hpp"
#include "g1/native/native_block_pool.hpp"

namespace kvtier::g1 {
namespace detail {

/// Store metadata of an owned block, kept until it becomes visible.
struct NativeBlockMeta {
  std::uint64_t store_parent = 0;
  std::uint64_t local = 0;
  bool pending_store = false;
  bool has_store_parent = false;
  bool has_local = false;
  bool has_token_ids = false;  // its block_size ids are in NativeOwnerTable::token_ids

  std::optional<SequenceHash> parent() const {
    return has_store_parent ? std::optional<SequenceHash>(SequenceHash(store_parent)) : std::nullopt;
  }
};

/// A native owner's table: its blocks, their pages and what their Stored events need.
struct NativeOwnerTable {
  std::vector<PageId> pages;
  std::vector<UniqueBlock> blocks;
  std::vector<NativeBlockMeta> meta;
  /// Token ids where given, flat: position p's are [p * block_size, (p + 1) *
  /// block_size) when meta[p].has_token_ids (no allocation per block).
  std::vector<TokenId> token_ids;

  bool columns_aligned() const noexcept { return pages.size() == blocks.size() && meta.size() == blocks.size(); }
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

}  // namespace detail

/// The vLLM-style G1 backend, generation N1 (docs/semantics.md §2.4): MoveBlock signals per
/// request owner on a NativeBlockPool. Fresh full blocks are private until
/// finalize_computed_prefix (computed-only visibility); Stored is published
/// then, Removed when the last copy of a hash is evicted (before any Stored of
/// the same operation). With prefix caching off nothing is cached and no event
/// is published.
class NativeBackend final : public detail::TabledBackend<detail::NativeOwnerTable> {
 public:
  /// `order`: the inactive order (NativeBlockPool); nullopt: vLLM's LRU.
  NativeBackend(std::uint32_t capacity, std::uint32_t block_size, bool enable_prefix_caching,
                KvEventPublisher& publisher, std::optional<EvictionBackend> order = std::nullopt);

  // Signals and visibility (native_signals.cpp).
  G1Acquire process_use(OwnerId owner, const UseSignal& signal, std::size_t reusable_prefix_blocks) override {
    return use(owner, signal, reusable_prefix_blocks, nullptr);
  }
  G1Acquire process_use_computed(OwnerId owner, const UseSignal& signal, const ComputedPrefix& computed) override {
    return use(owner, signal, computed.blocks, nullptr, &computed);
  }
  void process_deref(OwnerId owner, const DerefSignal& signal) override;
  void finalize_computed_prefix(OwnerId owner, std::size_t before, std::size_t after) override;

  // Reservations (native_reservations.cpp).
  PrefillCost prefill_cost(const ActiveSequence& sequence) const override;
  std::optional<std::uint64_t> reserve_decode_blocks(std::size_t blocks) override;
  G1Acquire process_decode(OwnerId owner, const MoveBlock& signal, std::uint64_t reservation) override;
  void release_decode(std::uint64_t reservation) override;
  std::optional<DestinationGrant> reserve_destination(OwnerId owner, const ActiveSequence& sequence,
                                                      double now_ms) override;
  void activate_destination(std::uint64_t reservation) override;
  void cancel_destination(std::uint64_t reservation) override;

  // The offload tier's hooks (native_offload.cpp).
  void release_quarantined(std::span<const PageId> pages) override;
  std::optional<std::uint64_t> pin_prefix(std::span<const PositionalLineageHash> keys) override;
  void release_pins(std::uint64_t pins) override;
  SlotGrant reserve_slots(std::size_t count) override;
  void release_slots(std::uint64_t slots) override;
  std::optional<std::size_t> register_swapped_in(std::uint64_t slots, std::span<const TieredBlock> blocks) override;

  // What it holds (native_audit.cpp).
  G1Metrics metrics() const override;
  bool is_cached(SequenceHash hash) const override { return pool_.is_resident(hash); }
  void computed_prefix(std::span<const UniqueBlock> blocks, ComputedPrefix& into) const override;
  std::size_t quarantined() const override { return pool_.quarantined(); }
  std::size_t metadata_bytes() const override;
  void audit() const override;
  std::vector<std::pair<PageId, SequenceHash>> registered_blocks() const override;
  const NativeBlockPool& pool() const noexcept { return pool_; }

 private:
  /// How a reservation takes its prefix: every hash resident (Exact, an
  /// empty prefix reserves fresh pages only) or the longest resident run.
  enum class PrefixRule : std::uint8_t { Exact, LongestResident };
  struct Destination {
    NativeReservation reservation;
    OwnerId owner;
    detail::DestinationPrompt prompt;
  };

  /// `computed`: the pages of the reused prefix as get_computed_blocks found them.
  G1Acquire use(OwnerId owner, const UseSignal& signal, std::size_t reusable, NativeReservation* decode,
                const ComputedPrefix* computed = nullptr);
  void validate_use(OwnerId owner, const UseSignal& signal, std::size_t reusable) const;
  void commit_use(OwnerId owner, const UseSignal& signal, NativeReservation& reservation);
  void promote(OwnerId owner, const PromoteSignal& signal) override;
  /// The reused prefix of a reservation joins the owner's table (nothing to store).
  void activate_prefix(detail::NativeOwnerTable& owned, NativeReservation& reservation);
  void publish_removed(std::vector<SequenceHash> removed);
  /// A pool reservation that hands its evicted last copies to the offload
  /// tier (docs/offload.md): nullopt with `blocked` set when a copy now reads
  /// some of them, nullopt alone when capacity is exhausted. Removed events
  /// of the evictions are published either way.
  /// Exact with `computed`: its pages are pinned without a second lookup while current.
  std::optional<NativeReserveOutcome> reserve_with_offload(PrefixRule rule, std::span<const SequenceHash> prefix,
                                                           std::uint32_t total, G1Acquire& blocked,
                                                           const ComputedPrefix* computed = nullptr);
  void on_offload_attached() override;
  /// What the tier must know of a cached page's block when it is evicted.
  void remember_for_tier(PageId page, const TieredBlock& block);

  bool caching_;
  NativeBlockPool pool_;
  std::unordered_set<Uuid> live_partials_;
  detail::ReservationLedger<NativeReservation> decode_reservations_{"decode"};
  detail::ReservationLedger<Destination> destinations_{"destination"};
  detail::ReservationLedger<NativeReservation> prefix_pins_{"prefix pin"};
  std::vector<SequenceHash> prefix_;                            // a Use's reused hashes, kept for the next Use
  std::unordered_map<std::uint32_t, TieredBlock> tier_blocks_;  // by page; only with a tier, overwritten on reuse
};

}  // namespace kvtier::g1
