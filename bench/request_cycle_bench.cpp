// The allocator's hot path, per backend and eviction policy: the request cycle Use -> finalize -> Deref for
// 2048-token requests (block size 16, 128 blocks), the first half of every
// prompt a shared prefix, on 64K pages. Reports blocks per second and the
// allocator's metadata bytes per page. Steady state includes eviction: every
// request leaves 64 unique blocks in the inactive pool.
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "kvtier/g1/g1_manager.hpp"

namespace {

using namespace kvtier;

constexpr std::uint32_t kPages = 64 * 1024;
constexpr std::uint32_t kBlockSize = 16;
constexpr std::size_t kBlocks = 2048 / kBlockSize;
constexpr std::size_t kSharedBlocks = kBlocks / 2;
// More distinct requests than the pool can keep, so suffixes never hit again.
constexpr std::size_t kRequestRing = 2 * kPages / (kBlocks - kSharedBlocks);

/// Counts events the way a router publisher would receive them, without keeping them.
class CountingSink final : public KvEventSink {
 public:
  void publish(const KvEvent&) override { ++events; }
  std::size_t events = 0;
};

struct Request {
  UseSignal use;
  DerefSignal deref;
};

std::vector<Request> make_requests() {
  std::vector<Request> requests(kRequestRing);
  std::uint64_t next_unique = 1ULL << 40;
  for (std::size_t r = 0; r < kRequestRing; ++r) {
    UseSignal& use = requests[r].use;
    std::optional<SequenceHash> parent;
    for (std::size_t i = 0; i < kBlocks; ++i) {
      const SequenceHash hash(i < kSharedBlocks ? 1000 + i : next_unique++);
      use.blocks.push_back(UniqueBlock::full(hash));
      use.local_hashes.emplace_back(hash.value() ^ 0x5555);
      use.plhs.emplace_back(hash, parent, i);
      parent = hash;
    }
    requests[r].deref.blocks.assign(use.blocks.rbegin(), use.blocks.rend());
  }
  return requests;
}

void request_cycle(benchmark::State& state, g1::G1Backend backend, g1::EvictionBackend eviction) {
  static const std::vector<Request> requests = make_requests();
  auto sink = std::make_shared<CountingSink>();
  g1::G1Manager manager(g1::G1ManagerConfig{.capacity = kPages,
                                            .block_size = kBlockSize,
                                            .dp_rank = 0,
                                            .backend = backend,
                                            .enable_prefix_caching = true,
                                            .eviction = eviction},
                        {sink});
  // Warm up to the steady state: a full pool whose inactive list is evicted from.
  std::size_t next = 0;
  const auto cycle = [&](const Request& request) {
    const g1::OwnerId owner(next + 1);
    // Native reuses the resident prefix it is told about; KVBM matches by lineage itself.
    const std::size_t reuse = backend == g1::G1Backend::Native &&
                                      manager.is_cached(request.use.blocks[kSharedBlocks - 1].hash())
                                  ? kSharedBlocks
                                  : 0;
    const auto result = manager.process_for_request(owner, request.use, reuse);
    if (!result.is_ready()) state.SkipWithError("capacity exhausted");
    manager.finalize_computed_prefix(owner, 0, kBlocks * kBlockSize);
    manager.process_for_request(owner, request.deref);
  };
  for (std::size_t i = 0; i < kRequestRing; ++i, ++next) cycle(requests[next % kRequestRing]);
  for (auto _ : state) {
    cycle(requests[next % kRequestRing]);
    ++next;
  }
  state.counters["blocks/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kBlocks), benchmark::Counter::kIsRate);
  state.counters["metadata_B_per_page"] = static_cast<double>(manager.metadata_bytes()) / kPages;
  state.counters["inactive"] = static_cast<double>(manager.num_inactive_blocks());
  state.counters["events_per_request"] =
      static_cast<double>(sink->events) / static_cast<double>(next == 0 ? 1 : next);
}
void BM_NativeRequestCycle(benchmark::State& state) {
  request_cycle(state, g1::G1Backend::Native, g1::EvictionBackend::Lineage);
}
void BM_KvbmRequestCycle_Lineage(benchmark::State& state) {
  request_cycle(state, g1::G1Backend::Kvbm, g1::EvictionBackend::Lineage);
}
void BM_KvbmRequestCycle_Lru(benchmark::State& state) {
  request_cycle(state, g1::G1Backend::Kvbm, g1::EvictionBackend::Lru);
}
void BM_KvbmRequestCycle_MultiLru(benchmark::State& state) {
  request_cycle(state, g1::G1Backend::Kvbm, g1::EvictionBackend::MultiLru);
}
BENCHMARK(BM_NativeRequestCycle)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_KvbmRequestCycle_Lineage)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_KvbmRequestCycle_Lru)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_KvbmRequestCycle_MultiLru)->Unit(benchmark::kMicrosecond);

}  // namespace
