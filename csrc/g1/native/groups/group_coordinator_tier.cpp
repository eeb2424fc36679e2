// The coordinator's side of an offload tier (docs/offload.md, "KV cache
// groups"): victims quarantined by group, the fixed point over G1 and the
// tier, pins on a hit's G1 pages, and the landing pages a swap-in fills.
#include <algorithm>

#include "g1/native/groups/group_coordinator.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::g1 {

std::size_t GroupCoordinator::find_hit_with(std::span<const SequenceHash> hashes, std::size_t prompt_tokens,
                                            const TierHolds& tier_holds) const {
  if (!caching_ || prompt_tokens == 0) return 0;
  return fixed_point(hashes, candidate_of(prompt_tokens), false, &tier_holds).first;
}

std::size_t GroupCoordinator::first_hit_block(std::size_t group, std::size_t tokens) const {
  KVTIER_EXPECTS(group < rules_.size(), "group ", group, " is not one of the manager's ", rules_.size(), " groups");
  return rules_[group]->first_hit_block(tokens);
}

void GroupCoordinator::note_quarantined(std::span<const PrefixPin> victims) {
  for (const PrefixPin& victim : victims) {
    const auto it = cached_keys_.find(victim.hash.value());
    KVTIER_ASSERT(it != cached_keys_.end(), "a quarantined key the coordinator never cached");
    quarantined_.push_back(EvictedCopy{victim.page, it->second.first, it->second.second});
  }
}

std::optional<NativeReservation> GroupCoordinator::pin_cached(
    std::span<const std::pair<SequenceHash, std::size_t>> blocks) {
  std::vector<PrefixPin> pins;
  pins.reserve(blocks.size());
  for (const auto& [hash, group] : blocks) {
    KVTIER_EXPECTS(group < rules_.size(), "group ", group, " is not one of the manager's ", rules_.size(), " groups");
    const SequenceHash key(cache_key(hash, group));
    const auto hit = pool_.prefix_hit(key);
    if (!hit) return std::nullopt;
    pins.push_back(PrefixPin{key, hit->page});
  }
  auto outcome = pool_.reserve_hits(pins, 0);
  KVTIER_ASSERT(outcome && outcome->removed.empty() && outcome->quarantined.empty(),
                "pinning cached pages evicted or failed");
  for (const PrefixPin& pin : outcome->reservation.prefix) ++pins_[pin.page.value()];
  return std::move(outcome->reservation);
}

void GroupCoordinator::unpin(NativeReservation& pins) noexcept {
  for (const PrefixPin& pin : pins.prefix) --pins_[pin.page.value()];
  pool_.cancel(pins);
}

std::optional<std::vector<PageId>> GroupCoordinator::take_landing_pages(std::size_t count) {
  if (count > usable_capacity()) return std::nullopt;
  auto outcome = pool_.reserve_fresh(static_cast<std::uint32_t>(count));
  if (!outcome) return std::nullopt;
  note_quarantined(outcome->quarantined);
  note_removed(outcome->removed);
  if (!outcome->quarantined.empty()) return std::nullopt;
  std::vector<PageId> pages;
  pages.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    pages.push_back(pool_.allocate_private(outcome->reservation));
    landing_[pages.back().value()] = true;
  }
  return pages;
}

void GroupCoordinator::release_landing_page(PageId page) {
  KVTIER_EXPECTS(page.value() < landing_.size() && landing_[page.value()], "page ", page.value(),
                 " is not a landing page");
  landing_[page.value()] = false;
  pool_.release(page);
}

bool GroupCoordinator::register_landed(PageId page, SequenceHash hash, std::size_t group) {
  KVTIER_EXPECTS(group < rules_.size(), "group ", group, " is not one of the manager's ", rules_.size(), " groups");
  KVTIER_EXPECTS(caching_, "prefix caching is off: a swapped-in block cannot be cached");
  const SequenceHash key(cache_key(hash, group));
  if (pool_.is_resident(key)) {
    release_landing_page(page);
    return false;
  }
  KVTIER_EXPECTS(page.value() < landing_.size() && landing_[page.value()], "page ", page.value(),
                 " is not a landing page");
  landing_[page.value()] = false;
  page_group_[page.value()] = static_cast<std::uint8_t>(group);
  // The copy wrote the whole page in the group's format: nothing stale to zero.
  if (!page_precision_.empty()) page_precision_[page.value()] = group_precision_[group];
  state_step_.erase(page.value());  // its bytes are there now: a hit from this step on
  pool_.cache_private(page, key);
  cached_keys_.emplace(key.value(), std::make_pair(hash, group));
  pool_.release(page);  // inactive, as a freed request's cached blocks are
  return true;
}

}  // namespace kvtier::g1
