#pragma once
#include <unordered_map>

#include "g1/common/backend_common.hpp"
#include "g1/common/destination_prompt.hpp"
#include "g1/common/id_index.hpp"
#include "kvtier/g1/eviction_policy.hpp"

namespace kvtier::g1 {
namespace detail {

/// A KVBM owner's table: its blocks and the pages they are on.
struct KvbmOwnerTable {
  std::vector<PageId> pages;
  std::vector<UniqueBlock> blocks;
  bool columns_aligned() const noexcept { return pages.size() == blocks.size(); }
  /// Empty, capacity kept (a spare table).
  void clear() noexcept {
    pages.clear();
    blocks.clear();
  }
};

}  // namespace detail

/// The KVBM-style G1 backend with N2 transactional semantics (docs/semantics.md §2.5):
/// a registry keyed by positional lineage hash, one canonical page per
/// registered block with a logical owner count, eager visibility (Stored at
/// Use time), the Reject duplication policy (a second registration adopts the
/// canonical block), and an inactive pool ordered by an EvictionPolicy.
/// A Use that cannot get its pages changes nothing, not even eviction order.
class KvbmBackend final : public detail::TabledBackend<detail::KvbmOwnerTable> {
 public:
  KvbmBackend(std::uint32_t capacity, std::uint32_t block_size, EvictionBackend eviction, KvEventPublisher& publisher);
  KvbmBackend(const KvbmBackend&) = delete;  // the indexes point into this object
  KvbmBackend& operator=(const KvbmBackend&) = delete;

  // Signals (kvbm_signals.cpp). KVBM matches by lineage on its own: the reuse hint is not needed.
  G1Acquire process_use(OwnerId owner, const UseSignal& signal, std::size_t /*reusable_prefix_blocks*/) override {
    return use(owner, signal, nullptr);
  }
  void process_deref(OwnerId owner, const DerefSignal& signal) override;
  void finalize_computed_prefix(OwnerId, std::size_t, std::size_t) override {}  // visible at Use time already

  // Reservations and the offload tier (kvbm_reservations.cpp).
  PrefillCost prefill_cost(const ActiveSequence& sequence) const override;
  std::optional<std::uint64_t> reserve_decode_blocks(std::size_t blocks) override;
  G1Acquire process_decode(OwnerId owner, const MoveBlock& signal, std::uint64_t reservation) override;
  void release_decode(std::uint64_t reservation) override;
  std::optional<DestinationGrant> reserve_destination(OwnerId owner, const ActiveSequence& sequence,
                                                      double now_ms) override;
  void activate_destination(std::uint64_t reservation) override;
  void cancel_destination(std::uint64_t reservation) override;
  std::optional<std::uint64_t> pin_prefix(std::span<const PositionalLineageHash> plhs) override;
  void release_pins(std::uint64_t pins) override;
  SlotGrant reserve_slots(std::size_t count) override;
  void release_slots(std::uint64_t slots) override;
  std::optional<std::size_t> register_swapped_in(std::uint64_t slots, std::span<const TieredBlock> blocks) override;
  void release_quarantined(std::span<const PageId> pages) override;

  // What it holds (kvbm_audit.cpp).
  G1Metrics metrics() const override;
  bool is_cached(SequenceHash hash) const override { return page_of_hash(hash.value()) != kNoPage; }
  /// The resident run, looked up a few blocks ahead so the index misses overlap.
  void computed_prefix(std::span<const UniqueBlock> blocks, ComputedPrefix& into) const override;
  std::size_t quarantined() const override { return quarantined_; }
  std::size_t metadata_bytes() const override;
  void audit() const override;
  std::vector<std::pair<PageId, SequenceHash>> registered_blocks() const override;
  /// The registered block's logical owner count (0 when inactive or unknown).
  std::uint32_t logical_refs(SequenceHash hash) const;
  const EvictionPolicy& eviction_policy() const noexcept { return *policy_; }

 private:
  static constexpr std::uint32_t kMaxPins = 0xFFFF;  // Page::pins is 16 bits
  /// Quarantined: evicted, and a swap-out copy still reads it (docs/offload.md).
  enum class PageState : std::uint8_t { Reset, Held, Partial, Registered, Quarantined };
  /// One physical page. Registered pages carry their block's metadata (the
  /// registry entry); `refs` are logical owners, `pins` reservation holds.
  struct Page {
    PositionalLineageHash plh;
    std::uint64_t hash = 0;
    std::uint64_t parent = 0;
    std::uint64_t local = 0;
    std::uint32_t refs = 0;  // also links the free list while the page is Reset
    std::uint16_t pins = 0;
    PageState state = PageState::Reset;
    std::uint8_t flags = 0;  // kHasParent | kHasTokenIds | kMarked
  };
  static_assert(sizeof(Page) == 48, "the per-page budget (docs/performance.md) counts on 48 bytes");
  static constexpr std::uint8_t kHasParent = 1;
  static constexpr std::uint8_t kHasTokenIds = 2;
  static constexpr std::uint8_t kMarked = 4;  // scratch mark while a Deref is validated
  /// The first registered page of its sequence hash: what a lookup by
  /// sequence hash answers (a later page of the same hash is found by its
  /// PLH only, also once the first is gone: Dynamo's mocker keeps the first).
  static constexpr std::uint8_t kHashIndexed = 8;
  /// One index for both keys. A block's PLH carries the low bits of its
  /// sequence hash as its current fragment (at least 51 of them), so an entry
  /// filed under those bits is found both by PLH and by sequence hash: one
  /// insert and one erase a block. A page whose PLH and hash disagree there
  /// (injected test hashes) is filed under each.
  static constexpr std::uint64_t kFiledBits = (std::uint64_t{1} << 51) - 1;
  static std::uint64_t filed_under(std::uint64_t hash_bits) noexcept { return hash_bits & kFiledBits; }
  static std::uint64_t filed_under(const PositionalLineageHash& plh) noexcept {
    return filed_under(plh.current_fragment());
  }
  struct FiledKey {
    static std::uint64_t hash(std::uint64_t key) noexcept { return key; }
  };
  enum class Kind : std::uint8_t { ActiveHit, Matched, Fresh };
  struct Classified {
    Kind kind;
    std::uint32_t page;
  };
  struct Destination {
    OwnerId owner;
    detail::DestinationPrompt prompt;
    std::vector<PositionalLineageHash> plhs;  // of the full blocks
    std::vector<std::uint32_t> prefix_pages;  // pinned
    std::vector<std::uint32_t> slots;         // held for the rest
  };

  G1Acquire use(OwnerId owner, const UseSignal& signal, std::vector<std::uint32_t>* decode_slots);
  void validate_use(const UseSignal& signal) const;
  std::vector<Classified> classify(const UseSignal& signal) const;
  void promote(OwnerId owner, const PromoteSignal& signal) override;
  /// take_pages and hand_off: `count` fresh slots, or nullopt with `blocked`
  /// set when a copy now reads a victim. Evicted hashes go to `removed`,
  /// which the caller publishes (after the Stored runs of a Use, §2.5).
  std::optional<std::vector<std::uint32_t>> take_slots(std::size_t count, std::vector<SequenceHash>& removed,
                                                       G1Acquire& blocked);
  void publish_removed(std::vector<SequenceHash>&& removed);

  /// How many pages an all-or-nothing allocation could get, not counting
  /// inactive pages that are about to be taken back by a match.
  std::size_t obtainable(std::span<const std::uint32_t> resurrecting) const;
  /// Takes `count` pages, reset ones first, then victims; appends evicted
  /// registered hashes to `removed`. Precondition: obtainable >= count.
  std::vector<std::uint32_t> take_pages(std::size_t count, std::vector<SequenceHash>& removed,
                                        std::vector<EvictedBlock>& victims);
  /// Hands the registered victims of take_pages to the offload tier. When a
  /// copy now reads some of them they are quarantined, every other taken page
  /// is freed and the answer is the blocking transfer (§5.3); otherwise
  /// (no tier, or all filtered: the spec's RetryNow) `slots` stay usable.
  std::optional<std::uint64_t> hand_off(std::vector<std::uint32_t>& slots, std::vector<EvictedBlock>& victims);
  /// Drops one pin from each page, leaf (last) first; unheld pages go inactive.
  void unpin_pages(std::span<const std::uint32_t> pages);
  /// Back to the reset pool; InvariantError when the page is free already.
  void return_page(std::uint32_t page);
  void push_free(std::uint32_t page) noexcept;
  /// One more logical owner; an inactive page is taken back from the pool.
  void add_ref(std::uint32_t page);
  void drop_ref(std::uint32_t page);
  /// Registers the block on `page` unless its PLH is registered already
  /// (Reject duplication); returns the page that holds it now.
  std::uint32_t register_block(std::uint32_t page, const PositionalLineageHash& plh, SequenceHash hash,
                               const std::optional<SequenceHash>& parent, LocalBlockHash local,
                               const std::vector<TokenId>* token_ids);
  /// register_block for a fresh slot, with one owner: the slot's page (true)
  /// or, when the PLH is registered already, the adopted canonical page (false).
  std::pair<std::uint32_t, bool> register_or_adopt(std::uint32_t slot, const PositionalLineageHash& plh,
                                                   SequenceHash hash, const std::optional<SequenceHash>& parent,
                                                   LocalBlockHash local, const std::vector<TokenId>* token_ids);
  void unregister(std::uint32_t page);
  /// The indexes' slack (IdIndex): load <= 1/2, or 3/4 where metadata is tight.
  static std::size_t index_slack(EvictionBackend eviction) noexcept;
  /// How many blocks ahead the Use loops prefetch index slots.
  static constexpr std::size_t kPrefetchAhead = 16;
  // Inline: every Use calls them once or twice a block.
  std::uint32_t registered_page(const PositionalLineageHash& plh) const {
    return index_.find_if(filed_under(plh), [&](std::uint32_t page) { return pages_[page].plh == plh; });
  }
  /// The page a lookup by sequence hash finds (kHashIndexed), or kNoPage.
  std::uint32_t page_of_hash(std::uint64_t hash) const {
    return index_.find_if(filed_under(hash), [&](std::uint32_t page) {
      return pages_[page].hash == hash && (pages_[page].flags & kHashIndexed) != 0;
    });
  }
  /// A registered page's token ids (flags & kHasTokenIds).
  std::span<const TokenId> page_token_ids(std::uint32_t page) const;

  std::uint32_t capacity_;
  std::unique_ptr<EvictionPolicy> policy_;
  std::vector<Page> pages_;
  IdIndex<FiledKey> index_;  // PLH -> page, every registered block; sequence hash -> its first page
  /// Token ids of registered pages where given (kHasTokenIds), block_size a
  /// page; allocated on the first registration that has them, so a run
  /// without token ids pays nothing and one with them allocates nothing per block.
  std::vector<TokenId> token_ids_;
  std::unordered_map<Uuid, std::uint32_t> partials_;
  std::uint32_t free_head_ = kNoPage;
  std::uint32_t free_count_ = 0;
  std::size_t full_refs_ = 0;
  std::uint32_t quarantined_ = 0;
  detail::ReservationLedger<std::vector<std::uint32_t>> decode_reservations_{"decode"};
  detail::ReservationLedger<Destination> destinations_{"destination"};
  detail::ReservationLedger<std::vector<std::uint32_t>> prefix_pins_{"prefix pin"};
};

}  // namespace kvtier::g1
