#include "g1/eviction/multi_lru_eviction_policy.hpp"

#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::g1 {

MultiLruEvictionPolicy::MultiLruEvictionPolicy(std::uint32_t capacity)
    : links_(capacity),
      levels_{PageList(links_, 0), PageList(links_, 1), PageList(links_, 2), PageList(links_, 3)},
      frequency_(capacity) {}

std::uint32_t MultiLruEvictionPolicy::level_for(std::uint32_t frequency) noexcept {
  std::uint32_t level = 0;
  while (level < kThresholds.size() && frequency >= kThresholds[level]) ++level;
  return level;
}

std::optional<std::string> MultiLruEvictionPolicy::insert_refusal(std::span<const PositionalLineageHash>) const {
  return std::nullopt;  // a page holds one block: nothing can collide
}

void MultiLruEvictionPolicy::insert(PageId page, const PositionalLineageHash& plh) {
  KVTIER_EXPECTS(!contains(page), "page " + std::to_string(page.value()) + " is already inactive");
  levels_[level_for(frequency_.estimate(plh))].push_back(page.value());
}

void MultiLruEvictionPolicy::remove(PageId page) {
  KVTIER_EXPECTS(contains(page), "page " + std::to_string(page.value()) + " is not inactive");
  levels_[links_.list[page.value()]].unlink(page.value());
}

std::optional<PageId> MultiLruEvictionPolicy::evict() {
  for (PageList& level : levels_) {
    if (level.empty()) continue;
    const std::uint32_t page = level.front();
    level.unlink(page);
    return PageId(page);
  }
  return std::nullopt;
}

std::size_t MultiLruEvictionPolicy::size() const {
  std::size_t total = 0;
  for (const PageList& level : levels_) total += level.size();
  return total;
}

std::size_t MultiLruEvictionPolicy::metadata_bytes() const { return links_.memory_bytes() + frequency_.memory_bytes(); }

}  // namespace kvtier::g1
