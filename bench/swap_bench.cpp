// Swap bandwidth (issue #8): scattered G1 pages to contiguous pinned G2 pages
// (swap-out, device to host) and back (swap-in), for page sizes 4 KiB to 2 MiB
// and batches of 1 to 4096 pages. Each copy path runs next to the link's
// ceiling measured in the same run: one copy of the same bytes, contiguous on
// both sides, timed in every iteration right after the path. Paths:
//   per_page  one Stream::copy_async call per page (what a naive engine does)
//   batched   one batched submission of every page (the engine's copy)
//   staged    the small-page path: the pages gathered by the device's copy
//             kernel (Stream::gather_async) into a contiguous device ring, the
//             ring moved in one copy (the reverse for swap-in); on the host
//             runtime both steps are plain copies, so it only costs there
//   engine    the OffloadEngine itself: swap_out of N evicted blocks + poll,
//             bookkeeping included (swap-out only)
// The runtime is KVTIER_BENCH_RUNTIME (auto | host | cuda; default auto).
// Counters: GBps (this path), ceiling_GBps (same run), of_ceiling (ratio).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kvtier/core/kv_event_publisher.hpp"
#include "kvtier/memory/kv_pool.hpp"
#include "kvtier/memory/page_copy_plan.hpp"
#include "kvtier/memory/runtime_factory.hpp"
#include "kvtier/offload/offload_engine.hpp"

namespace {

using kvtier::CopyDescriptor;
using kvtier::PageId;
namespace memory = kvtier::memory;

constexpr std::size_t kMaxBatchBytes = std::size_t{256} << 20;

memory::Runtime& bench_runtime() {
  static const std::unique_ptr<memory::Runtime> runtime = [] {
    const char* choice = std::getenv("KVTIER_BENCH_RUNTIME");
    return memory::make_runtime(memory::parse_runtime_choice(choice != nullptr ? choice : "auto"));
  }();
  return *runtime;
}

/// 1 layer, 1 KV head, 64 dims of bf16: 256 bytes per token (K and V).
kvtier::KvGeometry geometry_for(std::size_t page_bytes) {
  return kvtier::KvGeometry{.layers = 1, .kv_heads = 1, .head_dim = 64, .dtype = kvtier::KvDtype::Bf16,
                            .tokens_per_block = static_cast<std::uint32_t>(page_bytes / 256)};
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Two pools and the copy lists for one (page size, batch): G1 pages are the
/// even pages in shuffled order, so no two copies coalesce; G2 pages are
/// 0..batch-1.
struct SwapFixture {
  SwapFixture(std::size_t page_bytes, std::size_t batch)
      : g1(bench_runtime(), kvtier::KvLayout(geometry_for(page_bytes), kvtier::PageLayout::PageMajor,
                                             static_cast<std::uint32_t>(2 * batch))),
        g2(bench_runtime(), kvtier::KvLayout(geometry_for(page_bytes), kvtier::PageLayout::PageMajor,
                                             static_cast<std::uint32_t>(batch)),
           memory::PoolMemory::PinnedHost),
        ring(bench_runtime(), kvtier::KvLayout(geometry_for(page_bytes), kvtier::PageLayout::PageMajor,
                                               static_cast<std::uint32_t>(batch))),
        stream(bench_runtime().create_stream()),
        done(bench_runtime().create_event()) {
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

  double time_copies(const std::vector<CopyDescriptor>& copies, bool per_page) {
    const auto start = std::chrono::steady_clock::now();
    if (per_page) {
      for (const CopyDescriptor& copy : copies) stream.copy_async(copy);
    } else {
      stream.copy_async(copies);
    }
    stream.record(done);
    done.synchronize();
    return seconds_since(start);
  }
  double time_staged(bool swap_out) {
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
    return seconds_since(start);
  }
  double time_ceiling(bool swap_out) { return time_copies(swap_out ? ceiling_out : ceiling_in, false); }

  memory::KvPool g1;
  memory::KvPool g2;
  memory::KvPool ring;  // device staging ring, one page per page of the batch
  memory::Stream stream;
  memory::Event done;
  std::vector<PageId> g1_pages, g2_pages;
  std::vector<CopyDescriptor> out, in, ceiling_out, ceiling_in, gather_out, ring_out, ring_in, scatter_in;
  std::size_t bytes = 0;
};

enum class Path { PerPage, Batched, Staged, Engine };

/// `seconds` and `ceiling_seconds` summed over the same iterations,
/// interleaved, so both saw the same machine.
void report(benchmark::State& state, double bytes_per_iteration, double seconds, double ceiling_seconds) {
  const double bytes = bytes_per_iteration * static_cast<double>(state.iterations());
  const double gbps = bytes / seconds / 1e9;
  const double ceiling = bytes / ceiling_seconds / 1e9;
  state.counters["GBps"] = gbps;
  state.counters["ceiling_GBps"] = ceiling;
  state.counters["of_ceiling"] = ceiling > 0.0 ? gbps / ceiling : 0.0;
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes_per_iteration) * state.iterations());
  state.SetLabel(memory::runtime_kind_name(bench_runtime().kind()));
}

void BM_Swap(benchmark::State& state, Path path, bool swap_out) {
  const auto page_bytes = static_cast<std::size_t>(state.range(0));
  const auto batch = static_cast<std::size_t>(state.range(1));
  SwapFixture f(page_bytes, batch);
  double seconds = 0.0;
  double ceiling_seconds = 0.0;
  if (path == Path::Engine) {
    // The real swap-out path: registry, presence filter, reservation, batched
    // submission, event, landing. Each iteration offloads a fresh set of blocks.
    kvtier::KvEventPublisher publisher;
    std::uint64_t next_hash = 1;
    for (auto _ : state) {
      state.PauseTiming();
      auto engine = std::make_unique<kvtier::offload::OffloadEngine>(
          bench_runtime(), f.g1,
          kvtier::offload::OffloadConfig{.host_blocks = static_cast<std::uint32_t>(batch),
                                         .batch_blocks = static_cast<std::uint32_t>(batch)});
      engine->bind(publisher, kvtier::g1::G1Backend::Kvbm);
      std::vector<kvtier::g1::EvictedBlock> victims;
      for (const PageId page : f.g1_pages) {
        const kvtier::SequenceHash hash(next_hash++);
        victims.push_back({page, kvtier::g1::TieredBlock{.plh = kvtier::PositionalLineageHash(hash, std::nullopt, 0),
                                                         .hash = hash,
                                                         .parent = std::nullopt,
                                                         .local = kvtier::LocalBlockHash(0),
                                                         .token_ids = std::nullopt}});
      }
      ceiling_seconds += f.time_ceiling(true);
      state.ResumeTiming();
      const auto start = std::chrono::steady_clock::now();
      const auto ticket = engine->swap_out(victims);
      const auto progress = engine->poll(true);
      seconds += seconds_since(start);
      if (ticket.quarantined.size() != batch || progress.completed.size() != 1 || !progress.failed.empty()) {
        state.SkipWithError("the engine did not copy every block");
        return;
      }
    }
  } else {
    for (auto _ : state) {
      seconds += path == Path::Staged ? f.time_staged(swap_out)
                                      : f.time_copies(swap_out ? f.out : f.in, path == Path::PerPage);
      state.PauseTiming();
      ceiling_seconds += f.time_ceiling(swap_out);
      state.ResumeTiming();
    }
  }
  report(state, static_cast<double>(f.bytes), seconds, ceiling_seconds);
}

void swap_args(benchmark::internal::Benchmark* b) {
  for (const std::int64_t page : {4 << 10, 16 << 10, 64 << 10, 256 << 10, 2 << 20}) {
    for (const std::int64_t batch : {1, 16, 256, 4096}) {
      if (static_cast<std::size_t>(page * batch) <= kMaxBatchBytes) b->Args({page, batch});
    }
  }
  b->ArgNames({"page_bytes", "batch"})->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(BM_Swap, out_per_page, Path::PerPage, true)->Apply(swap_args);
BENCHMARK_CAPTURE(BM_Swap, out_batched, Path::Batched, true)->Apply(swap_args);
BENCHMARK_CAPTURE(BM_Swap, out_staged, Path::Staged, true)->Apply(swap_args);
BENCHMARK_CAPTURE(BM_Swap, out_engine, Path::Engine, true)->Apply(swap_args);
BENCHMARK_CAPTURE(BM_Swap, in_per_page, Path::PerPage, false)->Apply(swap_args);
BENCHMARK_CAPTURE(BM_Swap, in_batched, Path::Batched, false)->Apply(swap_args);
BENCHMARK_CAPTURE(BM_Swap, in_staged, Path::Staged, false)->Apply(swap_args);

}  // namespace
