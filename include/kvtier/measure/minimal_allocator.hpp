#pragma once
// The same-run floor of the allocator benches: what the tightest minimal
// prefix-caching allocator costs on the same request stream — a page array,
// an intrusive LRU of unowned cached pages, a flat open-addressing map from
// hash to page, eviction from the LRU head; the prefix probe stops at the
// first miss (what follows is allocated fresh, as vLLM's does), and a request
// keeps its page ids in its own table, so a release finds no block by hash.
// No events, no owners, no validation: whatever a backend costs beyond this
// is its own overhead. (Until issue 22 the floor probed every block and found
// each one again by hash on release: about half as fast.)
#include <cstdint>
#include <span>
#include <vector>

#include "kvtier/core/move_block.hpp"
#include "kvtier/core/strong_id.hpp"

namespace kvtier::measure {

class MinimalAllocator {
 public:
  explicit MinimalAllocator(std::uint32_t pages);
  /// Puts a page for every block into `table` (replacing what it held): the
  /// leading cached blocks reuse their pages, the rest get fresh or evicted
  /// ones. false when the pages do not suffice (nothing changed, `table` empty).
  bool use(std::span<const UniqueBlock> blocks, std::vector<std::uint32_t>& table);
  /// Releases a table's pages leaf first: unowned pages join the LRU tail.
  void release(std::span<const std::uint32_t> table);

 private:
  struct Page {
    std::uint64_t hash = 0;
    std::uint32_t refs = 0;
    std::uint32_t prev = kNoPage;
    std::uint32_t next = kNoPage;
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
  std::uint32_t next_fresh_ = 0;
  std::uint32_t lru_head_ = kNoPage;
  std::uint32_t lru_tail_ = kNoPage;
  std::size_t unowned_ = 0;  // cached pages in the LRU
};

}  // namespace kvtier::measure
