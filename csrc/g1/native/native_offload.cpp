// The native backend's side of the offload tier (docs/offload.md): evicted
// last copies handed to the tier, prefix pins, swap-in slots and the
// registration of swapped-in blocks.
#include <algorithm>
#include <utility>

#include "g1/common/stored_runs.hpp"
#include "g1/native/native_backend.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::g1 {

std::optional<NativeReserveOutcome> NativeBackend::reserve_with_offload(PrefixRule rule,
                                                                        std::span<const SequenceHash> prefix,
                                                                        std::uint32_t total, G1Acquire& blocked,
                                                                        const ComputedPrefix* computed) {
  for (;;) {
    auto outcome = rule == PrefixRule::LongestResident ? pool_.reserve_resident_prefix(prefix, total)
                   : computed != nullptr && !prefix.empty()
                       ? pool_.reserve_looked_up_prefix(prefix, computed->pages, computed->generation, total)
                       : pool_.reserve(prefix, total - static_cast<std::uint32_t>(prefix.size()));
    if (!outcome) return std::nullopt;
    publish_removed(std::exchange(outcome->removed, {}));
    if (outcome->quarantined.empty()) return outcome;
    std::vector<EvictedBlock> victims;
    victims.reserve(outcome->quarantined.size());
    for (const PrefixPin& pin : outcome->quarantined) {
      const auto known = tier_blocks_.find(pin.page.value());
      victims.push_back(EvictedBlock{pin.page, known != tier_blocks_.end() && known->second.hash == pin.hash
                                                   ? known->second
                                                   : TieredBlock{native_tier_key(pin.hash), pin.hash, std::nullopt,
                                                                 LocalBlockHash(0), std::nullopt}});
    }
    const SwapOutTicket ticket = tier_->swap_out(victims);
    std::vector<PageId> copied(ticket.quarantined);
    std::sort(copied.begin(), copied.end());
    for (const PrefixPin& pin : outcome->quarantined) {
      if (!std::binary_search(copied.begin(), copied.end(), pin.page)) {
        pool_.release_quarantined(pin.page);  // not copied: free now
      }
    }
    if (!ticket.quarantined.empty()) {
      blocked = blocked_on(ticket.transfer);
      return std::nullopt;
    }
    // RetryNow (§5.3): every victim was filtered and its page is free; the retry takes it.
  }
}

void NativeBackend::remember_for_tier(PageId page, const TieredBlock& block) { tier_blocks_[page.value()] = block; }

void NativeBackend::on_offload_attached() {
  pool_.set_quarantine(caching_);  // without prefix caching nothing is cached, so nothing is offloaded
}

void NativeBackend::release_quarantined(std::span<const PageId> pages) {
  for (const PageId page : pages) pool_.release_quarantined(page);
}

std::optional<std::uint64_t> NativeBackend::pin_prefix(std::span<const PositionalLineageHash> keys) {
  std::vector<SequenceHash> hashes;
  hashes.reserve(keys.size());
  for (const PositionalLineageHash& key : keys) {
    KVTIER_EXPECTS(key.high() == 0, "the native backend keys blocks by sequence hash (native_tier_key)");
    hashes.emplace_back(key.low());
    if (!caching_ || !pool_.is_resident(hashes.back())) return std::nullopt;
  }
  auto outcome = pool_.reserve_exact_prefix(hashes, static_cast<std::uint32_t>(hashes.size()));
  KVTIER_ASSERT(outcome && outcome->removed.empty(), "pinning resident blocks evicted or failed");
  return prefix_pins_.add(reservation_ids_, std::move(outcome->reservation));
}

void NativeBackend::release_pins(std::uint64_t pins) {
  NativeReservation pinned = prefix_pins_.take(pins);
  pool_.cancel(pinned);
}

BlockManager::SlotGrant NativeBackend::reserve_slots(std::size_t count) {
  if (count > pool_.capacity()) return SlotGrant{G1Acquire::capacity_exhausted(), 0};
  G1Acquire blocked;
  auto outcome = reserve_with_offload(PrefixRule::Exact, {}, static_cast<std::uint32_t>(count), blocked);
  if (!outcome) {
    return SlotGrant{blocked.kind == G1Acquire::Kind::BlockedOnOffload ? blocked : G1Acquire::capacity_exhausted(), 0};
  }
  std::vector<PageId> pages;
  pages.reserve(count);
  for (std::size_t i = 0; i < count; ++i) pages.push_back(pool_.allocate_private(outcome->reservation));
  return SlotGrant{G1Acquire::ready(count), swap_in_slots_.add(reservation_ids_, std::move(pages))};
}

void NativeBackend::release_slots(std::uint64_t slots) {
  for (const PageId page : swap_in_slots_.take(slots)) pool_.release(page);
}

std::optional<std::size_t> NativeBackend::register_swapped_in(std::uint64_t slots,
                                                              std::span<const TieredBlock> blocks) {
  KVTIER_EXPECTS(blocks.size() <= swap_in_slots_.at(slots).size(), "more swapped-in blocks than reserved slots");
  const std::vector<PageId> pages = swap_in_slots_.take(slots);
  detail::StoredRuns runs(publisher_, blocks.size());
  std::vector<PageId> registered;
  for (std::size_t i = 0; i < pages.size(); ++i) {
    if (i >= blocks.size() || !caching_ || pool_.is_resident(blocks[i].hash)) {
      pool_.release(pages[i]);
      runs.gap();  // a copy G1 holds already ends the run and parents the next (§5.5)
      continue;
    }
    const TieredBlock& b = blocks[i];
    pool_.cache_private(pages[i], b.hash);
    if (tier_ != nullptr) remember_for_tier(pages[i], b);
    runs.add(b.parent, {b.hash, b.local}, true, detail::token_ids_of(b.token_ids));
    registered.push_back(pages[i]);
  }
  runs.gap();
  // Inactive, leaf first at the LRU head, as a Deref would leave them.
  for (auto page = registered.rbegin(); page != registered.rend(); ++page) pool_.release(*page);
  return registered.size();
}

}  // namespace kvtier::g1
