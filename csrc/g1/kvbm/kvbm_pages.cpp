// KVBM's pages: the free list, eviction into the offload tier, registration
// in both indexes, and the owner and pin counts.
#include <algorithm>
#include <string>

#include "g1/kvbm/kvbm_backend.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::g1 {

std::size_t KvbmBackend::index_slack(EvictionBackend eviction) noexcept {
  // Sized for two entries a page (a page whose PLH and hash disagree is filed
  // twice), so with real hashes the load is half of this: 1/4, or 1/3 for
  // Lineage, whose graph already spends most of its 128-byte budget
  // (docs/performance.md). Every eviction erases, and backward-shift erase
  // walks to the end of the probe cluster: short clusters keep it cheap.
  return eviction == EvictionBackend::Lineage ? 2 : 1;
}

KvbmBackend::KvbmBackend(std::uint32_t capacity, std::uint32_t block_size, EvictionBackend eviction,
                         KvEventPublisher& publisher)
    : TabledBackend(block_size, publisher),
      capacity_(capacity),
      policy_(make_eviction_policy(eviction, capacity)),
      pages_(capacity),
      index_(2 * std::size_t{capacity}, FiledKey{}, index_slack(eviction)) {
  for (std::uint32_t page = capacity; page-- > 0;) push_free(page);
}

std::span<const TokenId> KvbmBackend::page_token_ids(std::uint32_t page) const {
  return {token_ids_.data() + std::size_t{page} * block_size_, block_size_};
}

std::uint32_t KvbmBackend::logical_refs(SequenceHash hash) const {
  const std::uint32_t page = page_of_hash(hash.value());
  return page == kNoPage ? 0 : pages_[page].refs;
}

void KvbmBackend::return_page(std::uint32_t page) {
  KVTIER_ASSERT(pages_[page].state != PageState::Reset, "page " + std::to_string(page) + " is freed twice");
  push_free(page);
}

void KvbmBackend::push_free(std::uint32_t page) noexcept {
  pages_[page] = Page{};
  pages_[page].refs = free_head_;
  free_head_ = page;
  ++free_count_;
}

std::size_t KvbmBackend::obtainable(std::span<const std::uint32_t> resurrecting) const {
  std::vector<std::uint32_t> inactive;
  for (std::uint32_t page : resurrecting) {
    if (policy_->contains(PageId(page))) inactive.push_back(page);
  }
  std::sort(inactive.begin(), inactive.end());
  const auto distinct = static_cast<std::size_t>(std::unique(inactive.begin(), inactive.end()) - inactive.begin());
  return free_count_ + policy_->size() - distinct;
}

std::vector<std::uint32_t> KvbmBackend::take_pages(std::size_t count, std::vector<SequenceHash>& removed,
                                                   std::vector<EvictedBlock>& victims) {
  std::vector<std::uint32_t> taken;
  taken.reserve(count);
  while (taken.size() < count && free_head_ != kNoPage) {
    const std::uint32_t page = free_head_;
    free_head_ = pages_[page].refs;
    --free_count_;
    pages_[page] = Page{};
    pages_[page].state = PageState::Held;
    taken.push_back(page);
  }
  // The victims first, in eviction order (the policy keeps its own state),
  // then their unregistration, prefetching ahead in two stages: a victim's
  // page record 2 x kPrefetchAhead ahead, then, once it has arrived, its
  // index slot kPrefetchAhead ahead, so neither miss stalls the loop.
  const std::size_t first_victim = taken.size();
  while (taken.size() < count) taken.push_back(policy_->evict().value().value());
  const auto prefetch_record = [&](std::size_t at) {
    if (at < taken.size()) __builtin_prefetch(&pages_[taken[at]]);
  };
  const auto prefetch_slots = [&](std::size_t at) {
    if (at < taken.size()) index_.prefetch(filed_under(pages_[taken[at]].plh));
  };
  for (std::size_t at = first_victim; at < first_victim + 2 * kPrefetchAhead; ++at) prefetch_record(at);
  for (std::size_t at = first_victim; at < first_victim + kPrefetchAhead; ++at) prefetch_slots(at);
  for (std::size_t at = first_victim; at < taken.size(); ++at) {
    prefetch_record(at + 2 * kPrefetchAhead);
    prefetch_slots(at + kPrefetchAhead);
    const std::uint32_t page = taken[at];
    const Page& p = pages_[page];
    removed.emplace_back(p.hash);
    if (tier_ != nullptr) {
      TieredBlock block{
          .plh = p.plh,
          .hash = SequenceHash(p.hash),
          .parent = (p.flags & kHasParent) ? std::optional<SequenceHash>(SequenceHash(p.parent)) : std::nullopt,
          .local = LocalBlockHash(p.local),
          .token_ids = std::nullopt};
      if (p.flags & kHasTokenIds) block.token_ids.emplace(page_token_ids(page).begin(), page_token_ids(page).end());
      victims.push_back(EvictedBlock{PageId(page), std::move(block)});
    }
    unregister(page);
    pages_[page] = Page{};
    pages_[page].state = PageState::Held;
  }
  return taken;
}

std::optional<std::uint64_t> KvbmBackend::hand_off(std::vector<std::uint32_t>& slots,
                                                   std::vector<EvictedBlock>& victims) {
  if (victims.empty()) return std::nullopt;
  const SwapOutTicket ticket = tier_->swap_out(victims);
  if (ticket.quarantined.empty()) return std::nullopt;  // RetryNow: the victims' pages are usable now
  std::vector<std::uint32_t> taken(slots);
  std::sort(taken.begin(), taken.end());  // O(n log n): an eviction can hand thousands of pages over
  for (const PageId page : ticket.quarantined) {
    KVTIER_ASSERT(
        page.value() < capacity_ && pages_[page.value()].state == PageState::Held &&
            std::binary_search(taken.begin(), taken.end(), page.value()),
        "the offload tier quarantined page " + std::to_string(page.value()) + ", which this eviction did not take");
    pages_[page.value()].state = PageState::Quarantined;
    ++quarantined_;
  }
  for (const std::uint32_t slot : slots) {
    if (pages_[slot].state != PageState::Quarantined) return_page(slot);
  }
  slots.clear();
  return ticket.transfer;
}

void KvbmBackend::unpin_pages(std::span<const std::uint32_t> pages) {
  std::vector<PositionalLineageHash> going_inactive;
  for (auto page = pages.rbegin(); page != pages.rend(); ++page) {
    if (pages_[*page].pins == 1 && pages_[*page].refs == 0) going_inactive.push_back(pages_[*page].plh);
  }
  policy_->check_insertable(going_inactive);
  for (auto page = pages.rbegin(); page != pages.rend(); ++page) {
    Page& p = pages_[*page];
    if (--p.pins == 0 && p.refs == 0) policy_->insert(PageId(*page), p.plh);  // leaf first
  }
}

std::uint32_t KvbmBackend::register_block(std::uint32_t page, const PositionalLineageHash& plh, SequenceHash hash,
                                          const std::optional<SequenceHash>& parent, LocalBlockHash local,
                                          const std::vector<TokenId>* token_ids) {
  Page& p = pages_[page];
  p.plh = plh;
  if (const std::uint32_t canonical = registered_page(plh); canonical != kNoPage) return canonical;
  p.state = PageState::Registered;
  p.hash = hash.value();
  p.flags = parent ? kHasParent : 0;
  p.parent = parent ? parent->value() : 0;
  p.local = local.value();
  // The first registered page of its hash is the one a lookup by hash finds.
  const bool first_of_hash = page_of_hash(hash.value()) == kNoPage;
  if (first_of_hash) p.flags |= kHashIndexed;
  index_.insert_as(filed_under(plh), page);
  if (first_of_hash && filed_under(hash.value()) != filed_under(plh)) index_.insert_as(filed_under(hash.value()), page);
  if (token_ids) {
    KVTIER_ASSERT(token_ids->size() == block_size_, "a block's token ids must be block_size long");
    if (token_ids_.empty()) token_ids_.resize(std::size_t{capacity_} * block_size_);  // on first use only
    std::copy(token_ids->begin(), token_ids->end(),
              token_ids_.begin() + static_cast<std::ptrdiff_t>(std::size_t{page} * block_size_));
    p.flags |= kHasTokenIds;
  }
  policy_->touch(plh);
  return page;
}

std::pair<std::uint32_t, bool> KvbmBackend::register_or_adopt(std::uint32_t slot, const PositionalLineageHash& plh,
                                                              SequenceHash hash,
                                                              const std::optional<SequenceHash>& parent,
                                                              LocalBlockHash local,
                                                              const std::vector<TokenId>* token_ids) {
  const std::uint32_t page = register_block(slot, plh, hash, parent, local, token_ids);
  if (page != slot) {
    // Reject duplication: adopt the canonical block and give the slot back.
    return_page(slot);
    add_ref(page);
    return {page, false};
  }
  ++pages_[page].refs;
  ++full_refs_;
  return {page, true};
}

void KvbmBackend::unregister(std::uint32_t page) {
  Page& p = pages_[page];
  index_.erase_as(filed_under(p.plh), page);
  if ((p.flags & kHashIndexed) != 0 && filed_under(p.hash) != filed_under(p.plh)) {
    index_.erase_as(filed_under(p.hash), page);
  }
  p.flags &= static_cast<std::uint8_t>(~(kHasTokenIds | kHashIndexed));
}

void KvbmBackend::add_ref(std::uint32_t page) {
  if (policy_->contains(PageId(page))) policy_->remove(PageId(page));
  ++pages_[page].refs;
  ++full_refs_;
}

void KvbmBackend::drop_ref(std::uint32_t page) {
  Page& p = pages_[page];
  // The decremented value is tested, not re-read: a wide load of refs and pins
  // right after the narrow store to refs stalls on store forwarding.
  const std::uint32_t refs = --p.refs;
  --full_refs_;
  if (refs == 0 && p.pins == 0) policy_->insert(PageId(page), p.plh);
}
std::optional<std::vector<std::uint32_t>> KvbmBackend::take_slots(std::size_t count, std::vector<SequenceHash>& removed,
                                                                  G1Acquire& blocked) {
  std::vector<EvictedBlock> victims;
  std::vector<std::uint32_t> slots = take_pages(count, removed, victims);
  const auto transfer = hand_off(slots, victims);
  if (!transfer) return slots;
  blocked = blocked_on(*transfer);
  return std::nullopt;
}

void KvbmBackend::publish_removed(std::vector<SequenceHash>&& removed) {
  publisher_.publish_removed(StorageTier::Device, KvRemoved{std::move(removed)});
}

}  // namespace kvtier::g1
