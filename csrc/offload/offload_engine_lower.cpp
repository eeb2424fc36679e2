// The offload engine's side of the tiers below G2 (docs/disk.md,
// docs/shared-tier.md): blocks G2 evicts are demoted from their pinned pages
// (into G3; into G4 when its write-through offer at landing was refused), and
// a swap-in's blocks that only a lower tier holds are read into Landing G2
// pages before the copy to G1 starts — from the nearest tier that holds
// them. A page a lower tier reads into stays Landing, owned by that read,
// until the read ends: an abandoned swap-in never frees it early.
#include <algorithm>
#include <utility>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"
#include "kvtier/offload/offload_engine.hpp"

namespace kvtier::offload {

const tiers::LowerTier* OffloadEngine::lower_tier(StorageTier medium) const noexcept {
  for (const auto& lower : lowers_) {
    if (lower->medium() == medium) return lower.get();
  }
  return nullptr;
}

tiers::LowerTier* OffloadEngine::lower_tier(StorageTier medium) noexcept {
  for (const auto& lower : lowers_) {
    if (lower->medium() == medium) return lower.get();
  }
  return nullptr;
}

const LowerTierUsage& OffloadEngine::lower_usage(StorageTier medium) const noexcept {
  static const LowerTierUsage kNone{};
  for (std::size_t t = 0; t < lowers_.size(); ++t) {
    if (lowers_[t]->medium() == medium) return lower_usages_[t];
  }
  return kNone;
}

void OffloadEngine::demote(G2Page page, const HostBlockRegistry::Eviction& evicted) {
  if (lowers_.empty()) return;
  if (config_.verify_swaps && checksum(page) != evicted.checksum) {
    ++verify_failures_;  // damaged in G2: it goes no lower
    return;
  }
  for (std::size_t t = 0; t < lowers_.size(); ++t) {
    // A write-through tier was offered the block when it landed; it gets it now only if that
    // was refused for room (its admission's answer stands for the whole stay in G2).
    if (lowers_[t]->write_through() &&
        (lowers_[t]->contains(evicted.block.plh) || (declined_on_landing_[page.value()] >> t & 1U) != 0)) {
      continue;
    }
    offer_to_lower(t, page, evicted.block);
  }
}

bool OffloadEngine::offer_to_lower(std::size_t tier, G2Page page, const g1::TieredBlock& block) {
  tiers::LowerTier& lower = *lowers_[tier];
  LowerTierUsage& usage = lower_usages_[tier];
  if (lower.contains(block.plh)) {  // never stored twice, and no offer counted
    ++usage.demotions_skipped;
    return true;
  }
  if (!lower_admissions_[tier].admit(block.plh)) {
    ++usage.declined;
    return false;
  }
  const std::span<const std::byte> bytes(host_pool_.chunk_address(PageId(page.value()), 0), page_bytes());
  std::vector<g1::TieredBlock> removed;
  switch (lower.write(block, bytes, removed)) {
    case tiers::LowerTier::WriteStart::Started:
      ++usage.demoted;
      break;
    case tiers::LowerTier::WriteStart::Present:
      ++usage.demotions_skipped;
      break;
    case tiers::LowerTier::WriteStart::NoRoom:
      ++usage.demotions_refused;
      break;
  }
  publish_removed(lower.medium(), std::move(removed));
  return true;
}

std::optional<G2Page> OffloadEngine::reserve_page(const g1::TieredBlock& block, std::vector<g1::TieredBlock>& removed) {
  std::optional<HostBlockRegistry::Eviction> evicted;
  const auto page = registry_.reserve(block, evicted);
  if (page && !lowers_.empty()) {
    promoted_pages_[page->value()] = 0;
    declined_on_landing_[page->value()] = 0;
  }
  if (page && evicted) {
    removed.push_back(evicted->block);
    demote(*page, *evicted);  // before anything writes the page
  }
  return page;
}

void OffloadEngine::issue_lower_reads(std::uint64_t id, Transfer& transfer) {
  bool changed = false;
  for (std::size_t tier = 0; tier < lowers_.size() && !transfer.lower_unissued.empty(); ++tier) {
    tiers::LowerTier& lower = *lowers_[tier];
    for (;;) {
      std::vector<std::size_t> mine;  // this tier's positions not yet read, in order
      for (const std::size_t position : transfer.lower_unissued) {
        if (transfer.lower_source[position] == tier) mine.push_back(position);
      }
      const std::size_t n = std::min(lower.read_room(), mine.size());
      if (n == 0) break;  // the next poll issues the rest
      LowerLoad load{.tier = tier, .transfer = id, .pages = {}, .positions = {}};
      std::vector<PositionalLineageHash> plhs;
      std::vector<std::byte*> pages;
      std::vector<std::size_t> gone;  // left the tier before their read was issued
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t position = mine[i];
        const G2Page page = transfer.g2_pages[position];
        const PositionalLineageHash plh = registry_.block(page).plh;
        if (!lower.find(plh)) {
          gone.push_back(position);
          continue;
        }
        plhs.push_back(plh);
        pages.push_back(host_pool_.chunk_address(PageId(page.value()), 0));
        load.pages.push_back(page);
        load.positions.push_back(position);
      }
      if (!plhs.empty()) {
        const auto read = lower.read(plhs, pages);
        if (!read) break;
        lower_loads_.emplace(std::pair{tier, *read}, std::move(load));
      }
      std::erase_if(transfer.lower_unissued, [&](std::size_t position) {
        return std::find(mine.begin(), mine.begin() + static_cast<std::ptrdiff_t>(n), position) !=
               mine.begin() + static_cast<std::ptrdiff_t>(n);
      });
      changed = true;
      for (const std::size_t position : gone) {
        registry_.drop(transfer.g2_pages[position]);
        ++lower_usages_[tier].promotions_failed;
        transfer.lower_failed = true;
        --transfer.lower_pending;
      }
    }
  }
  if (changed && transfer.lower_pending == 0) lower_settled(id, transfer);
}

void OffloadEngine::apply_lower(std::size_t tier, tiers::LowerTierProgress progress) {
  const StorageTier medium = lowers_[tier]->medium();
  for (const g1::TieredBlock& block : progress.stored) publish_stored(medium, block);
  publish_removed(medium, std::move(progress.dropped));
  for (const tiers::LowerRead& read : progress.reads) land_lower_read(tier, read);
}

void OffloadEngine::land_lower_read(std::size_t tier, const tiers::LowerRead& read) {
  const auto it = lower_loads_.find(std::pair{tier, read.id});
  KVTIER_ASSERT(it != lower_loads_.end(), "a lower-tier read the engine did not issue");
  const LowerLoad load = std::move(it->second);
  lower_loads_.erase(it);
  LowerTierUsage& usage = lower_usages_[tier];
  const auto owner = load.transfer != 0 ? transfers_.find(load.transfer) : transfers_.end();
  Transfer* transfer = owner != transfers_.end() ? &owner->second : nullptr;
  for (std::size_t i = 0; i < load.pages.size(); ++i) {
    const G2Page page = load.pages[i];
    const g1::TieredBlock block = registry_.block(page);
    bool landed = false;
    if (read.ok[i]) {
      landed = registry_.land(page, config_.verify_swaps ? checksum(page) : 0);
    } else {
      registry_.drop(page);  // the read wrote nothing into it
    }
    if (landed) {
      ++usage.promoted;
      // An abandoned swap-in's block waits in G2, still counted as this tier's hit when taken.
      promoted_pages_[page.value()] = transfer == nullptr ? static_cast<std::uint8_t>(tier + 1) : 0;
      publish_stored(StorageTier::HostPinned, block);
    } else {
      ++usage.promotions_failed;
    }
    if (transfer == nullptr) continue;
    if (landed) {
      registry_.pin(page);
      transfer->pinned[load.positions[i]] = true;
    } else {
      transfer->lower_failed = true;
    }
    --transfer->lower_pending;
  }
  if (transfer != nullptr && transfer->lower_pending == 0) lower_settled(load.transfer, *transfer);
}

void OffloadEngine::lower_settled(std::uint64_t id, Transfer& transfer) {
  if (!transfer.started || transfer.submitted || transfer.state != g1::TransferState::Pending) return;
  if (transfer.lower_failed) {  // the request recomputes: no byte that did not verify reaches G1
    transfer.state = g1::TransferState::Failed;
    ++failed_transfers_;
    return;
  }
  try {
    submit(id, transfer);
  } catch (const Error&) {
    transfer.state = g1::TransferState::Failed;
    ++failed_transfers_;
  }
}

void OffloadEngine::wait_lower(std::uint64_t id, Transfer& transfer) {
  while (transfer.lower_pending > 0) {
    issue_lower_reads(id, transfer);
    if (transfer.lower_pending == 0) break;
    const std::size_t before = transfer.lower_pending;
    for (std::size_t tier = 0; tier < lowers_.size(); ++tier) apply_lower(tier, lowers_[tier]->poll(true));
    bool room = false;  // a tier that could take one of this swap-in's waiting reads now
    for (const std::size_t position : transfer.lower_unissued) {
      room = room || lowers_[transfer.lower_source[position]]->read_room() > 0;
    }
    if (transfer.lower_pending == before && transfer.lower_unissued.size() == before && !room) {
      // Nothing in flight and no room for a read: a tier that cannot read is a miss, not a hang.
      for (const std::size_t position : transfer.lower_unissued) {
        registry_.drop(transfer.g2_pages[position]);
        ++lower_usages_[transfer.lower_source[position]].promotions_failed;
      }
      transfer.lower_unissued.clear();
      transfer.lower_pending = 0;
      transfer.lower_failed = true;
    }
  }
  lower_settled(id, transfer);
}

}  // namespace kvtier::offload
