#pragma once
// Swap bandwidth between scattered G1 pages and contiguous pinned G2 pages,
// next to the link's ceiling measured in the same run (one copy of the same
// bytes, contiguous on both sides, timed right after each path). Paths:
//   per_page  one Stream::copy_async call per page (what a naive engine does)
//   batched   one batched submission of every page (the engine's copy)
//   staged    the small-page path: pages gathered by the copy kernel
//             (Stream::gather_async) into a contiguous device ring, the ring
//             moved in one copy (the reverse for swap-in)
//   engine    the OffloadEngine itself: swap_out of N evicted blocks + poll,
//             bookkeeping included (swap-out only)
// Used by `kvtier bench swap` and the Google Benchmark suite.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kvtier/memory/kv_pool.hpp"
#include "kvtier/memory/runtime.hpp"

namespace kvtier::measure {

enum class SwapPath : std::uint8_t { PerPage, Batched, Staged, Engine };
const char* swap_path_name(SwapPath path) noexcept;
/// "per_page", "batched", "staged" or "engine"; ConfigError otherwise.
SwapPath parse_swap_path(const std::string& name);

/// Two pools and the copy lists for one (page size, batch): G1 pages are the
/// even pages in shuffled order, so no two copies coalesce; G2 pages are
/// 0..batch-1. Pages are 1 layer x 1 KV head x 64 dims of bf16 (256 bytes
/// per token); page_bytes must be a multiple of 256.
struct SwapFixture {
  SwapFixture(memory::Runtime& runtime, std::size_t page_bytes, std::size_t batch);

  /// Seconds for one submission of the path and its completion.
  double time_path(SwapPath path, bool swap_out);
  double time_ceiling(bool swap_out) { return time_copies(swap_out ? ceiling_out : ceiling_in, false); }
  double time_copies(const std::vector<CopyDescriptor>& copies, bool per_page);
  double time_staged(bool swap_out);
  /// One OffloadEngine swap-out of the batch's pages as fresh blocks (engine
  /// construction outside the timing); ConfigError if a block was not copied.
  double time_engine_swap_out();

  memory::Runtime& runtime;
  memory::KvPool g1;
  memory::KvPool g2;
  memory::KvPool ring;  // device staging ring, one page per page of the batch
  memory::Stream stream;
  memory::Event done;
  std::vector<PageId> g1_pages, g2_pages;
  std::vector<CopyDescriptor> out, in, ceiling_out, ceiling_in, gather_out, ring_out, ring_in, scatter_in;
  std::size_t batch = 0;
  std::size_t bytes = 0;
  std::uint64_t next_hash = 1;
};

struct SwapPoint {
  std::size_t page_bytes = 0;
  std::size_t batch = 0;
  SwapPath path = SwapPath::Batched;
  bool swap_out = true;
  std::size_t iterations = 0;
  double gbps = 0.0;          // bytes / summed path time
  double ceiling_gbps = 0.0;  // bytes / summed ceiling time, interleaved with the path
  double of_ceiling() const { return ceiling_gbps > 0.0 ? gbps / ceiling_gbps : 0.0; }
};

/// `iterations` alternations of the path and the ceiling on one fixture.
SwapPoint measure_swap(memory::Runtime& runtime, std::size_t page_bytes, std::size_t batch, SwapPath path,
                       bool swap_out, std::size_t iterations);

}  // namespace kvtier::measure
