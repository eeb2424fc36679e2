// Swap bandwidth (issue #8) as a Google Benchmark suite: page sizes 4 KiB to
// 2 MiB, batches of 1 to 4096 pages, every path of measure::SwapFixture
// (per_page, batched, staged, engine; kvtier/measure/swap_measurement.hpp)
// next to the link's ceiling measured in the same iterations. `kvtier bench
// swap` runs the same measurement as a table. The runtime is
// KVTIER_BENCH_RUNTIME (auto | host | cuda; default auto).
// Counters: GBps (this path), ceiling_GBps (same run), of_ceiling (ratio).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>

#include "kvtier/core/errors.hpp"
#include "kvtier/measure/swap_measurement.hpp"
#include "kvtier/memory/runtime_factory.hpp"

namespace {

using kvtier::measure::SwapPath;
namespace memory = kvtier::memory;

constexpr std::size_t kMaxBatchBytes = std::size_t{256} << 20;

memory::Runtime& bench_runtime() {
  static const std::unique_ptr<memory::Runtime> runtime = [] {
    const char* choice = std::getenv("KVTIER_BENCH_RUNTIME");
    return memory::make_runtime(memory::parse_runtime_choice(choice != nullptr ? choice : "auto"));
  }();
  return *runtime;
}

void BM_Swap(benchmark::State& state, SwapPath path, bool swap_out) {
  kvtier::measure::SwapFixture f(bench_runtime(), static_cast<std::size_t>(state.range(0)),
                                 static_cast<std::size_t>(state.range(1)));
  double seconds = 0.0;
  double ceiling_seconds = 0.0;
  try {
    for (auto _ : state) {
      seconds += f.time_path(path, swap_out);
      ceiling_seconds += f.time_ceiling(swap_out);  // interleaved: both saw the same machine
    }
  } catch (const kvtier::Error& error) {
    state.SkipWithError(error.what());
    return;
  }
  const double bytes = static_cast<double>(f.bytes) * static_cast<double>(state.iterations());
  const double gbps = bytes / seconds / 1e9;
  const double ceiling = bytes / ceiling_seconds / 1e9;
  state.counters["GBps"] = gbps;
  state.counters["ceiling_GBps"] = ceiling;
  state.counters["of_ceiling"] = ceiling > 0.0 ? gbps / ceiling : 0.0;
  state.SetLabel(memory::runtime_kind_name(bench_runtime().kind()));
}

void swap_args(benchmark::internal::Benchmark* b) {
  for (const std::int64_t page : {4 << 10, 16 << 10, 64 << 10, 256 << 10, 2 << 20}) {
    for (const std::int64_t batch : {1, 16, 256, 4096}) {
      if (static_cast<std::size_t>(page * batch) <= kMaxBatchBytes) b->Args({page, batch});
    }
  }
  // Timed by hand per path (the ceiling runs inside the loop): iterations only.
  b->ArgNames({"page_bytes", "batch"})->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(BM_Swap, out_per_page, SwapPath::PerPage, true)->Apply(swap_args);
BENCHMARK_CAPTURE(BM_Swap, out_batched, SwapPath::Batched, true)->Apply(swap_args);
BENCHMARK_CAPTURE(BM_Swap, out_staged, SwapPath::Staged, true)->Apply(swap_args);
BENCHMARK_CAPTURE(BM_Swap, out_engine, SwapPath::Engine, true)->Apply(swap_args);
BENCHMARK_CAPTURE(BM_Swap, in_per_page, SwapPath::PerPage, false)->Apply(swap_args);
BENCHMARK_CAPTURE(BM_Swap, in_batched, SwapPath::Batched, false)->Apply(swap_args);
BENCHMARK_CAPTURE(BM_Swap, in_staged, SwapPath::Staged, false)->Apply(swap_args);

}  // namespace
