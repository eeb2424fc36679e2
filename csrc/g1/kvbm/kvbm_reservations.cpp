// KVBM's reservations: prefill cost, decode growth, destinations (disaggregated
// decode side), prefix pins and swap-in slots, and the offload tier's releases.
#include <algorithm>
#include <string>
#include <tuple>

#include "g1/common/contract_checks.hpp"
#include "g1/common/stored_runs.hpp"
#include "g1/kvbm/kvbm_backend.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::g1 {
PrefillCost KvbmBackend::prefill_cost(const ActiveSequence& sequence) const {
  std::size_t overlap = 0;
  std::size_t active = 0;
  if (sequence.enable_prefix_caching()) {
    for (std::size_t i = 0; i < sequence.blocks().size(); ++i) {
      const UniqueBlock& block = sequence.blocks()[i];
      if (block.is_partial()) break;
      const std::uint32_t page = page_of_hash(block.hash().value());
      if (page != kNoPage && pages_[page].refs > 0) {
        ++overlap;
        ++active;
      } else if (registered_page(sequence.plh(i)) != kNoPage) {
        ++overlap;
      } else {
        break;
      }
    }
  }
  return prefill_cost_of(overlap, active, sequence.blocks().size(), sequence.num_input_tokens());
}

std::optional<std::uint64_t> KvbmBackend::reserve_decode_blocks(std::size_t blocks) {
  if (blocks > obtainable({})) return std::nullopt;
  std::vector<SequenceHash> removed;
  G1Acquire blocked;
  auto slots = take_slots(blocks, removed, blocked);
  publish_removed(std::move(removed));
  if (!slots) return std::nullopt;  // not now: the evictions wait for their copies
  return decode_reservations_.add(reservation_ids_, std::move(*slots));
}

G1Acquire KvbmBackend::process_decode(OwnerId owner, const MoveBlock& signal, std::uint64_t reservation) {
  std::vector<std::uint32_t>& slots = decode_reservations_.at(reservation);
  if (const auto* use_signal = std::get_if<UseSignal>(&signal)) return use(owner, *use_signal, &slots);
  return process(owner, signal, 0);
}

void KvbmBackend::release_decode(std::uint64_t reservation) {
  for (std::uint32_t page : decode_reservations_.take(reservation)) return_page(page);
}

std::optional<BlockManager::DestinationGrant> KvbmBackend::reserve_destination(OwnerId owner,
                                                                               const ActiveSequence& sequence,
                                                                               double /*now_ms*/) {
  detail::check_destination_owner(owner, tables_.contains(owner));
  Destination d{.owner = owner,
                .prompt = detail::DestinationPrompt::of(sequence, block_size_),
                .plhs = {},
                .prefix_pages = {},
                .slots = {}};
  for (std::size_t i = 0; i < d.prompt.full; ++i) d.plhs.push_back(sequence.plh(i));
  for (std::size_t i = 0; i < d.plhs.size(); ++i) {
    std::uint32_t page = page_of_hash(d.prompt.blocks[i].hash().value());
    if (page == kNoPage || pages_[page].refs == 0) page = registered_page(d.plhs[i]);
    if (page == kNoPage) break;
    d.prefix_pages.push_back(page);
  }
  const std::size_t fresh = d.prompt.blocks.size() - d.prefix_pages.size();
  if (fresh > obtainable(d.prefix_pages)) return std::nullopt;
  for (std::uint32_t page : d.prefix_pages) detail::check_pin_room(page, pages_[page].pins, kMaxPins);
  for (std::size_t i = 0; i < d.prefix_pages.size(); ++i) {
    const std::uint32_t page = d.prefix_pages[i];
    if (policy_->contains(PageId(page))) policy_->remove(PageId(page));
    policy_->touch(d.plhs[i]);
    ++pages_[page].pins;
  }
  std::vector<SequenceHash> removed;
  G1Acquire blocked;
  auto slots = take_slots(fresh, removed, blocked);
  publish_removed(std::move(removed));
  if (!slots) {
    unpin_pages(d.prefix_pages);
    return std::nullopt;
  }
  d.slots = std::move(*slots);
  const std::size_t transferable = fresh * block_size_;
  return DestinationGrant{destinations_.add(reservation_ids_, std::move(d)), transferable};
}

void KvbmBackend::activate_destination(std::uint64_t reservation) {
  const Destination& d = destinations_.at(reservation);
  const std::vector<UniqueBlock>& blocks = d.prompt.blocks;
  detail::check_destination_owner(d.owner, tables_.contains(d.owner));
  if (!blocks.empty()) {
    const UniqueBlock& last = blocks.back();
    detail::check_partial_unallocated(last, last.is_partial() && partials_.contains(last.uuid()));
  }
  detail::KvbmOwnerTable& owned = tables_.for_owner(d.owner);
  detail::StoredRuns runs(publisher_, blocks.size());
  std::size_t next_slot = 0;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const UniqueBlock& block = blocks[i];
    std::uint32_t page;
    if (i < d.prefix_pages.size()) {
      page = d.prefix_pages[i];
      --pages_[page].pins;
      ++pages_[page].refs;
      ++full_refs_;
      runs.gap();
    } else if (block.is_partial()) {
      page = d.slots[next_slot++];
      pages_[page].state = PageState::Partial;
      partials_.emplace(block.uuid(), page);
    } else {
      const std::vector<TokenId>* ids = d.prompt.token_ids ? &(*d.prompt.token_ids)[i] : nullptr;
      bool registered = false;
      std::tie(page, registered) =
          register_or_adopt(d.slots[next_slot++], d.plhs[i], block.hash(), d.prompt.parent(i), d.prompt.local(i), ids);
      registered ? runs.add(d.prompt.parent(i), {block.hash(), d.prompt.local(i)}, true, detail::token_ids_of(ids))
                 : runs.gap();
    }
    owned.pages.emplace_back(page);
    owned.blocks.push_back(block);
  }
  runs.gap();
  destinations_.erase(reservation);
}

void KvbmBackend::cancel_destination(std::uint64_t reservation) {
  const Destination d = destinations_.take(reservation);
  unpin_pages(d.prefix_pages);
  for (std::uint32_t slot : d.slots) return_page(slot);
}

void KvbmBackend::release_quarantined(std::span<const PageId> pages) {
  for (const PageId page : pages) {
    KVTIER_ASSERT(page.value() < capacity_ && pages_[page.value()].state == PageState::Quarantined,
                  "page " + std::to_string(page.value()) + " is released from quarantine but is not quarantined");
  }
  for (const PageId page : pages) {
    return_page(page.value());
    --quarantined_;
  }
}

std::optional<std::uint64_t> KvbmBackend::pin_prefix(std::span<const PositionalLineageHash> plhs) {
  std::vector<std::uint32_t> pages;
  pages.reserve(plhs.size());
  for (const PositionalLineageHash& plh : plhs) {
    const std::uint32_t page = registered_page(plh);
    if (page == kNoPage) return std::nullopt;  // all or nothing: the prefix stops here
    detail::check_pin_room(page, pages_[page].pins, kMaxPins);
    pages.push_back(page);
  }
  for (const std::uint32_t page : pages) {
    if (policy_->contains(PageId(page))) policy_->remove(PageId(page));
    policy_->touch(pages_[page].plh);
    ++pages_[page].pins;
  }
  return prefix_pins_.add(reservation_ids_, std::move(pages));
}

void KvbmBackend::release_pins(std::uint64_t pins) { unpin_pages(prefix_pins_.take(pins)); }

BlockManager::SlotGrant KvbmBackend::reserve_slots(std::size_t count) {
  if (count > obtainable({})) return SlotGrant{G1Acquire::capacity_exhausted(), 0};
  std::vector<SequenceHash> removed;
  G1Acquire blocked;
  auto slots = take_slots(count, removed, blocked);
  publish_removed(std::move(removed));
  if (!slots) return SlotGrant{blocked, 0};
  return SlotGrant{G1Acquire::ready(count),
                   swap_in_slots_.add(reservation_ids_, std::vector<PageId>(slots->begin(), slots->end()))};
}

void KvbmBackend::release_slots(std::uint64_t slots) {
  for (const PageId page : swap_in_slots_.take(slots)) return_page(page.value());
}

std::optional<std::size_t> KvbmBackend::register_swapped_in(std::uint64_t slots, std::span<const TieredBlock> blocks) {
  const std::vector<PageId>& reserved = swap_in_slots_.at(slots);
  KVTIER_EXPECTS(blocks.size() <= reserved.size(), "more swapped-in blocks than reserved slots");
  // Which blocks become new inactive blocks, checked before anything changes.
  std::vector<bool> fresh(blocks.size(), false);
  std::vector<PositionalLineageHash> inserting;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const std::uint32_t active = page_of_hash(blocks[i].hash.value());
    fresh[i] = registered_page(blocks[i].plh) == kNoPage && (active == kNoPage || pages_[active].refs == 0) &&
               std::find_if(blocks.begin(), blocks.begin() + static_cast<std::ptrdiff_t>(i), [&](const TieredBlock& b) {
                 return b.plh == blocks[i].plh;
               }) == blocks.begin() + static_cast<std::ptrdiff_t>(i);
    if (fresh[i]) inserting.push_back(blocks[i].plh);
  }
  std::reverse(inserting.begin(), inserting.end());
  if (policy_->insert_refusal(inserting)) return std::nullopt;
  detail::StoredRuns runs(publisher_, blocks.size());
  std::vector<std::uint32_t> registered;
  for (std::size_t i = 0; i < reserved.size(); ++i) {
    const std::uint32_t slot = reserved[i].value();
    if (i >= blocks.size() || !fresh[i]) {
      return_page(slot);
      runs.gap();  // a block G1 holds already ends the run and parents the next (§5.5)
      continue;
    }
    const TieredBlock& b = blocks[i];
    const std::vector<TokenId>* ids = b.token_ids ? &*b.token_ids : nullptr;
    register_block(slot, b.plh, b.hash, b.parent, b.local, ids);
    runs.add(b.parent, {b.hash, b.local}, true, detail::token_ids_of(ids));
    registered.push_back(slot);
  }
  runs.gap();
  for (auto page = registered.rbegin(); page != registered.rend(); ++page) {
    policy_->insert(PageId(*page), pages_[*page].plh);  // inactive, leaf first
  }
  swap_in_slots_.erase(slots);
  return registered.size();
}

}  // namespace kvtier::g1
