#include "kvtier/memory/page_copy_plan.hpp"

#include <algorithm>
#include <functional>
#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::memory {
namespace {

void check_pages(const KvPool& pool, std::span<const PageId> pages, const char* side) {
  for (const PageId page : pages) {
    KVTIER_EXPECTS(page.value() < pool.capacity(), std::string("page copy plan: ") + side + " page " +
                                                       std::to_string(page.value()) + " is outside its pool of " +
                                                       std::to_string(pool.capacity()) + " pages");
  }
}

/// Orders the copies by source and merges each into the one before it when
/// both its source and its target continue that one (a batch's copies may run
/// in any order, so the order is free to choose).
void coalesce(std::vector<CopyDescriptor>& plan) {
  std::sort(plan.begin(), plan.end(),
            [](const CopyDescriptor& x, const CopyDescriptor& y) { return std::less<const void*>{}(x.src, y.src); });
  std::size_t kept = 0;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    if (kept > 0) {
      CopyDescriptor& last = plan[kept - 1];
      if (static_cast<const std::byte*>(last.src) + last.bytes == plan[i].src &&
          static_cast<std::byte*>(last.dst) + last.bytes == plan[i].dst) {
        last.bytes += plan[i].bytes;
        continue;
      }
    }
    plan[kept++] = plan[i];
  }
  plan.resize(kept);
}

}  // namespace

std::vector<CopyDescriptor> page_copy_plan(const KvPool& from, std::span<const PageId> from_pages, const KvPool& to,
                                           std::span<const PageId> to_pages) {
  const KvLayout& a = from.layout();
  const KvLayout& b = to.layout();
  KVTIER_EXPECTS(a.page_bytes() == b.page_bytes(), "page copy plan: pages of " + std::to_string(a.page_bytes()) +
                                                       " and " + std::to_string(b.page_bytes()) +
                                                       " bytes cannot be copied onto each other");
  KVTIER_EXPECTS(from_pages.size() == to_pages.size(), "page copy plan: " + std::to_string(from_pages.size()) +
                                                           " source pages but " + std::to_string(to_pages.size()) +
                                                           " target pages");
  check_pages(from, from_pages, "source");
  check_pages(to, to_pages, "target");
  std::vector<CopyDescriptor> plan;
  for (std::size_t i = 0; i < from_pages.size(); ++i) {
    // Walk the page's logical bytes; cut where either side's chunk ends.
    std::size_t offset = 0;
    while (offset < a.page_bytes()) {
      const auto chunk_a = static_cast<std::uint32_t>(offset / a.chunk_bytes());
      const auto chunk_b = static_cast<std::uint32_t>(offset / b.chunk_bytes());
      const std::size_t in_a = offset % a.chunk_bytes();
      const std::size_t in_b = offset % b.chunk_bytes();
      const std::size_t bytes = std::min(a.chunk_bytes() - in_a, b.chunk_bytes() - in_b);
      plan.push_back(
          {from.chunk_address(from_pages[i], chunk_a) + in_a, to.chunk_address(to_pages[i], chunk_b) + in_b, bytes});
      offset += bytes;
    }
  }
  coalesce(plan);
  return plan;
}

}  // namespace kvtier::memory
