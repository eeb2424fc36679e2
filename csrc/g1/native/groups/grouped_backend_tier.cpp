// The grouped backend's side of an offload tier (docs/offload.md, "KV cache
// groups"): a group's cached block leaves G1 for the tier under (hash,
// group), with its group's block fingerprint; a swap-in brings back what the
// groups' fixed point over G1 and the tier needs, and registers each block
// in its own group.
#include <algorithm>
#include <utility>

#include "g1/native/groups/grouped_backend.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::g1 {

void GroupedBackend::attach_offload(OffloadTier* tier) {
  KVTIER_EXPECTS(tier_ == nullptr, "an offload tier is attached already");
  tier_ = tier;
  coordinator_.set_quarantine(caching_);  // without prefix caching nothing is cached, so nothing is offloaded
}

TieredBlock GroupedBackend::tier_block(PageId page, SequenceHash hash, std::size_t group) const {
  const auto known = tier_blocks_.find(page.value());
  if (known != tier_blocks_.end() && known->second.hash == hash && known->second.plh.high() == group) {
    return known->second;
  }
  return TieredBlock{.plh = group_tier_key(hash, group),
                     .hash = hash,
                     .parent = std::nullopt,
                     .local = LocalBlockHash(0),
                     .token_ids = std::nullopt,
                     .format = coordinator_.geometry().block_fingerprint(group)};
}

std::optional<std::uint64_t> GroupedBackend::swap_out_quarantined() {
  const std::vector<GroupCoordinator::EvictedCopy> victims = coordinator_.take_quarantined();
  if (victims.empty()) return std::nullopt;
  std::vector<EvictedBlock> evicted;
  evicted.reserve(victims.size());
  for (const auto& victim : victims) {
    evicted.push_back(EvictedBlock{victim.page, tier_block(victim.page, victim.hash, victim.group)});
    tier_blocks_.erase(victim.page.value());
  }
  const SwapOutTicket ticket = tier_->swap_out(evicted);
  std::vector<PageId> copied(ticket.quarantined);
  std::sort(copied.begin(), copied.end());
  for (const auto& victim : victims) {
    if (!std::binary_search(copied.begin(), copied.end(), victim.page)) {
      coordinator_.release_quarantined(victim.page);  // not copied: free now
    }
  }
  return ticket.quarantined.empty() ? 0 : ticket.transfer;
}

G1Acquire GroupedBackend::blocked_on(std::uint64_t transfer) const {
  return G1Acquire{.kind = G1Acquire::Kind::BlockedOnOffload,
                   .count = 0,
                   .offload_id = transfer,
                   .deadline_ms = tier_->earliest_deadline_ms().value_or(0.0)};
}

void GroupedBackend::release_quarantined(std::span<const PageId> pages) {
  for (const PageId page : pages) coordinator_.release_quarantined(page);
}

std::optional<std::uint64_t> GroupedBackend::pin_prefix(std::span<const PositionalLineageHash> plhs) {
  std::vector<std::pair<SequenceHash, std::size_t>> blocks;
  blocks.reserve(plhs.size());
  for (const PositionalLineageHash& plh : plhs) {
    KVTIER_EXPECTS(plh.high() < coordinator_.group_count(), "a tier key of group ", plh.high(), "; the manager has ",
                   coordinator_.group_count(), " groups (group_tier_key)");
    blocks.emplace_back(SequenceHash(plh.low()), static_cast<std::size_t>(plh.high()));
  }
  if (!caching_) return std::nullopt;
  auto pins = coordinator_.pin_cached(blocks);
  if (!pins) return std::nullopt;
  return pins_.add(reservation_ids_, std::move(*pins));
}

void GroupedBackend::release_pins(std::uint64_t pins) {
  NativeReservation pinned = pins_.take(pins);
  coordinator_.unpin(pinned);
}

BlockManager::SlotGrant GroupedBackend::reserve_slots(std::size_t count) {
  for (;;) {
    auto pages = coordinator_.take_landing_pages(count);
    publish_removed();
    if (pages) return SlotGrant{G1Acquire::ready(count), slots_.add(reservation_ids_, std::move(*pages))};
    const auto transfer = swap_out_quarantined();
    if (!transfer) return SlotGrant{G1Acquire::capacity_exhausted(), 0};
    if (*transfer != 0) return SlotGrant{blocked_on(*transfer), 0};
    // Every victim was filtered and its page is free: the retry takes it (§5.3).
  }
}

void GroupedBackend::release_slots(std::uint64_t slots) {
  for (const PageId page : slots_.take(slots)) coordinator_.release_landing_page(page);
}

std::optional<std::size_t> GroupedBackend::register_swapped_in(std::uint64_t slots,
                                                               std::span<const TieredBlock> blocks) {
  KVTIER_EXPECTS(blocks.size() <= slots_.at(slots).size(), "more swapped-in blocks than reserved slots");
  const std::vector<PageId> pages = slots_.take(slots);
  for (std::size_t i = blocks.size(); i < pages.size(); ++i) coordinator_.release_landing_page(pages[i]);
  std::size_t registered = 0;
  std::vector<std::vector<StoredBlock>> stored(coordinator_.group_count());
  // Leaf first: the deepest block leaves the LRU first, as a Deref would leave them.
  for (std::size_t i = blocks.size(); i-- > 0;) {
    const TieredBlock& block = blocks[i];
    const auto group = static_cast<std::size_t>(block.plh.high());
    KVTIER_EXPECTS(group < coordinator_.group_count() && block.plh.low() == block.hash.value(),
                   "a swapped-in block whose tier key names no group of the manager");
    if (!coordinator_.register_landed(pages[i], block.hash, group)) continue;
    tier_blocks_[pages[i].value()] = block;
    stored[group].push_back(StoredBlock{block.hash, block.local});
    ++registered;
  }
  for (std::size_t g = 0; g < stored.size(); ++g) {
    if (stored[g].empty()) continue;
    std::reverse(stored[g].begin(), stored[g].end());
    KvStored event;
    event.blocks = std::move(stored[g]);
    publisher_.publish_stored(StorageTier::Device, std::move(event), event_group(g));
  }
  return registered;
}

SwapInPlan GroupedBackend::plan_swap_in(const ActiveSequence& sequence, std::size_t prompt_tokens) const {
  SwapInPlan plan;
  if (tier_ == nullptr || !caching_ || prompt_tokens == 0) return plan;
  const std::vector<SequenceHash> hashes = hashes_of(sequence, prompt_tokens / sequence.block_size());
  const std::size_t groups = coordinator_.group_count();
  // Ask the tier once for every block G1 lacks, in position order.
  std::vector<std::vector<int>> held(groups);  // -1: not asked (in G1 or past the hashes); else 0/1
  std::vector<PositionalLineageHash> asked;
  std::vector<std::pair<std::size_t, std::size_t>> asked_at;
  for (std::size_t g = 0; g < groups; ++g) {
    const std::size_t bs = coordinator_.geometry().groups()[g].spec.block_size;
    const std::size_t blocks = hashes.size() * sequence.block_size() / bs;
    held[g].assign(blocks, -1);
    for (std::size_t b = 0; b < blocks; ++b) {
      if (coordinator_.cached_block(hashes, g, b)) continue;
      asked.push_back(group_tier_key(hashes[coordinator_.hash_index(g, b)], g));
      asked_at.emplace_back(g, b);
    }
  }
  if (asked.empty()) return plan;
  const std::vector<bool> answers = tier_->holds(asked);
  for (std::size_t i = 0; i < asked.size(); ++i) held[asked_at[i].first][asked_at[i].second] = answers[i] ? 1 : 0;
  const GroupCoordinator::TierHolds tier_holds = [&held](std::size_t g, std::size_t b) {
    return b < held[g].size() && held[g][b] == 1;
  };
  plan.tokens = coordinator_.find_hit_with(hashes, prompt_tokens, tier_holds);
  if (plan.tokens <= coordinator_.find_hit(hashes, prompt_tokens).tokens) return SwapInPlan{};
  std::vector<std::pair<std::size_t, PositionalLineageHash>> fetch;  // (block start token, key)
  for (std::size_t g = 0; g < groups; ++g) {
    const std::size_t bs = coordinator_.geometry().groups()[g].spec.block_size;
    for (std::size_t b = coordinator_.first_hit_block(g, plan.tokens); b < plan.tokens / bs; ++b) {
      const PositionalLineageHash key = group_tier_key(hashes[coordinator_.hash_index(g, b)], g);
      if (held[g][b] == -1) {
        plan.pin.push_back(key);
      } else {
        fetch.emplace_back(b * bs, key);
      }
    }
  }
  std::stable_sort(fetch.begin(), fetch.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& entry : fetch) plan.fetch.push_back(entry.second);
  return plan;
}

}  // namespace kvtier::g1
