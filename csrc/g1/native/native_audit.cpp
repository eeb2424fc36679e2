// What the native backend holds: its metrics, metadata bytes, registered
// blocks and the audit of every invariant (the pool checks its own).
#include <string>

#include "g1/native/native_backend.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::g1 {

G1Metrics NativeBackend::metrics() const {
  // Swap-in destination pages are private copies that no table holds yet:
  // active pages, but not references (as KVBM's held slots).
  std::size_t slot_pages = 0;
  for (const auto& entry : swap_in_slots_) slot_pages += entry.second.size();
  return G1Metrics{.active_blocks = pool_.active_blocks(),
                   .active_block_refs = pool_.active_block_refs() - slot_pages,
                   .inactive_blocks = pool_.inactive_len(),
                   .capacity = pool_.capacity()};
}

std::size_t NativeBackend::metadata_bytes() const {
  return pool_.metadata_bytes() + tables_.bytes([](const detail::NativeOwnerTable& owned) {
    return owned.pages.capacity() * sizeof(PageId) + owned.blocks.capacity() * sizeof(UniqueBlock) +
           owned.meta.capacity() * sizeof(detail::NativeBlockMeta) + owned.token_ids.capacity() * sizeof(TokenId);
  });
}

std::vector<std::pair<PageId, SequenceHash>> NativeBackend::registered_blocks() const {
  std::vector<std::pair<PageId, SequenceHash>> out;
  for (std::uint32_t page = 0; page < pool_.capacity(); ++page) {
    if (const auto hash = pool_.cached_hash(PageId(page))) out.emplace_back(PageId(page), *hash);
  }
  return out;
}

void NativeBackend::audit() const {
  NativeBlockPool::Holders holders{.refs = std::vector<std::uint32_t>(pool_.capacity(), 0),
                                   .pins = std::vector<std::uint32_t>(pool_.capacity(), 0)};
  std::size_t partials = 0;
  tables_.audit(pool_.capacity(), [&](const std::string& who, const detail::NativeOwnerTable& owned, std::size_t i) {
    const PageId page = owned.pages[i];
    ++holders.refs[page.value()];
    if (owned.blocks[i].is_partial()) {
      ++partials;
      KVTIER_ASSERT(live_partials_.contains(owned.blocks[i].uuid()), who + " holds a partial block that is not live");
      KVTIER_ASSERT(pool_.is_private_page(page), who + "'s partial block is on a page that is not private");
    } else if (const auto hash = pool_.cached_hash(page)) {
      KVTIER_ASSERT(*hash == owned.blocks[i].hash(), who + "'s full block is on a page cached for another hash");
    }
  });
  KVTIER_ASSERT(partials == live_partials_.size(), "live partial blocks differ from the partials in tables");
  const auto hold = [&](const NativeReservation& reservation) {
    for (const PrefixPin& pin : reservation.prefix) ++holders.pins[pin.page.value()];
    holders.reserved += reservation.fresh;
  };
  for (const auto& entry : decode_reservations_) hold(entry.second);
  for (const auto& entry : destinations_) hold(entry.second.reservation);
  for (const auto& entry : prefix_pins_) hold(entry.second);
  for (const auto& entry : swap_in_slots_) {
    for (const PageId page : entry.second) ++holders.refs[page.value()];
  }
  pool_.audit(holders);
}

}  // namespace kvtier::g1
