#include "kvtier/measure/swap_measurement.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/kv_event_publisher.hpp"
#include "kvtier/memory/page_copy_plan.hpp"
#include "kvtier/offload/offload_engine.hpp"

namespace kvtier::measure {
namespace {

KvGeometry geometry_for(std::size_t page_bytes) {
  if (page_bytes < 256 || page_bytes % 256 != 0) {
    throw ConfigError("swap page size " + std::to_string(page_bytes) + " is not a multiple of 256 bytes");
  }
  return KvGeometry{.layers = 1,
                    .kv_heads = 1,
                    .head_dim = 64,
                    .dtype = KvDtype::Bf16,
                    .tokens_per_block = static_cast<std::uint32_t>(page_bytes / 256)};
}

KvLayout layout_for(std::size_t page_bytes, std::size_t pages) {
  if (pages == 0 || pages > 0x7FFFFFFFU) throw ConfigError("swap batch " + std::to_string(pages) + " is out of range");
  return KvLayout(geometry_for(page_bytes), PageLayout::PageMajor, static_cast<std::uint32_t>(pages));
}

double elapsed_seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

const char* swap_path_name(SwapPath path) noexcept {
  switch (path) {
    case SwapPath::PerPage:
      return "per_page";
    case SwapPath::Batched:
      return "batched";
    case SwapPath::Staged:
      return "staged";
    case SwapPath::Engine:
      return "engine";
  }
  return "?";
}

SwapPath parse_swap_path(const std::string& name) {
  for (const SwapPath path : {SwapPath::PerPage, SwapPath::Batched, SwapPath::Staged, SwapPath::Engine}) {
    if (name == swap_path_name(path)) return path;
  }
  throw ConfigError("swap path must be per_page, batched, staged or engine, not '" + name + "'");
}

SwapFixture::SwapFixture(memory::Runtime& rt, std::size_t page_bytes, std::size_t pages)
    : runtime(rt),
      g1(rt, layout_for(page_bytes, 2 * pages)),
      g2(rt, layout_for(page_bytes, pages), memory::PoolMemory::PinnedHost),
      ring(rt, layout_for(page_bytes, pages)),
      stream(rt.create_stream()),
      done(rt.create_event()),
      batch(pages) {
  for (std::size_t i = 0; i < batch; ++i) {
    g1_pages.emplace_back(static_cast<std::uint32_t>(2 * i));
    g2_pages.emplace_back(static_cast<std::uint32_t>(i));
  }
  std::shuffle(g1_pages.begin(), g1_pages.end(), std::mt19937(7));
  out = memory::page_copy_plan(g1, g1_pages, g2, g2_pages);
  in = memory::page_copy_plan(g2, g2_pages, g1, g1_pages);
  gather_out = memory::page_copy_plan(g1, g1_pages, ring, g2_pages);  // ring slots = 0..batch-1
  ring_out = memory::page_copy_plan(ring, g2_pages, g2, g2_pages);
  ring_in = memory::page_copy_plan(g2, g2_pages, ring, g2_pages);
  scatter_in = memory::page_copy_plan(ring, g2_pages, g1, g1_pages);
  bytes = page_bytes * batch;
  // The ceiling: the same bytes, contiguous on both sides (G1's first half).
  ceiling_out = {CopyDescriptor{g1.slab(), g2.slab(), bytes}};
  ceiling_in = {CopyDescriptor{g2.slab(), g1.slab(), bytes}};
}

double SwapFixture::time_copies(const std::vector<CopyDescriptor>& copies, bool per_page) {
  const auto start = std::chrono::steady_clock::now();
  if (per_page) {
    for (const CopyDescriptor& copy : copies) stream.copy_async(copy);
  } else {
    stream.copy_async(copies);
  }
  stream.record(done);
  done.synchronize();
  return elapsed_seconds(start);
}

double SwapFixture::time_staged(bool swap_out) {
  const auto start = std::chrono::steady_clock::now();
  if (swap_out) {
    stream.gather_async(gather_out);
    stream.copy_async(ring_out);
  } else {
    stream.copy_async(ring_in);
    stream.gather_async(scatter_in);
  }
  stream.record(done);
  done.synchronize();
  return elapsed_seconds(start);
}

double SwapFixture::time_engine_swap_out() {
  // The real swap-out path: registry, presence filter, reservation, batched
  // submission, event, landing. Each call offloads a fresh set of blocks.
  KvEventPublisher publisher;
  auto engine = std::make_unique<offload::OffloadEngine>(
      runtime, g1,
      offload::OffloadConfig{.host_blocks = static_cast<std::uint32_t>(batch),
                             .batch_blocks = static_cast<std::uint32_t>(batch)});
  engine->bind(publisher, g1::G1Backend::Kvbm);
  std::vector<g1::EvictedBlock> victims;
  for (const PageId page : g1_pages) {
    const SequenceHash hash(next_hash++);
    victims.push_back({page, g1::TieredBlock{.plh = PositionalLineageHash(hash, std::nullopt, 0),
                                             .hash = hash,
                                             .parent = std::nullopt,
                                             .local = LocalBlockHash(0),
                                             .token_ids = std::nullopt}});
  }
  const auto start = std::chrono::steady_clock::now();
  const auto ticket = engine->swap_out(victims);
  const auto progress = engine->poll(true);
  const double seconds = elapsed_seconds(start);
  if (ticket.quarantined.size() != batch || progress.completed.size() != 1 || !progress.failed.empty()) {
    throw ConfigError("the offload engine did not copy every block");
  }
  return seconds;
}

double SwapFixture::time_path(SwapPath path, bool swap_out) {
  switch (path) {
    case SwapPath::PerPage:
      return time_copies(swap_out ? out : in, true);
    case SwapPath::Batched:
      return time_copies(swap_out ? out : in, false);
    case SwapPath::Staged:
      return time_staged(swap_out);
    case SwapPath::Engine:
      if (!swap_out) throw ConfigError("the engine path measures swap-out only");
      return time_engine_swap_out();
  }
  return 0.0;
}

SwapPoint measure_swap(memory::Runtime& runtime, std::size_t page_bytes, std::size_t batch, SwapPath path,
                       bool swap_out, std::size_t iterations) {
  if (iterations == 0) throw ConfigError("iterations must be at least 1");
  if (path == SwapPath::Engine && !swap_out) throw ConfigError("the engine path measures swap-out only");
  SwapFixture fixture(runtime, page_bytes, batch);
  fixture.time_path(path, swap_out);  // warm-up: first touches, lazy setup
  fixture.time_ceiling(swap_out);
  double seconds = 0.0;
  double ceiling_seconds = 0.0;
  for (std::size_t i = 0; i < iterations; ++i) {
    seconds += fixture.time_path(path, swap_out);
    ceiling_seconds += fixture.time_ceiling(swap_out);
  }
  const double moved = static_cast<double>(fixture.bytes) * static_cast<double>(iterations);
  return SwapPoint{.page_bytes = page_bytes,
                   .batch = batch,
                   .path = path,
                   .swap_out = swap_out,
                   .iterations = iterations,
                   .gbps = moved / seconds / 1e9,
                   .ceiling_gbps = moved / ceiling_seconds / 1e9};
}

}  // namespace kvtier::measure
