#include "g1/native/native_block_pool.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::g1 {

// The index: IdIndex keeps ids + ids / slack + 2 slots; 7c/4 - 1 ids at slack 1 are 3.5c slots.
NativeBlockPool::NativeBlockPool(std::uint32_t capacity, std::optional<EvictionBackend> order)
    : capacity_(capacity), pages_(capacity), index_(std::size_t{capacity} * 7 / 4 - 1, HashOfPage{&pages_}, 1) {
  if (capacity == 0 || capacity == kNoPage) throw ConfigError("G1 capacity must be between 1 and 2^32-2 pages");
  if (order) {
    if (*order == EvictionBackend::Lineage || *order == EvictionBackend::Lru || *order == EvictionBackend::MultiLru) {
      throw ConfigError(std::string("the native backend's inactive order is vLLM's LRU or one of kvtier's (lru2, "
                                    "lfu_da, arc, s3fifo, adaptive), not KVBM's ") +
                        eviction_backend_name(*order));
    }
    order_ = make_eviction_policy(*order, capacity);
    lineage_.resize(capacity);
  }
  for (std::uint32_t page = capacity; page-- > 0;) free_page(page);  // page 0 is handed out first
}

NativeBlockPool::PageEntry& NativeBlockPool::entry(PageId page) {
  KVTIER_EXPECTS(page.value() < capacity_, "page " + std::to_string(page.value()) + " is outside the pool");
  return pages_[page.value()];
}

const NativeBlockPool::PageEntry& NativeBlockPool::entry(PageId page) const {
  KVTIER_EXPECTS(page.value() < capacity_, "page " + std::to_string(page.value()) + " is outside the pool");
  return pages_[page.value()];
}

void NativeBlockPool::lru_push_tail(std::uint32_t page) noexcept {
  PageEntry& e = pages_[page];
  // With an order it takes each hash's primary copy; duplicates (and a block
  // the order refuses) wait in the LRU, which is evicted first.
  if (order_ && index_.find(e.hash) == page && !order_->insert_refusal(std::span(&lineage_[page], 1))) {
    order_->insert(PageId(page), lineage_[page]);
    e.in_lru = true;
    e.in_order = true;
    ++inactive_len_;
    return;
  }
  e.prev = lru_tail_;
  e.next = kNoPage;
  if (lru_tail_ == kNoPage) {
    lru_head_ = page;
  } else {
    pages_[lru_tail_].next = page;
  }
  lru_tail_ = page;
  e.in_lru = true;
  ++inactive_len_;
}

void NativeBlockPool::lru_unlink(std::uint32_t page) noexcept {
  PageEntry& e = pages_[page];
  if (e.in_order) {
    order_->remove(PageId(page));
    e.in_order = false;
    e.in_lru = false;
    --inactive_len_;
    return;
  }
  (e.prev == kNoPage ? lru_head_ : pages_[e.prev].next) = e.next;
  (e.next == kNoPage ? lru_tail_ : pages_[e.next].prev) = e.prev;
  e.prev = e.next = kNoPage;
  e.in_lru = false;
  --inactive_len_;
}

void NativeBlockPool::free_page(std::uint32_t page) noexcept {
  PageEntry& e = pages_[page];
  e = PageEntry{};
  e.next = free_head_;
  free_head_ = page;
}

std::uint32_t NativeBlockPool::take_free_page() noexcept {
  const std::uint32_t page = free_head_;
  free_head_ = pages_[page].next;
  pages_[page].next = kNoPage;
  return page;
}

std::optional<NativeBlockPool::PrefixHit> NativeBlockPool::prefix_hit(SequenceHash hash) const noexcept {
  const std::uint32_t page = index_.find(hash.value());
  if (page == kNoPage) return std::nullopt;
  const PageEntry& e = pages_[page];
  return PrefixHit{PageId(page), e.refs > 0 || e.pins > 0};
}

std::optional<NativeReserveOutcome> NativeBlockPool::reserve(std::span<const SequenceHash> prefix,
                                                             std::uint32_t fresh) {
  if (prefix.empty()) return reserve_fresh(fresh);
  return reserve_exact_prefix(prefix, static_cast<std::uint32_t>(prefix.size()) + fresh);
}

std::optional<NativeReserveOutcome> NativeBlockPool::reserve_fresh(std::uint32_t fresh) {
  return reserve_hits({}, fresh);
}

std::optional<NativeReserveOutcome> NativeBlockPool::reserve_exact_prefix(std::span<const SequenceHash> candidates,
                                                                          std::uint32_t total) {
  KVTIER_EXPECTS(candidates.size() <= total, "prefix of " + std::to_string(candidates.size()) +
                                                 " blocks exceeds the reservation of " + std::to_string(total));
  std::vector<PrefixPin>& hits = scratch_hits(candidates.size());
  for (SequenceHash hash : candidates) {
    const std::uint32_t page = index_.find(hash.value());
    KVTIER_EXPECTS(page != kNoPage,
                   "authorized prefix hash " + std::to_string(hash.value()) + " is no longer resident");
    hits.push_back({hash, PageId(page)});
  }
  return reserve_hits(hits, total - static_cast<std::uint32_t>(hits.size()));
}

void NativeBlockPool::resident_run(std::span<const UniqueBlock> blocks, std::vector<PageId>& pages) const {
  pages.clear();
  const auto prefetch = [&](std::size_t at) {
    if (at < blocks.size() && blocks[at].is_full()) index_.prefetch(blocks[at].hash().value());
  };
  for (std::size_t at = 0; at < kPrefetchAhead; ++at) prefetch(at);
  for (std::size_t at = 0; at < blocks.size() && blocks[at].is_full(); ++at) {
    prefetch(at + kPrefetchAhead);
    const std::uint32_t page = index_.find(blocks[at].hash().value());
    if (page == kNoPage) break;
    pages.emplace_back(page);
  }
}

std::optional<NativeReserveOutcome> NativeBlockPool::reserve_looked_up_prefix(std::span<const SequenceHash> candidates,
                                                                              std::span<const PageId> pages,
                                                                              std::uint64_t generation,
                                                                              std::uint32_t total) {
  if (generation != generation_ || pages.size() != candidates.size()) return reserve_exact_prefix(candidates, total);
  KVTIER_EXPECTS(candidates.size() <= total, "prefix of " + std::to_string(candidates.size()) +
                                                 " blocks exceeds the reservation of " + std::to_string(total));
  std::vector<PrefixPin>& hits = scratch_hits(candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    // The index has not changed since these pages were looked up, so each is
    // its hash's primary copy still; a page of another hash is a caller's mix-up.
    KVTIER_EXPECTS(pages[i].value() < capacity_ && pages_[pages[i].value()].state == PageState::Cached &&
                       pages_[pages[i].value()].hash == candidates[i].value(),
                   "computed prefix page " + std::to_string(pages[i].value()) + " does not hold hash " +
                       std::to_string(candidates[i].value()));
    hits.push_back({candidates[i], pages[i]});
  }
  return reserve_hits(hits, total - static_cast<std::uint32_t>(hits.size()));
}

std::optional<NativeReserveOutcome> NativeBlockPool::reserve_resident_prefix(std::span<const SequenceHash> candidates,
                                                                             std::uint32_t total) {
  std::vector<PrefixPin>& hits = scratch_hits(candidates.size());
  for (SequenceHash hash : candidates) {
    if (hits.size() == total) break;
    const std::uint32_t page = index_.find(hash.value());
    if (page == kNoPage) break;
    hits.push_back({hash, PageId(page)});
  }
  return reserve_hits(hits, total - static_cast<std::uint32_t>(hits.size()));
}

std::optional<NativeReserveOutcome> NativeBlockPool::reserve_hits(std::span<const PrefixPin> hits,
                                                                  std::uint32_t fresh) {
  for (const PrefixPin& hit : hits) {
    KVTIER_EXPECTS(hit.page.value() < capacity_ && pages_[hit.page.value()].state == PageState::Cached,
                   "prefix hit on page " + std::to_string(hit.page.value()) + " is not a cached copy");
  }
  const std::uint32_t free = free_capacity();
  const std::uint32_t needed = fresh > free ? fresh - free : 0;
  if (needed > 0) {
    // Inactive hits will be pinned, so they are not evictable. Count distinct
    // ones by marking with a temporary pin, then undo the marks.
    std::uint32_t inactive_hits = 0;
    for (const PrefixPin& hit : hits) {
      PageEntry& e = pages_[hit.page.value()];
      if (e.in_lru && e.pins == 0) ++inactive_hits;
      ++e.pins;
    }
    for (const PrefixPin& hit : hits) --pages_[hit.page.value()].pins;
    if (needed > inactive_len_ - inactive_hits) return std::nullopt;
  }
  return commit_reservation(hits, fresh, needed);
}

NativeReserveOutcome NativeBlockPool::commit_reservation(std::span<const PrefixPin> hits, std::uint32_t fresh,
                                                         std::uint32_t needed) {
  NativeReserveOutcome outcome;
  outcome.removed.reserve(needed);  // one allocation, not one per doubling
  for (const PrefixPin& hit : hits) {
    const std::uint32_t page = hit.page.value();
    if (pages_[page].in_lru) lru_unlink(page);
    ++pages_[page].pins;
  }
  // Each eviction erases its hash from the index: start loading the index
  // slots of the next LRU victims a few ahead, so their misses overlap.
  std::uint32_t ahead = lru_head_;
  const auto prefetch_ahead = [&] {
    if (ahead == kNoPage) return;
    index_.prefetch(pages_[ahead].hash);
    ahead = pages_[ahead].next;
  };
  for (std::uint32_t i = 0; i < std::min(needed, kPrefetchAhead); ++i) prefetch_ahead();
  for (std::uint32_t i = 0; i < needed; ++i) {
    prefetch_ahead();
    const std::uint32_t page = take_victim();
    const SequenceHash hash(pages_[page].hash);
    if (!quarantine_ || !(index_.find(hash.value()) == page && pages_[page].dup_next == kNoPage)) {
      if (drop_victim(page)) outcome.removed.push_back(hash);
      continue;
    }
    unlink_from_hash_chain(page);                 // the last copy: its hash leaves the index
    pages_[page].state = PageState::Quarantined;  // keeps its hash; still one of the copies
    ++quarantined_;
    outcome.removed.push_back(hash);
    outcome.quarantined.push_back({hash, PageId(page)});
  }
  if (!outcome.quarantined.empty()) {
    // Not committed (docs/semantics.md §5.3): the hits go back, leaf first.
    for (auto it = hits.rbegin(); it != hits.rend(); ++it) unpin(it->page.value());
    return outcome;
  }
  reserved_ += fresh;
  KVTIER_EXPECTS(copies_ + reserved_ <= capacity_, "occupancy exceeds capacity");  // unreachable by construction
  outcome.reservation.prefix = std::exchange(spare_prefix_, {});  // its capacity, kept from the last one
  outcome.reservation.prefix.assign(hits.begin(), hits.end());
  outcome.reservation.fresh = fresh;
  return outcome;
}

void NativeBlockPool::activate_prefix(NativeReservation& reservation) {
  for (const PrefixPin& pin : reservation.prefix) {
    PageEntry& e = pages_[pin.page.value()];
    --e.pins;
    ++e.refs;
    ++cached_refs_;
  }
  reservation.prefix.clear();
  std::swap(spare_prefix_, reservation.prefix);  // the next reservation takes its capacity
}

std::vector<PrefixPin>& NativeBlockPool::scratch_hits(std::size_t count) {
  hits_.clear();
  hits_.reserve(count);
  return hits_;
}

PageId NativeBlockPool::allocate_private(NativeReservation& reservation) {
  KVTIER_EXPECTS(reservation.fresh != 0, "reservation has no fresh capacity left");
  --reservation.fresh;
  --reserved_;
  const std::uint32_t page = take_free_page();
  pages_[page].state = PageState::Private;
  ++copies_;
  ++private_copies_;
  return PageId(page);
}

std::pair<PageId, bool> NativeBlockPool::allocate_cached(NativeReservation& reservation, SequenceHash hash) {
  const PageId page = allocate_private(reservation);
  return {page, cache_private(page, hash)};
}

bool NativeBlockPool::cache_private(PageId page, SequenceHash hash) {
  PageEntry& e = entry(page);
  KVTIER_EXPECTS(e.state == PageState::Private, "caching a non-private copy");
  e.state = PageState::Cached;
  e.hash = hash.value();
  e.refs = 1;
  e.pins = 0;
  e.dup_next = kNoPage;
  --private_copies_;
  ++cached_refs_;
  if (order_) lineage_[page.value()] = PositionalLineageHash(hash, std::nullopt, 0);  // a root until set_lineage
  const std::uint32_t primary = index_.insert_or_find(page.value());
  ++generation_;
  if (primary == page.value()) return true;
  std::uint32_t tail = primary;
  while (pages_[tail].dup_next != kNoPage) tail = pages_[tail].dup_next;
  pages_[tail].dup_next = page.value();
  return false;
}

void NativeBlockPool::release(PageId page) {
  PageEntry& e = entry(page);
  KVTIER_ASSERT(e.state != PageState::Free, "page " + std::to_string(page.value()) + " is released while free");
  if (e.state == PageState::Private) {
    free_page(page.value());
    --copies_;
    --private_copies_;
    return;
  }
  KVTIER_EXPECTS(e.state == PageState::Cached && e.refs != 0,
                 "release of page " + std::to_string(page.value()) + " which holds no reference");
  // Tested on the decremented value, not re-read: a wide load of refs and pins
  // right after the narrow store to refs stalls on store forwarding.
  const std::uint32_t refs = --e.refs;
  --cached_refs_;
  if (refs == 0 && e.pins == 0) lru_push_tail(page.value());
}

void NativeBlockPool::unpin(std::uint32_t page) noexcept {
  PageEntry& e = pages_[page];
  --e.pins;
  if (e.refs == 0 && e.pins == 0) lru_push_tail(page);
}

void NativeBlockPool::cancel(NativeReservation& reservation) noexcept {
  for (auto it = reservation.prefix.rbegin(); it != reservation.prefix.rend(); ++it) unpin(it->page.value());
  reservation.prefix.clear();
  reserved_ -= reservation.fresh;
  reservation.fresh = 0;
}

bool NativeBlockPool::unlink_from_hash_chain(std::uint32_t page) noexcept {
  ++generation_;
  // One probe run: the primary's slot is edited in place.
  const std::size_t slot = index_.find_slot(pages_[page].hash);
  const std::uint32_t primary = index_.id_at(slot);
  const std::uint32_t successor = pages_[page].dup_next;
  if (primary == page) {
    if (successor == kNoPage) {
      index_.erase_at(slot);
      return true;
    }
    index_.replace_at(slot, successor);  // the oldest duplicate becomes primary: same hash, same slot
    return false;
  }
  std::uint32_t previous = primary;
  while (pages_[previous].dup_next != page) previous = pages_[previous].dup_next;
  pages_[previous].dup_next = successor;
  return false;
}

std::uint32_t NativeBlockPool::take_victim() {
  if (!order_ || lru_head_ != kNoPage) {
    const std::uint32_t page = lru_head_;
    lru_unlink(page);
    return page;
  }
  const std::uint32_t page = order_->evict().value().value();
  PageEntry& e = pages_[page];
  e.in_order = false;
  e.in_lru = false;
  --inactive_len_;
  return page;
}

std::optional<SequenceHash> NativeBlockPool::evict_one() {
  KVTIER_EXPECTS(inactive_len_ != 0, "evict_one on an empty inactive list");
  const std::uint32_t page = take_victim();
  const SequenceHash hash(pages_[page].hash);
  if (drop_victim(page)) return hash;
  return std::nullopt;
}

bool NativeBlockPool::drop_victim(std::uint32_t page) noexcept {
  const bool last_copy = unlink_from_hash_chain(page);
  free_page(page);
  --copies_;
  return last_copy;
}

void NativeBlockPool::release_quarantined(PageId page) {
  PageEntry& e = entry(page);
  KVTIER_ASSERT(e.state == PageState::Quarantined,
                "page " + std::to_string(page.value()) + " is released from quarantine but is not quarantined");
  free_page(page.value());
  --copies_;
  --quarantined_;
}

bool NativeBlockPool::is_cached_page(PageId page) const { return entry(page).state == PageState::Cached; }

std::vector<PageId> NativeBlockPool::inactive_order() const {
  std::vector<PageId> order;
  order.reserve(inactive_len_);
  for (std::uint32_t page = lru_head_; page != kNoPage; page = pages_[page].next) order.emplace_back(page);
  return order;
}

bool NativeBlockPool::is_private_page(PageId page) const { return entry(page).state == PageState::Private; }

std::optional<SequenceHash> NativeBlockPool::cached_hash(PageId page) const {
  const PageEntry& e = entry(page);
  if (e.state != PageState::Cached) return std::nullopt;
  return SequenceHash(e.hash);
}

void NativeBlockPool::audit(const Holders& holders) const {
  KVTIER_ASSERT(holders.refs.size() == capacity_ && holders.pins.size() == capacity_, "audit needs one count per page");
  std::vector<bool> on_free_list(capacity_, false);
  std::uint32_t free_pages = 0;
  for (std::uint32_t page = free_head_; page != kNoPage; page = pages_[page].next) {
    KVTIER_ASSERT(page < capacity_ && !on_free_list[page] && pages_[page].state == PageState::Free,
                  "the free list is corrupt at page " + std::to_string(page));
    on_free_list[page] = true;
    ++free_pages;
  }
  std::uint32_t lru_pages = 0;
  for (std::uint32_t page = lru_head_; page != kNoPage; page = pages_[page].next) {
    KVTIER_ASSERT(page < capacity_ && pages_[page].in_lru && !pages_[page].in_order && lru_pages < capacity_,
                  "the inactive list is corrupt at page " + std::to_string(page));
    ++lru_pages;
  }
  const std::size_t ordered = order_ ? order_->size() : 0;
  KVTIER_ASSERT(lru_pages + ordered == inactive_len_, "the inactive list length differs from its count");
  std::uint32_t privates = 0;
  std::uint32_t cached = 0;
  std::uint32_t quarantined = 0;
  std::size_t refs = 0;
  for (std::uint32_t page = 0; page < capacity_; ++page) {
    const PageEntry& e = pages_[page];
    const std::string at = " (page " + std::to_string(page) + ")";
    switch (e.state) {
      case PageState::Free:
        KVTIER_ASSERT(on_free_list[page], "a free page is missing from the free list" + at);
        KVTIER_ASSERT(holders.refs[page] == 0 && holders.pins[page] == 0,
                      "a table or reservation holds a free page" + at);
        break;
      case PageState::Private:
        ++privates;
        KVTIER_ASSERT(holders.refs[page] == 1 && holders.pins[page] == 0,
                      "a private page has other than one holder" + at);
        break;
      case PageState::Quarantined:
        ++quarantined;
        KVTIER_ASSERT(holders.refs[page] == 0 && holders.pins[page] == 0 && !e.in_lru,
                      "a quarantined page is held or inactive" + at);
        break;
      case PageState::Cached: {
        ++cached;
        refs += e.refs;
        KVTIER_ASSERT(e.refs == holders.refs[page], "a cached page's references differ from its table entries" + at);
        KVTIER_ASSERT(e.pins == holders.pins[page], "a cached page's pins differ from its reservations" + at);
        KVTIER_ASSERT(e.in_lru == (e.refs == 0 && e.pins == 0),
                      "a cached page is in the inactive list iff unheld" + at);
        KVTIER_ASSERT(!e.in_order || (order_ && order_->contains(PageId(page))),
                      "a page of the inactive order is missing from it" + at);
        std::uint32_t copy = index_.find(e.hash);
        std::uint32_t steps = 0;
        while (copy != kNoPage && copy != page && steps++ < capacity_) copy = pages_[copy].dup_next;
        KVTIER_ASSERT(copy == page, "a cached page is missing from its hash's chain of copies" + at);
        break;
      }
    }
  }
  KVTIER_ASSERT(free_pages + privates + cached + quarantined == capacity_,
                "free + private + cached + quarantined pages differ from the capacity");
  KVTIER_ASSERT(quarantined == quarantined_, "quarantined pages differ from their count");
  KVTIER_ASSERT(copies_ == privates + cached + quarantined && private_copies_ == privates && cached_refs_ == refs,
                "the pool's counts differ from its pages");
  KVTIER_ASSERT(reserved_ == holders.reserved && copies_ + reserved_ <= capacity_,
                "reserved capacity differs from the reservations or exceeds the free pages");
}

std::size_t NativeBlockPool::metadata_bytes() const noexcept {
  return pages_.capacity() * sizeof(PageEntry) + index_.memory_bytes() +
         (order_ ? order_->metadata_bytes() + lineage_.capacity() * sizeof(PositionalLineageHash) : 0);
}

void NativeBlockPool::set_lineage(PageId page, const PositionalLineageHash& plh) noexcept {
  if (order_ && page.value() < capacity_ && !pages_[page.value()].in_lru) lineage_[page.value()] = plh;
}

}  // namespace kvtier::g1
