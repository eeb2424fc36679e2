#include "kvtier/memory/kv_pool.hpp"

#include <algorithm>
#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"
#include "kvtier/core/page_pattern.hpp"
#include "kvtier/memory/memory_budget.hpp"

namespace kvtier::memory {
namespace {

// Bounds the pinned staging buffer of the pattern helpers; at least one page.
constexpr std::size_t kStagingBudgetBytes = std::size_t{16} << 20;

const KvLayout& checked(const KvLayout& layout) {
  if (layout.capacity() == 0) throw ConfigError("a KvPool needs at least one page: " + layout.describe());
  return layout;
}

}  // namespace

KvPool::KvPool(Runtime& runtime, KvLayout layout, PoolMemory memory, std::size_t max_piece_bytes)
    : runtime_(&runtime), layout_(checked(layout)), memory_(memory), stream_(runtime.create_stream()) {
  if (memory == PoolMemory::Device) {
    device_slab_ = runtime.allocate_device(layout_.slab_bytes());
    base_ = device_slab_.bytes_data();
    return;
  }
  if (layout_.slab_bytes() <= max_piece_bytes) {
    host_slab_ = runtime.allocate_pinned(layout_.slab_bytes());
    base_ = host_slab_.bytes_data();
    return;
  }
  if (layout_.layout() != PageLayout::PageMajor) {
    throw ConfigError("a pinned slab larger than one allocation must be page-major: " + layout_.describe());
  }
  if (layout_.page_bytes() > max_piece_bytes) throw ConfigError("one page is larger than a pinned allocation may be");
  check_host_allocation(layout_.slab_bytes(), "pinned slab");  // the pieces together, before the first is zeroed
  pages_per_piece_ =
      static_cast<std::uint32_t>(std::min<std::size_t>(max_piece_bytes / layout_.page_bytes(), capacity()));
  for (std::uint32_t first = 0; first < capacity(); first += pages_per_piece_) {
    const std::uint32_t pages = std::min(pages_per_piece_, capacity() - first);
    host_pieces_.push_back(runtime.allocate_pinned(std::size_t{pages} * layout_.page_bytes()));
  }
  base_ = host_pieces_.front().bytes_data();
}

std::byte* KvPool::chunk_address(PageId page, std::uint32_t chunk) const {
  KVTIER_EXPECTS(page.value() < capacity() && chunk < layout_.chunks_per_page(),
                 "page " + std::to_string(page.value()) + " chunk " + std::to_string(chunk) + " is outside the pool (" +
                     std::to_string(capacity()) + " pages of " + std::to_string(layout_.chunks_per_page()) +
                     " chunks)");
  if (host_pieces_.empty()) return slab() + layout_.chunk_offset(page.value(), chunk);
  const std::uint32_t in_piece = page.value() % pages_per_piece_;
  return host_pieces_[page.value() / pages_per_piece_].bytes_data() + layout_.chunk_offset(in_piece, chunk);
}

void KvPool::check_pages(std::span<const PageId> pages, std::span<const std::uint64_t> identities) const {
  KVTIER_EXPECTS(pages.size() == identities.size(), "pattern: " + std::to_string(pages.size()) + " pages but " +
                                                        std::to_string(identities.size()) + " identities");
  for (PageId page : pages) {
    KVTIER_EXPECTS(page.value() < capacity(), "pattern: page " + std::to_string(page.value()) +
                                                  " is outside the pool of " + std::to_string(capacity()) + " pages");
  }
}

std::size_t KvPool::staging_pages() {
  const std::size_t page_bytes = layout_.page_bytes();
  const std::size_t pages = std::clamp<std::size_t>(kStagingBudgetBytes / page_bytes, 1, capacity());
  if (!staging_) staging_ = runtime_->allocate_pinned(pages * page_bytes);
  return pages;
}

std::vector<CopyDescriptor> KvPool::page_copies(std::span<const PageId> pages, bool to_device) const {
  std::vector<CopyDescriptor> copies;
  copies.reserve(pages.size() * layout_.chunks_per_page());
  for (std::size_t slot = 0; slot < pages.size(); ++slot) {
    for (std::uint32_t chunk = 0; chunk < layout_.chunks_per_page(); ++chunk) {
      std::byte* staged = staging_.bytes_data() + slot * layout_.page_bytes() + chunk * layout_.chunk_bytes();
      std::byte* device = chunk_address(pages[slot], chunk);
      copies.push_back(to_device ? CopyDescriptor{staged, device, layout_.chunk_bytes()}
                                 : CopyDescriptor{device, staged, layout_.chunk_bytes()});
    }
  }
  return copies;
}

void KvPool::fill_pattern(std::span<const PageId> pages, std::span<const std::uint64_t> identities) {
  check_pages(pages, identities);
  if (pages.empty()) return;
  const std::size_t batch = staging_pages();
  const std::size_t page_bytes = layout_.page_bytes();
  for (std::size_t first = 0; first < pages.size(); first += batch) {
    const std::size_t count = std::min(batch, pages.size() - first);
    for (std::size_t slot = 0; slot < count; ++slot) {
      fill_page_pattern(identities[first + slot], 0,
                        std::span<std::byte>(staging_.bytes_data() + slot * page_bytes, page_bytes));
    }
    const auto copies = page_copies(pages.subspan(first, count), /*to_device=*/true);
    stream_.copy_async(copies);
    stream_.synchronize();  // the staging buffer is reused by the next batch
  }
}

void KvPool::zero_pages(std::span<const PageId> pages) {
  for (const PageId page : pages) {
    KVTIER_EXPECTS(page.value() < capacity(), "page ", page.value(), " is outside the pool of ", capacity());
  }
  for (const PageId page : pages) {
    for (std::uint32_t chunk = 0; chunk < layout_.chunks_per_page(); ++chunk) {
      stream_.fill_async(chunk_address(page, chunk), 0, layout_.chunk_bytes());
    }
  }
  stream_.synchronize();
}

std::vector<PageId> KvPool::find_pattern_mismatches(std::span<const PageId> pages,
                                                    std::span<const std::uint64_t> identities) {
  check_pages(pages, identities);
  std::vector<PageId> mismatches;
  read_pages(pages, [&](std::size_t i, std::span<const std::byte> bytes) {
    if (!matches_page_pattern(identities[i], 0, bytes)) mismatches.push_back(pages[i]);
  });
  return mismatches;
}

void KvPool::read_pages(std::span<const PageId> pages,
                        const std::function<void(std::size_t, std::span<const std::byte>)>& visit) {
  for (const PageId page : pages) {
    KVTIER_EXPECTS(page.value() < capacity(), "page " + std::to_string(page.value()) + " is outside the pool");
  }
  if (pages.empty()) return;
  const std::size_t batch = staging_pages();
  const std::size_t page_bytes = layout_.page_bytes();
  for (std::size_t first = 0; first < pages.size(); first += batch) {
    const std::size_t count = std::min(batch, pages.size() - first);
    const auto copies = page_copies(pages.subspan(first, count), /*to_device=*/false);
    stream_.copy_async(copies);
    stream_.synchronize();
    for (std::size_t slot = 0; slot < count; ++slot) {
      visit(first + slot, std::span<const std::byte>(staging_.bytes_data() + slot * page_bytes, page_bytes));
    }
  }
}

}  // namespace kvtier::memory
