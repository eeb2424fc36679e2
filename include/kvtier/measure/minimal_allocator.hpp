#pragma once
// The same-run floor of the allocator benches: what a minimal prefix-caching
// allocator costs on the same request stream — a page array, an intrusive
// LRU of unowned cached pages, a flat open-addressing map from hash to page,
// eviction from the LRU head. No events, no owners, no validation: whatever
// a backend costs beyond this is its own overhead.
#include <cstdint>
#include <span>
#include <vector>

#include "kvtier/core/move_block.hpp"

namespace kvtier::measure {

class MinimalAllocator {
 public:
  explicit MinimalAllocator(std::uint32_t pages);
  /// Takes a page for every block (a hit reuses its page); false when full.
  bool use(std::span<const UniqueBlock> blocks);
  /// Releases the blocks (leaf first): unowned pages join the LRU tail.
  void release(std::span<const UniqueBlock> blocks);

 private:
  static constexpr std::uint32_t kNone = 0xFFFFFFFFU;
  struct Page {
    std::uint64_t hash = 0;
    std::uint32_t refs = 0;
    std::uint32_t prev = kNone;
    std::uint32_t next = kNone;
  };
  std::uint32_t find(std::uint64_t hash) const;
  void insert(std::uint32_t page);
  void erase(std::uint32_t page);
  void unlink(std::uint32_t page);
  void push_tail(std::uint32_t page);
  // Real block hashes are uniform already: the high bits pick the slot.
  std::size_t home(std::uint64_t hash) const { return static_cast<std::size_t>(hash >> shift_); }
  std::size_t next(std::size_t slot) const { return (slot + 1) & (slots_.size() - 1); }

  std::vector<Page> pages_;
  std::vector<std::uint32_t> slots_;  // power of two, load <= 1/2; linear probing, backward-shift erase
  unsigned shift_ = 64;
  std::vector<std::uint32_t> found_;  // scratch: each block's page from the capacity pass
  std::uint32_t next_fresh_ = 0;
  std::uint32_t lru_head_ = kNone;
  std::uint32_t lru_tail_ = kNone;
  std::size_t unowned_ = 0;  // cached pages in the LRU
};

}  // namespace kvtier::measure
