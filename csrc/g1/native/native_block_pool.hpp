#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "g1/common/id_index.hpp"
#include "kvtier/core/lineage_hash.hpp"
#include "kvtier/core/strong_id.hpp"
#include "kvtier/core/unique_block.hpp"
#include "kvtier/g1/eviction_policy.hpp"

namespace kvtier::g1 {

/// A cached copy pinned by a reservation: the prefix hit it will activate.
struct PrefixPin {
  SequenceHash hash;
  PageId page;
  friend bool operator==(const PrefixPin&, const PrefixPin&) = default;
};

/// Capacity promised by NativeBlockPool: pinned prefix hits plus `fresh`
/// pages not yet turned into copies. Consume it (activate_prefix,
/// allocate_*) or cancel it; dropping it leaks the promise.
struct NativeReservation {
  std::vector<PrefixPin> prefix;
  std::uint32_t fresh = 0;
};

struct NativeReserveOutcome {
  NativeReservation reservation;
  /// Hashes whose last resident copy was evicted to make room, in eviction order.
  std::vector<SequenceHash> removed;
  /// With quarantine on: the evicted last copies, now Quarantined (their pages
  /// keep their bytes). When not empty the reservation did NOT commit: only
  /// the evictions happened (docs/offload.md); `reservation` is empty.
  std::vector<PrefixPin> quarantined;
};

/// vLLM's block pool (Dynamo's `VllmBlockPool`, docs/semantics.md §2.2) over physical pages:
/// every copy is one page of the G1 slab. Copies are Private (uncached, one
/// owner) or Cached (hash-addressable, refs + pins); duplicates of a hash are
/// separate copies in a FIFO whose head is the primary. Cached copies with no
/// refs and no pins sit in an intrusive LRU (head evicted first) — or, with an
/// inactive order (docs/policies.md), primaries in that order and the rest
/// (redundant duplicates) in the LRU, which is evicted first.
/// Invariant: copies + reserved <= capacity. All reservations are atomic:
/// when one fails, nothing changed.
class NativeBlockPool {
 public:
  /// `order`: an inactive order of kvtier's (lru2, lfu_da, arc, s3fifo,
  /// adaptive) instead of vLLM's LRU; ConfigError for KVBM's pools.
  explicit NativeBlockPool(std::uint32_t capacity, std::optional<EvictionBackend> order = std::nullopt);
  NativeBlockPool(const NativeBlockPool&) = delete;  // the index points into this object
  NativeBlockPool& operator=(const NativeBlockPool&) = delete;

  /// How many victims (or blocks) ahead the loops prefetch index slots.
  static constexpr std::uint32_t kPrefetchAhead = 8;

  struct PrefixHit {
    PageId page;
    bool is_active;
  };
  /// The primary cached copy of `hash`, if any.
  std::optional<PrefixHit> prefix_hit(SequenceHash hash) const noexcept;
  bool is_resident(SequenceHash hash) const noexcept { return index_.find(hash.value()) != kNoPage; }
  /// Starts loading `hash`'s index slot: a loop about to cache or look up
  /// many hashes calls it a few ahead, so their cache misses overlap.
  void prefetch(SequenceHash hash) const noexcept { index_.prefetch(hash.value()); }

  /// The primary copies of the leading resident run of `blocks` (full ones)
  /// into `pages`, looked up a few blocks ahead so their misses overlap.
  void resident_run(std::span<const UniqueBlock> blocks, std::vector<PageId>& pages) const;
  /// Counts every change of the hash index (a copy cached, evicted or
  /// promoted to primary): pages looked up at one generation are exactly what
  /// a lookup gives while it stays the same.
  std::uint64_t generation() const noexcept { return generation_; }

  /// Empty prefix: reserve_fresh; else reserve_exact_prefix(prefix, prefix.size() + fresh).
  std::optional<NativeReserveOutcome> reserve(std::span<const SequenceHash> prefix, std::uint32_t fresh);
  std::optional<NativeReserveOutcome> reserve_fresh(std::uint32_t fresh);
  /// Every candidate must be resident (ContractError "authorized prefix hash H
  /// is no longer resident") and candidates <= total.
  std::optional<NativeReserveOutcome> reserve_exact_prefix(std::span<const SequenceHash> candidates,
                                                           std::uint32_t total);
  /// reserve_exact_prefix for a prefix whose primary copies `pages` were
  /// looked up at `generation`: no second lookup while it is current.
  std::optional<NativeReserveOutcome> reserve_looked_up_prefix(std::span<const SequenceHash> candidates,
                                                               std::span<const PageId> pages, std::uint64_t generation,
                                                               std::uint32_t total);
  /// Pins the longest resident leading run of candidates; the rest is fresh.
  std::optional<NativeReserveOutcome> reserve_resident_prefix(std::span<const SequenceHash> candidates,
                                                              std::uint32_t total);
  /// Pins `hits` and promises `fresh` pages, evicting only what free pages
  /// cannot cover; pinned hits never count as evictable.
  std::optional<NativeReserveOutcome> reserve_hits(std::span<const PrefixPin> hits, std::uint32_t fresh);

  /// Turns every pin into a reference, in prefix order; empties
  /// reservation.prefix (read it first: it is kept for the next reservation).
  void activate_prefix(NativeReservation& reservation);
  /// Consumes one fresh unit into a Private copy.
  PageId allocate_private(NativeReservation& reservation);
  /// allocate_private + cache_private; `second` is "became visible".
  std::pair<PageId, bool> allocate_cached(NativeReservation& reservation, SequenceHash hash);
  /// Private -> Cached{refs 1}; true iff this is the first resident copy of `hash`.
  bool cache_private(PageId page, SequenceHash hash);
  /// With an inactive order: the cached page's place in the prefix tree (its
  /// lineage hash), which the order's leaf rule reads. Without it, or when
  /// never given, the page counts as a root. A no-op without an order.
  void set_lineage(PageId page, const PositionalLineageHash& plh) noexcept;
  /// An order other than vLLM's LRU takes the copies: only then is a lineage worth computing.
  bool ordered() const noexcept { return order_ != nullptr; }
  /// Private: freed now. Cached: one reference less; at zero refs and pins the
  /// copy joins the LRU tail.
  void release(PageId page);
  /// Unpins the prefix leaf first (each copy left unpinned joins the LRU tail)
  /// and returns the unconsumed fresh capacity.
  void cancel(NativeReservation& reservation) noexcept;
  /// Evicts the LRU head; returns its hash when that was the hash's last copy.
  /// (Never quarantines: quarantine applies to reservations.)
  std::optional<SequenceHash> evict_one();
  /// On: a reservation's eviction of a hash's last copy quarantines its page
  /// (an offload copy will read it) instead of freeing it.
  void set_quarantine(bool on) noexcept { quarantine_ = on; }
  /// A quarantined page's copy has stopped: the page is free again.
  void release_quarantined(PageId page);
  std::uint32_t quarantined() const noexcept { return quarantined_; }

  std::uint32_t capacity() const noexcept { return capacity_; }
  std::uint32_t copies() const noexcept { return copies_; }
  std::uint32_t reserved() const noexcept { return reserved_; }
  std::uint32_t free_capacity() const noexcept { return capacity_ - copies_ - reserved_; }
  std::uint32_t inactive_len() const noexcept { return inactive_len_; }
  /// Σ refs of cached copies + 1 per private copy.
  std::size_t active_block_refs() const noexcept { return cached_refs_ + private_copies_; }
  /// copies − inactive + reserved.
  std::size_t active_blocks() const noexcept { return copies_ - inactive_len_ + reserved_; }
  bool is_cached_page(PageId page) const;
  /// The LRU from head (next victim) to tail; with an inactive order, its
  /// redundant duplicates only (the order itself is the policy's).
  std::vector<PageId> inactive_order() const;
  /// Bytes of bookkeeping this pool holds (page table + hash index).
  std::size_t metadata_bytes() const noexcept;
  /// What the pool's users hold, per page: references from owner tables and
  /// pins from reservations; `reserved` is the fresh capacity they promise.
  struct Holders {
    std::vector<std::uint32_t> refs;
    std::vector<std::uint32_t> pins;
    std::uint32_t reserved = 0;
  };
  /// Checks the free list, the LRU, the hash chains and every count against
  /// each other and against `holders`; InvariantError names the first break.
  void audit(const Holders& holders) const;
  bool is_private_page(PageId page) const;
  /// The hash of a cached copy; nullopt for a private or free page.
  std::optional<SequenceHash> cached_hash(PageId page) const;

 private:
  // The hash index has 3.5 slots a page (28 bytes: with the 32-byte page
  // entry and the spare owner tables, within the 64-byte budget of
  // docs/performance.md), so its load stays <= 2/7: every eviction erases a
  // hash and every finalize inserts one, and probe runs and backward-shift
  // erases are short there. From <= 1/2 it took the request cycle from 0.45
  // to 0.5 of the tight floor on shared_half (issue 36).
  enum class PageState : std::uint8_t { Free, Private, Cached, Quarantined };
  struct PageEntry {
    std::uint64_t hash = 0;
    std::uint32_t refs = 0;
    std::uint32_t pins = 0;
    std::uint32_t prev = kNoPage;  // LRU links; `next` also links the free list
    std::uint32_t next = kNoPage;
    std::uint32_t dup_next = kNoPage;  // next copy of the same hash (FIFO order)
    PageState state = PageState::Free;
    bool in_lru = false;    // inactive: in the LRU, or (in_order) in the inactive order
    bool in_order = false;  // in the inactive order, not the LRU
  };
  static_assert(sizeof(PageEntry) == 32, "the per-page budget (docs/performance.md) counts on 32 bytes");
  /// The hash index stores page ids; a page's key is its cached hash.
  struct HashOfPage {
    const std::vector<PageEntry>* pages;
    std::uint64_t key(std::uint32_t page) const noexcept { return (*pages)[page].hash; }
    static std::uint64_t hash(std::uint64_t key) noexcept { return key; }
  };

  PageEntry& entry(PageId page);
  const PageEntry& entry(PageId page) const;
  void lru_push_tail(std::uint32_t page) noexcept;
  void lru_unlink(std::uint32_t page) noexcept;
  /// Unlinks the next victim: the LRU's head, or with an inactive order the
  /// LRU's redundant copies first, then the order's choice.
  std::uint32_t take_victim();
  /// Frees an unlinked victim; true when it was its hash's last copy. (A bool,
  /// not the optional hash: that one went through the stack and stalled on
  /// store forwarding in the eviction loop.)
  bool drop_victim(std::uint32_t page) noexcept;
  void free_page(std::uint32_t page) noexcept;
  std::uint32_t take_free_page() noexcept;
  void unpin(std::uint32_t page) noexcept;
  /// Takes a cached copy out of its hash's chain (the oldest duplicate becomes
  /// primary); true when it was the hash's last resident copy.
  bool unlink_from_hash_chain(std::uint32_t page) noexcept;
  /// hits_, emptied, with room for `count`.
  std::vector<PrefixPin>& scratch_hits(std::size_t count);
  NativeReserveOutcome commit_reservation(std::span<const PrefixPin> hits, std::uint32_t fresh, std::uint32_t needed);

  std::uint32_t capacity_;
  std::vector<PageEntry> pages_;
  IdIndex<HashOfPage> index_;  // hash -> primary copy
  std::uint32_t free_head_ = kNoPage;
  std::uint32_t lru_head_ = kNoPage;
  std::uint32_t lru_tail_ = kNoPage;
  std::uint32_t copies_ = 0;
  std::uint32_t reserved_ = 0;
  std::uint32_t inactive_len_ = 0;
  std::size_t cached_refs_ = 0;
  std::size_t private_copies_ = 0;
  std::uint32_t quarantined_ = 0;  // counted in copies_: not free, not in the LRU
  std::uint64_t generation_ = 0;
  // Reused, so a steady request cycle allocates none: the hits a reservation
  // is built from, and the prefix list of the last reservation activated.
  std::vector<PrefixPin> hits_;
  std::vector<PrefixPin> spare_prefix_;
  bool quarantine_ = false;
  std::unique_ptr<EvictionPolicy> order_;       // null: vLLM's LRU alone
  std::vector<PositionalLineageHash> lineage_;  // with an order: each cached page's
};

}  // namespace kvtier::g1
