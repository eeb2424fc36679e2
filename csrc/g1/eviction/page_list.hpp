#pragma once
#include <cstdint>
#include <vector>

#include "kvtier/core/strong_id.hpp"

namespace kvtier::g1 {

/// prev/next links of every page, shared by the intrusive lists built on them.
struct PageLinks {
  static constexpr std::uint8_t kNoList = 0xFF;
  explicit PageLinks(std::uint32_t capacity)
      : prev(capacity, kNoPage), next(capacity, kNoPage), list(capacity, kNoList) {}
  std::vector<std::uint32_t> prev;
  std::vector<std::uint32_t> next;
  std::vector<std::uint8_t> list;  // id of the list holding the page, kNoList when in none
  std::size_t memory_bytes() const noexcept { return prev.capacity() * (2 * sizeof(std::uint32_t) + 1); }
};

/// An intrusive doubly linked list of pages over shared PageLinks: O(1)
/// push to the tail, unlink and pop from the head.
class PageList {
 public:
  PageList(PageLinks& links, std::uint8_t id) : links_(&links), id_(id) {}

  bool contains(std::uint32_t page) const noexcept { return links_->list[page] == id_; }
  bool empty() const noexcept { return head_ == kNoPage; }
  std::size_t size() const noexcept { return size_; }
  std::uint32_t front() const noexcept { return head_; }

  void push_back(std::uint32_t page) noexcept {
    links_->prev[page] = tail_;
    links_->next[page] = kNoPage;
    (tail_ == kNoPage ? head_ : links_->next[tail_]) = page;
    tail_ = page;
    links_->list[page] = id_;
    ++size_;
  }
  void unlink(std::uint32_t page) noexcept {
    const std::uint32_t prev = links_->prev[page];
    const std::uint32_t next = links_->next[page];
    (prev == kNoPage ? head_ : links_->next[prev]) = next;
    (next == kNoPage ? tail_ : links_->prev[next]) = prev;
    links_->prev[page] = links_->next[page] = kNoPage;
    links_->list[page] = PageLinks::kNoList;
    --size_;
  }

 private:
  PageLinks* links_;
  std::uint8_t id_;
  std::uint32_t head_ = kNoPage;
  std::uint32_t tail_ = kNoPage;
  std::size_t size_ = 0;
};

}  // namespace kvtier::g1
