// The offload engine's side of the tier below G2 (docs/disk.md): blocks G2
// evicts are demoted from their pinned pages, and a swap-in's blocks that
// only the lower tier holds are read into Landing G2 pages before the copy
// to G1 starts. A page the lower tier reads into stays Landing, owned by
// that read, until the read ends: an abandoned swap-in never frees it early.
#include <algorithm>
#include <utility>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"
#include "kvtier/offload/offload_engine.hpp"

namespace kvtier::offload {

void OffloadEngine::demote(G2Page page, const HostBlockRegistry::Eviction& evicted) {
  if (!lower_) return;
  if (config_.verify_swaps && checksum(page) != evicted.checksum) {
    ++verify_failures_;  // damaged in G2: it goes no lower
    return;
  }
  offer_to_lower(page, evicted.block);
}

void OffloadEngine::offer_to_lower(G2Page page, const g1::TieredBlock& block) {
  const std::span<const std::byte> bytes(host_pool_.chunk_address(PageId(page.value()), 0), page_bytes());
  std::vector<SequenceHash> removed;
  switch (lower_->write(block, bytes, removed)) {
    case tiers::LowerTier::WriteStart::Started:
      ++lower_usage_.demoted;
      break;
    case tiers::LowerTier::WriteStart::Present:
      ++lower_usage_.demotions_skipped;
      break;
    case tiers::LowerTier::WriteStart::NoRoom:
      ++lower_usage_.demotions_refused;
      break;
  }
  if (!removed.empty()) publisher_->publish_removed(lower_->medium(), KvRemoved{std::move(removed)});
}

std::optional<G2Page> OffloadEngine::reserve_page(const g1::TieredBlock& block, std::vector<SequenceHash>& removed) {
  std::optional<HostBlockRegistry::Eviction> evicted;
  const auto page = registry_.reserve(block, evicted);
  if (page && lower_) promoted_pages_[page->value()] = false;
  if (page && evicted) {
    removed.push_back(evicted->block.hash);
    demote(*page, *evicted);  // before anything writes the page
  }
  return page;
}

void OffloadEngine::issue_lower_reads(std::uint64_t id, Transfer& transfer) {
  while (!transfer.lower_unissued.empty()) {
    const std::size_t n = std::min(lower_->read_room(), transfer.lower_unissued.size());
    if (n == 0) return;  // the next poll issues the rest
    LowerLoad load{.transfer = id, .pages = {}, .positions = {}};
    std::vector<PositionalLineageHash> plhs;
    std::vector<std::byte*> pages;
    std::vector<std::size_t> gone;  // evicted from the lower tier before their read was issued
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t position = transfer.lower_unissued[i];
      const G2Page page = transfer.g2_pages[position];
      const PositionalLineageHash plh = registry_.block(page).plh;
      if (!lower_->find(plh)) {
        gone.push_back(position);
        continue;
      }
      plhs.push_back(plh);
      pages.push_back(host_pool_.chunk_address(PageId(page.value()), 0));
      load.pages.push_back(page);
      load.positions.push_back(position);
    }
    if (!plhs.empty()) {
      const auto read = lower_->read(plhs, pages);
      if (!read) return;
      lower_loads_.emplace(*read, std::move(load));
    }
    transfer.lower_unissued.erase(transfer.lower_unissued.begin(),
                                  transfer.lower_unissued.begin() + static_cast<std::ptrdiff_t>(n));
    for (const std::size_t position : gone) {
      registry_.drop(transfer.g2_pages[position]);
      ++lower_usage_.promotions_failed;
      transfer.lower_failed = true;
      --transfer.lower_pending;
    }
    if (transfer.lower_pending == 0) lower_settled(id, transfer);
  }
}

void OffloadEngine::apply_lower(tiers::LowerTierProgress progress) {
  for (const g1::TieredBlock& block : progress.stored) publish_stored(lower_->medium(), block);
  if (!progress.dropped.empty()) publisher_->publish_removed(lower_->medium(), KvRemoved{std::move(progress.dropped)});
  for (const tiers::LowerRead& read : progress.reads) land_lower_read(read);
}

void OffloadEngine::land_lower_read(const tiers::LowerRead& read) {
  const auto it = lower_loads_.find(read.id);
  KVTIER_ASSERT(it != lower_loads_.end(), "a lower-tier read the engine did not issue");
  const LowerLoad load = std::move(it->second);
  lower_loads_.erase(it);
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
      ++lower_usage_.promoted;
      promoted_pages_[page.value()] = transfer == nullptr;  // an abandoned swap-in's block waits in G2
      publish_stored(StorageTier::HostPinned, block);
    } else {
      ++lower_usage_.promotions_failed;
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
    apply_lower(lower_->poll(true));
    if (transfer.lower_pending == before && transfer.lower_unissued.size() == before && lower_->read_room() == 0) {
      // Nothing in flight and no room for a read: a tier that cannot read is a miss, not a hang.
      for (const std::size_t position : transfer.lower_unissued) registry_.drop(transfer.g2_pages[position]);
      lower_usage_.promotions_failed += before;
      transfer.lower_unissued.clear();
      transfer.lower_pending = 0;
      transfer.lower_failed = true;
    }
  }
  lower_settled(id, transfer);
}

}  // namespace kvtier::offload
