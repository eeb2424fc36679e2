#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "kvtier/core/kv_layout.hpp"
#include "kvtier/core/strong_id.hpp"
#include "kvtier/memory/runtime.hpp"

namespace kvtier::memory {

/// Where a pool's slab lives: device memory (the G1 tier) or pinned host
/// memory (the G2 tier, reachable by the copy engines and mapped for kernels).
enum class PoolMemory : std::uint8_t { Device, PinnedHost };

/// One slab on a Runtime, carved into `layout.capacity()` pages. Pages are
/// addressed by PageId; a page is `layout.chunks_per_page()` chunks in the slab.
/// The pool owns a stream and a pinned staging buffer for its synchronous
/// pattern helpers, which tests and the CLI use to prove bytes survive moves.
class KvPool {
 public:
  /// One pinned allocation is at most this large: a huge one fails or takes minutes.
  static constexpr std::size_t kMaxPinnedPieceBytes = std::size_t{64} << 30;

  /// Allocates the slab (zero-filled); throws on allocation failure (nothing is kept).
  /// A page-major pinned-host slab larger than `max_piece_bytes` is allocated
  /// in pieces of whole pages, each at most that large.
  KvPool(Runtime& runtime, KvLayout layout, PoolMemory memory = PoolMemory::Device,
         std::size_t max_piece_bytes = kMaxPinnedPieceBytes);

  const KvLayout& layout() const noexcept { return layout_; }
  std::uint32_t capacity() const noexcept { return layout_.capacity(); }
  Runtime& runtime() const noexcept { return *runtime_; }
  PoolMemory memory() const noexcept { return memory_; }
  /// Base of the slab (device memory on CUDA for a Device pool); with more
  /// than one piece, the base of the first: address pages with chunk_address.
  std::byte* slab() const noexcept { return base_; }
  /// Separate allocations holding the slab (1 unless a pinned slab was split).
  std::size_t pieces() const noexcept { return host_pieces_.empty() ? 1 : host_pieces_.size(); }
  /// Device address of one chunk of a page; throws ContractError when out of range.
  std::byte* chunk_address(PageId page, std::uint32_t chunk) const;

  /// Writes the pattern of identities[i] into pages[i] and waits. Throws
  /// ContractError (sizes differ, page out of range: nothing written) or the
  /// runtime's error if a copy fails.
  void fill_pattern(std::span<const PageId> pages, std::span<const std::uint64_t> identities);
  /// The pages whose bytes differ from the pattern of their identity, in input order.
  std::vector<PageId> find_pattern_mismatches(std::span<const PageId> pages, std::span<const std::uint64_t> identities);
  /// Zeroes every byte of the pages and waits. ContractError for a page out
  /// of range (nothing zeroed); the runtime's error if a fill fails.
  void zero_pages(std::span<const PageId> pages);
  /// Copies the pages to host memory, a batch at a time, and calls
  /// visit(i, bytes of pages[i]) in input order; the bytes are the page's
  /// chunks in order (the layout of a one-page pool of either kind). Throws
  /// ContractError for a page out of range before copying anything.
  void read_pages(std::span<const PageId> pages,
                  const std::function<void(std::size_t, std::span<const std::byte>)>& visit);

 private:
  void check_pages(std::span<const PageId> pages, std::span<const std::uint64_t> identities) const;
  std::size_t staging_pages();
  std::vector<CopyDescriptor> page_copies(std::span<const PageId> pages, bool to_device) const;

  Runtime* runtime_;
  KvLayout layout_;
  PoolMemory memory_;
  DeviceBuffer device_slab_;  // one of the two holds the slab
  PinnedBuffer host_slab_;
  std::vector<PinnedBuffer> host_pieces_;  // a split pinned slab: whole pages each
  std::uint32_t pages_per_piece_ = 0;
  std::byte* base_ = nullptr;
  Stream stream_;
  PinnedBuffer staging_;
};

}  // namespace kvtier::memory
