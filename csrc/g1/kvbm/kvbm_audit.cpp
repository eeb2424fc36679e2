// What KVBM holds: its metrics, metadata bytes, registered blocks and the
// audit of every invariant.
#include <string>

#include "g1/kvbm/kvbm_backend.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::g1 {

G1Metrics KvbmBackend::metrics() const {
  const std::size_t available = free_count_ + policy_->size();
  return G1Metrics{.active_blocks = capacity_ - available,
                   .active_block_refs = partials_.size() + full_refs_,
                   .inactive_blocks = policy_->size(),
                   .capacity = capacity_};
}

std::size_t KvbmBackend::metadata_bytes() const {
  std::size_t bytes = pages_.capacity() * sizeof(Page) + index_.memory_bytes() + policy_->metadata_bytes();
  return bytes + tables_.bytes([](const detail::KvbmOwnerTable& owned) {
    return owned.pages.capacity() * sizeof(PageId) + owned.blocks.capacity() * sizeof(UniqueBlock);
  });
}

std::vector<std::pair<PageId, SequenceHash>> KvbmBackend::registered_blocks() const {
  std::vector<std::pair<PageId, SequenceHash>> out;
  for (std::uint32_t page = 0; page < capacity_; ++page) {
    if (pages_[page].state == PageState::Registered) out.emplace_back(PageId(page), SequenceHash(pages_[page].hash));
  }
  return out;
}

void KvbmBackend::audit() const {
  std::vector<std::uint32_t> uses(capacity_, 0);
  std::size_t entries = 0;
  tables_.audit(capacity_, [&](const std::string& who, const detail::KvbmOwnerTable& owned, std::size_t i) {
    const std::uint32_t page = owned.pages[i].value();
    ++uses[page];
    ++entries;
    const std::string at = who + ", page " + std::to_string(page) + ": ";
    if (owned.blocks[i].is_partial()) {
      const auto partial = partials_.find(owned.blocks[i].uuid());
      KVTIER_ASSERT(pages_[page].state == PageState::Partial, at + "a partial block on a page that is not partial");
      KVTIER_ASSERT(partial != partials_.end() && partial->second == page,
                    at + "a partial block its record does not hold");
    } else {
      KVTIER_ASSERT(pages_[page].state == PageState::Registered, at + "a full block on a page that is not registered");
    }
  });
  std::vector<bool> on_free_list(capacity_, false);
  std::uint32_t free_pages = 0;
  for (std::uint32_t page = free_head_; page != kNoPage; page = pages_[page].refs) {
    KVTIER_ASSERT(page < capacity_ && !on_free_list[page] && pages_[page].state == PageState::Reset,
                  "the free list is corrupt at page " + std::to_string(page));
    on_free_list[page] = true;
    ++free_pages;
  }
  KVTIER_ASSERT(free_pages == free_count_, "the free list length differs from its count");
  std::size_t held = 0;
  for (const auto& entry : decode_reservations_) held += entry.second.size();
  for (const auto& entry : destinations_) held += entry.second.slots.size();
  for (const auto& entry : swap_in_slots_) held += entry.second.size();
  std::vector<std::uint32_t> pins(capacity_, 0);
  for (const auto& entry : destinations_) {
    for (std::uint32_t page : entry.second.prefix_pages) ++pins[page];
  }
  for (const auto& entry : prefix_pins_) {
    for (std::uint32_t page : entry.second) ++pins[page];
  }
  std::size_t quarantined_pages = 0;
  std::size_t partial_pages = 0;
  std::size_t held_pages = 0;
  std::size_t refs = 0;
  std::size_t inactive = 0;
  std::size_t index_entries = 0;  // one a registered page, two where its PLH and hash are filed apart
  for (std::uint32_t page = 0; page < capacity_; ++page) {
    const Page& p = pages_[page];
    const std::string at = "page " + std::to_string(page) + ": ";
    switch (p.state) {
      case PageState::Reset:
        KVTIER_ASSERT(on_free_list[page], at + "a reset page is missing from the free list");
        KVTIER_ASSERT(uses[page] == 0, at + "a table holds a free page");
        break;
      case PageState::Held:
        ++held_pages;
        KVTIER_ASSERT(uses[page] == 0, at + "a table holds a reserved slot");
        break;
      case PageState::Quarantined:
        ++quarantined_pages;
        KVTIER_ASSERT(uses[page] == 0, at + "a table holds a quarantined page");
        break;
      case PageState::Partial:
        ++partial_pages;
        KVTIER_ASSERT(uses[page] == 1, at + "a partial page has other than one table entry");
        break;
      case PageState::Registered:
        refs += p.refs;
        index_entries += (p.flags & kHashIndexed) != 0 && filed_under(p.hash) != filed_under(p.plh) ? 2 : 1;
        KVTIER_ASSERT(p.refs == uses[page], at + "references differ from table entries");
        KVTIER_ASSERT(p.pins == pins[page], at + "pins differ from the destination reservations and prefix pins");
        KVTIER_ASSERT(registered_page(p.plh) == page, at + "a registered page is missing from the registry");
        KVTIER_ASSERT((p.flags & kHashIndexed) == 0 || page_of_hash(p.hash) == page,
                      at + "the first page of a hash is not what a lookup by hash finds");
        KVTIER_ASSERT(policy_->contains(PageId(page)) == (p.refs == 0 && p.pins == 0),
                      at + "a registered page is in the inactive pool iff unheld");
        if (p.refs == 0 && p.pins == 0) ++inactive;
        break;
    }
  }
  KVTIER_ASSERT(held_pages == held, "reserved slots differ from the reservations");
  KVTIER_ASSERT(quarantined_pages == quarantined_, "quarantined pages differ from their count");
  KVTIER_ASSERT(partial_pages == partials_.size(), "partial pages differ from the partial records");
  KVTIER_ASSERT(refs == full_refs_, "full references differ from the registered pages' counts");
  KVTIER_ASSERT(entries == partials_.size() + full_refs_, "active references differ from the table entries");
  KVTIER_ASSERT(inactive == policy_->size(), "the inactive pool's size differs from the unheld registered pages");
  KVTIER_ASSERT(index_.size() == index_entries, "the index holds other entries than the registered pages'");
}

}  // namespace kvtier::g1
