#include "g1/eviction/lru_eviction_policy.hpp"

#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::g1 {

LruEvictionPolicy::LruEvictionPolicy(std::uint32_t capacity) : links_(capacity), list_(links_, 0) {}

std::optional<std::string> LruEvictionPolicy::insert_refusal(std::span<const PositionalLineageHash>) const {
  return std::nullopt;  // a page holds one block: nothing can collide
}

void LruEvictionPolicy::insert(PageId page, const PositionalLineageHash& /*plh*/) {
  KVTIER_EXPECTS(!contains(page), "page " + std::to_string(page.value()) + " is already inactive");
  list_.push_back(page.value());
}

void LruEvictionPolicy::remove(PageId page) {
  KVTIER_EXPECTS(contains(page), "page " + std::to_string(page.value()) + " is not inactive");
  list_.unlink(page.value());
}

std::optional<PageId> LruEvictionPolicy::evict() {
  if (list_.empty()) return std::nullopt;
  const std::uint32_t page = list_.front();
  list_.unlink(page);
  return PageId(page);
}

std::size_t LruEvictionPolicy::metadata_bytes() const { return links_.memory_bytes(); }

}  // namespace kvtier::g1
