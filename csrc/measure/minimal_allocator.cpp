#include "kvtier/measure/minimal_allocator.hpp"

namespace kvtier::measure {

MinimalAllocator::MinimalAllocator(std::uint32_t pages) : pages_(pages) {
  std::size_t slots = 2;
  while (slots < 2 * std::size_t{pages}) slots *= 2;
  slots_.assign(slots, kNoPage);
  while ((std::size_t{1} << (64 - shift_)) < slots) --shift_;
}

std::uint32_t MinimalAllocator::find(std::uint64_t hash) const {
  for (std::size_t slot = home(hash);; slot = next(slot)) {
    const std::uint32_t page = slots_[slot];
    if (page == kNoPage || pages_[page].hash == hash) return page;
  }
}

void MinimalAllocator::insert(std::uint32_t page) {
  std::size_t slot = home(pages_[page].hash);
  while (slots_[slot] != kNoPage) slot = next(slot);
  slots_[slot] = page;
}

void MinimalAllocator::erase(std::uint32_t page) {
  std::size_t slot = home(pages_[page].hash);
  while (slots_[slot] != page) slot = next(slot);
  // Backward shift: pull later entries of the probe run into the hole.
  for (std::size_t later = next(slot); slots_[later] != kNoPage; later = next(later)) {
    const std::size_t want = home(pages_[slots_[later]].hash);
    const bool movable = slot <= later ? (want <= slot || want > later) : (want <= slot && want > later);
    if (movable) {
      slots_[slot] = slots_[later];
      slot = later;
    }
  }
  slots_[slot] = kNoPage;
}

void MinimalAllocator::unlink(std::uint32_t page) {
  Page& p = pages_[page];
  (p.prev == kNoPage ? lru_head_ : pages_[p.prev].next) = p.next;
  (p.next == kNoPage ? lru_tail_ : pages_[p.next].prev) = p.prev;
  p.prev = p.next = kNoPage;
  --unowned_;
}

void MinimalAllocator::push_tail(std::uint32_t page) {
  Page& p = pages_[page];
  p.prev = lru_tail_;
  p.next = kNoPage;
  (lru_tail_ == kNoPage ? lru_head_ : pages_[lru_tail_].next) = page;
  lru_tail_ = page;
  ++unowned_;
}

bool MinimalAllocator::use(std::span<const UniqueBlock> blocks, std::vector<std::uint32_t>& table) {
  table.clear();
  std::size_t unowned_hits = 0;
  for (const UniqueBlock& block : blocks) {
    const std::uint32_t page = find(block.hash().value());
    if (page == kNoPage) break;  // the cached prefix ends here
    table.push_back(page);
    if (pages_[page].refs == 0) ++unowned_hits;
  }
  const std::size_t misses = blocks.size() - table.size();
  if (misses > (pages_.size() - next_fresh_) + unowned_ - unowned_hits) {
    table.clear();
    return false;
  }
  for (const std::uint32_t page : table) {
    if (pages_[page].refs++ == 0) unlink(page);
  }
  for (std::size_t i = table.size(); i < blocks.size(); ++i) {
    std::uint32_t page;
    if (next_fresh_ < pages_.size()) {
      page = next_fresh_++;
    } else {
      page = lru_head_;
      unlink(page);
      erase(page);
    }
    pages_[page].hash = blocks[i].hash().value();
    pages_[page].refs = 1;
    insert(page);  // a block cached after an evicted parent may be there twice: erase goes by page
    table.push_back(page);
  }
  return true;
}

void MinimalAllocator::release(std::span<const std::uint32_t> table) {
  for (auto page = table.rbegin(); page != table.rend(); ++page) {
    if (--pages_[*page].refs == 0) push_tail(*page);
  }
}

}  // namespace kvtier::measure
