// Each G1 backend against the same-run floor (MinimalAllocator) on whole
// request streams from a cold start: per request the prefix lookup a
// scheduler makes, Use, finalize, and — once `live` requests are held — the
// Deref of the oldest. One iteration replays the stream through the backend
// and then through the floor; `fraction_of_floor` is floor time / backend
// time of that same iteration (issue 22's targets against the tight floor:
// native >= 0.4, KVBM LRU >= 0.3). A counting event sink listens.
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>

#include "kvtier/core/kv_event_sink.hpp"
#include "kvtier/g1/g1_manager.hpp"
#include "kvtier/measure/allocator_cycle.hpp"
#include "kvtier/measure/request_streams.hpp"

namespace {

using namespace kvtier;
using Clock = std::chrono::steady_clock;

class CountingSink final : public KvEventSink {
 public:
  void publish(const KvEvent&) override { ++events; }
  std::size_t events = 0;
};

const measure::RequestStream& stream(int which) {
  static const measure::RequestStream shared = measure::shared_half_stream(1000, 2048, 16, 64, 16384);
  static const measure::RequestStream trace =
      measure::trace_stream(KVTIER_MOONCAKE_TRACE, 300, 16, 16, 64 * 1024);  // ~300 long prompts of the real trace
  return which == 0 ? shared : trace;
}

void stream_cycle(benchmark::State& state, g1::G1Backend backend, g1::EvictionBackend eviction) {
  const measure::RequestStream& s = stream(static_cast<int>(state.range(0)));
  if (s.requests.empty()) {
    state.SkipWithError("the request stream is empty (is the shared trace there?)");
    return;
  }
  double backend_seconds = 0;
  double floor_seconds = 0;
  std::size_t metadata = 0;
  for (auto _ : state) {
    auto sink = std::make_shared<CountingSink>();
    g1::G1Manager manager(g1::G1ManagerConfig{.capacity = s.pages,
                                              .block_size = s.block_size,
                                              .dp_rank = 0,
                                              .backend = backend,
                                              .enable_prefix_caching = true,
                                              .eviction = eviction},
                          {sink});
    const auto t0 = Clock::now();
    const bool ok = measure::replay_through_backend(s, manager);
    const auto t1 = Clock::now();
    const bool floor_ok = measure::replay_through_floor(s);
    const auto t2 = Clock::now();
    if (!ok || !floor_ok) {
      state.SkipWithError("capacity exhausted: the stream does not fit its pages");
      return;
    }
    const double seconds = std::chrono::duration<double>(t1 - t0).count();
    state.SetIterationTime(seconds);
    backend_seconds += seconds;
    floor_seconds += std::chrono::duration<double>(t2 - t1).count();
    metadata = manager.metadata_bytes();
  }
  const double blocks = static_cast<double>(s.blocks()) * static_cast<double>(state.iterations());
  state.counters["blocks/s"] = blocks / backend_seconds;
  state.counters["floor_blocks/s"] = blocks / floor_seconds;
  state.counters["fraction_of_floor"] = floor_seconds / backend_seconds;
  state.counters["metadata_B_per_page"] = static_cast<double>(metadata) / s.pages;
  state.SetLabel(s.name);
}

void BM_StreamNative(benchmark::State& state) {
  stream_cycle(state, g1::G1Backend::Native, g1::EvictionBackend::Lineage);
}
void BM_StreamKvbmLru(benchmark::State& state) { stream_cycle(state, g1::G1Backend::Kvbm, g1::EvictionBackend::Lru); }
void BM_StreamKvbmMultiLru(benchmark::State& state) {
  stream_cycle(state, g1::G1Backend::Kvbm, g1::EvictionBackend::MultiLru);
}
void BM_StreamKvbmLineage(benchmark::State& state) {
  stream_cycle(state, g1::G1Backend::Kvbm, g1::EvictionBackend::Lineage);
}
// Arg 0: the shared-half stream; 1: the Mooncake trace.
BENCHMARK(BM_StreamNative)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_StreamKvbmLru)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_StreamKvbmMultiLru)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_StreamKvbmLineage)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
