#pragma once
// KV cache groups on one page pool (docs/spec/model-geometry.md sections
// 2-4; vLLM's HybridKVCacheCoordinator over its BlockPool): every group draws
// pages from one NativeBlockPool and one eviction order, a request holds one
// table per group, a group's cache key is (hash, group), and the null page
// fills the positions a group no longer (or never) needs. The coordinator
// owns what crosses groups — the prefix hit's fixed point, atomic allocation
// with every group's hits taken first, tail-first release group by group —
// and asks each group's GroupRule for what is kind-specific.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "g1/native/groups/group_rule.hpp"
#include "g1/native/native_block_pool.hpp"
#include "kvtier/core/model_geometry.hpp"
#include "kvtier/g1/g1_types.hpp"

namespace kvtier::g1 {

/// A prefix hit across groups: the common length every group can serve, and
/// how much longer the first group looked up (full attention where there is
/// one) could have served — a shared prefix a sparse group has not
/// checkpointed (vLLM's uncached common prefix).
struct GroupHit {
  std::size_t tokens = 0;
  std::size_t uncached_common_prefix = 0;
  /// The hit that pages running requests hold serve alone (no inactive page taken).
  std::size_t active_tokens = 0;
};

class GroupCoordinator {
 public:
  /// `capacity` pages in all, the null page (when the geometry has one) among them.
  GroupCoordinator(ModelGeometry geometry, std::uint32_t capacity, bool enable_prefix_caching);
  GroupCoordinator(const GroupCoordinator&) = delete;
  GroupCoordinator& operator=(const GroupCoordinator&) = delete;

  const ModelGeometry& geometry() const noexcept { return geometry_; }
  std::size_t group_count() const noexcept { return rules_.size(); }

  /// The hit a prompt of `prompt_tokens` tokens (its hashes at the hash unit)
  /// would take now: the fixed point from vLLM's candidate `prompt_tokens - 1`
  /// (a single full-attention group: `prompt_tokens`), in scheduler units.
  GroupHit find_hit(std::span<const SequenceHash> hashes, std::size_t prompt_tokens) const;
  /// Whether a tier below G1 holds block `block` of `group` (its hash's copy for that group).
  using TierHolds = std::function<bool(std::size_t group, std::size_t block)>;
  /// The same fixed point over G1 and a lower tier together: a position
  /// counts when G1 caches it or `tier_holds` says the tier does (what a
  /// swap-in can bring back before the allocation takes the hit).
  std::size_t find_hit_with(std::span<const SequenceHash> hashes, std::size_t prompt_tokens,
                            const TierHolds& tier_holds) const;
  /// The first block of `group` a hit of `tokens` tokens takes (earlier ones are null).
  std::size_t first_hit_block(std::size_t group, std::size_t tokens) const;
  /// Whether block `block` of `group` is cached in G1 now (a hit).
  bool cached_block(std::span<const SequenceHash> hashes, std::size_t group, std::size_t block) const {
    return cached_page(hashes, group, block).has_value();
  }

  /// Gives `owner` slots for `tokens` tokens. A new owner first takes the
  /// cached prefix of `reuse_tokens` (a scheduler-unit multiple every group
  /// serves now: ContractError otherwise); a running one first releases the
  /// blocks its computed length skips — which stands even when the pages then
  /// run out. Every group's hits are taken before any fresh page, and the
  /// fresh pages of all groups come together or not at all: false when the
  /// pool cannot give them (nothing else changed).
  bool allocate(OwnerId owner, std::span<const SequenceHash> hashes, std::size_t tokens, std::size_t reuse_tokens = 0);
  /// A block that entered the hash index: its position in its group's table and its hash.
  struct CachedBlock {
    std::size_t block = 0;
    SequenceHash hash;
    PageId page;
  };
  /// `owner` has computed its first `computed` tokens: the blocks each group
  /// caches up to the last scheduler boundary enter the hash index. Returns
  /// per group, in table order, those that are their hash's first copy.
  std::vector<std::vector<CachedBlock>> finalize(OwnerId owner, std::span<const SequenceHash> hashes,
                                                 std::size_t computed);
  /// Releases every table, group 0's first, each tail first.
  void free(OwnerId owner);
  /// A new scheduler step: Mamba states cached before it may now be hit.
  void begin_step() noexcept { ++step_; }

  bool has_owner(OwnerId owner) const { return owners_.contains(owner); }
  std::vector<OwnerId> owners() const;
  /// The hash that names block `block` of `group` (its last hash unit's index).
  std::size_t hash_index(std::size_t group, std::size_t block) const noexcept;
  /// Every cached copy now, active or inactive: its page, hash and group.
  struct CachedPage {
    PageId page;
    SequenceHash hash;
    std::size_t group = 0;
  };
  std::vector<CachedPage> cached_pages() const;
  /// Whether a copy of `hash` is cached for `group`.
  bool is_cached(SequenceHash hash, std::size_t group) const;
  std::size_t computed_tokens(OwnerId owner) const;
  /// The owner's table in `group`: page ids, the null page where it stands.
  std::span<const PageId> table(OwnerId owner, std::size_t group) const;
  /// The reserved null page; nullopt without one.
  std::optional<PageId> null_page() const noexcept { return null_page_; }
  /// Pages any request may hold: the capacity less the null page.
  std::size_t usable_capacity() const noexcept { return pool_.capacity() - (null_page_ ? 1U : 0U); }
  /// Pages neither held nor cached.
  std::size_t free_pages() const noexcept { return pool_.free_capacity(); }
  std::vector<GroupUsage> usage() const;
  /// Per group, the cached pages requests have taken as prefix hits since the start.
  const std::vector<std::uint64_t>& hit_pages() const noexcept { return hit_pages_; }
  /// Per group, the fresh pages its tables took since the start (hit_pages' complement).
  const std::vector<std::uint64_t>& fresh_pages() const noexcept { return fresh_pages_; }
  /// Cached pages no request holds, the next victim first.
  std::vector<PageId> eviction_order() const { return pool_.inactive_order(); }
  /// Hashes of `group` whose last cached copy was evicted, oldest first, since the last call.
  std::vector<SequenceHash> take_removed(std::size_t group);
  /// Pages taken since the last call by a group of another precision than
  /// the one that last wrote them (vLLM #47574: stale bytes of another format
  /// decode as NaN): they must be zeroed before the new group writes them.
  std::vector<PageId> take_pages_to_zero();
  /// InvariantError when the tables, the pool and the null page disagree.
  void audit() const;

  // The offload tier's side (grouped_backend_tier.cpp, docs/offload.md).
  /// A cached copy an allocation evicted while quarantine is on: its page
  /// keeps its bytes until the tier's copy of them stopped.
  struct EvictedCopy {
    PageId page;
    SequenceHash hash;
    std::size_t group = 0;
  };
  /// On: evicting a last cached copy quarantines its page (an allocation that
  /// evicts so does not commit: take_quarantined lists the victims).
  void set_quarantine(bool on) noexcept { pool_.set_quarantine(on); }
  /// The copies the last failed reservations quarantined, oldest first.
  std::vector<EvictedCopy> take_quarantined() { return std::exchange(quarantined_, {}); }
  /// The tier's copy of a quarantined page stopped: the page is free.
  void release_quarantined(PageId page) { pool_.release_quarantined(page); }
  std::uint32_t quarantined_pages() const noexcept { return pool_.quarantined(); }
  /// Pins the G1 copies of (hash, group) `blocks` so no eviction takes them:
  /// all of them, or nothing (nullopt).
  std::optional<NativeReservation> pin_cached(std::span<const std::pair<SequenceHash, std::size_t>> blocks);
  void unpin(NativeReservation& pins) noexcept;
  /// `count` fresh pages no table holds (a swap-in's destination); nullopt
  /// when the pool cannot give them, or when making room quarantined copies.
  std::optional<std::vector<PageId>> take_landing_pages(std::size_t count);
  /// Gives a landing page back unused.
  void release_landing_page(PageId page);
  /// A landing page now holds the bytes of `hash`'s block of `group`: it
  /// joins the hash index, inactive (false: G1 caches a copy already and the
  /// page is freed instead).
  bool register_landed(PageId page, SequenceHash hash, std::size_t group);

 private:
  struct Table {
    std::vector<PageId> pages;
    std::size_t considered = 0;  // leading blocks whose caching is settled
  };
  struct Owner {
    std::vector<Table> tables;
    std::size_t computed = 0;
  };
  class Lookup;

  std::uint64_t cache_key(SequenceHash hash, std::size_t group) const noexcept;
  std::optional<PageId> cached_page(std::span<const SequenceHash> hashes, std::size_t group, std::size_t block,
                                    bool active_only = false) const;
  bool is_null(PageId page) const noexcept { return null_page_ && page == *null_page_; }
  /// The fixed point at most `candidate` tokens: its length and the first
  /// group's own; `active_only` counts only pages a running request holds.
  std::pair<std::size_t, std::size_t> fixed_point(std::span<const SequenceHash> hashes, std::size_t candidate,
                                                  bool active_only, const TierHolds* tier_holds = nullptr) const;
  /// vLLM's hybrid candidate: the last token is always computed (its logits).
  std::size_t candidate_of(std::size_t prompt_tokens) const noexcept {
    return geometry_.has_null_page() ? prompt_tokens - 1 : prompt_tokens;
  }
  /// Notes the outcome's quarantined victims (before note_removed forgets their keys).
  void note_quarantined(std::span<const PrefixPin> victims);
  void release_skipped(Owner& owner);
  void note_removed(std::span<const SequenceHash> keys);

  ModelGeometry geometry_;
  std::vector<std::unique_ptr<GroupRule>> rules_;
  std::vector<std::size_t> lookup_order_;  // full attention first
  bool caching_;
  NativeBlockPool pool_;
  std::optional<PageId> null_page_;
  std::vector<std::uint8_t> page_group_;  // the group a page was last taken for
  /// With groups of more than one precision: each group's precision class
  /// (the first group of the same precision) and each page's last one
  /// (kZeroed: as the pool made it); empty otherwise, nothing to track.
  static constexpr std::uint8_t kZeroed = 0xFF;
  std::vector<std::uint8_t> group_precision_;
  std::vector<std::uint8_t> page_precision_;
  std::vector<PageId> to_zero_;
  std::unordered_map<OwnerId, Owner> owners_;
  std::unordered_map<std::uint64_t, std::pair<SequenceHash, std::size_t>> cached_keys_;  // key -> (hash, group)
  std::vector<std::vector<SequenceHash>> removed_;                                       // by group
  std::unordered_map<std::uint32_t, std::uint64_t> state_step_;  // Mamba page -> step it was cached in
  std::uint64_t step_ = 0;
  std::vector<std::uint64_t> hit_pages_;    // by group
  std::vector<std::uint64_t> fresh_pages_;  // by group
  std::vector<EvictedCopy> quarantined_;
  std::vector<bool> landing_;        // by page: taken for a swap-in, not registered yet
  std::vector<std::uint32_t> pins_;  // by page: pins of pin_cached still held
};

}  // namespace kvtier::g1
