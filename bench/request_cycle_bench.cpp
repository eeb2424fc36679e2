// The allocator's hot path, per backend and eviction policy: the request cycle allocate -> finalize -> release
// of 2048-token requests (block size 16, 128 blocks) through the shared
// RequestDriver, as the script, the replay and the tests drive a manager. The
// first half of every prompt is a shared prefix; every hash is a real one
// (XXH3 over the tokens, chained as Dynamo chains them). 64K pages. Reports
// blocks per second and the allocator's metadata bytes per page. Steady state
// includes eviction: every request leaves 64 unique blocks in the inactive pool.
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "kvtier/driver/request_driver.hpp"
#include "kvtier/g1/g1_manager.hpp"

namespace {

using namespace kvtier;

constexpr std::uint32_t kPages = 64 * 1024;
constexpr std::uint32_t kBlockSize = 16;
constexpr std::size_t kTokens = 2048;
constexpr std::size_t kBlocks = kTokens / kBlockSize;
constexpr std::size_t kSharedTokens = kTokens / 2;
// More distinct requests than the pool can keep, so suffixes never hit again.
constexpr std::size_t kRequestRing = 2 * kPages / (kBlocks - kBlocks / 2);

/// Counts events the way a router publisher would receive them, without keeping them.
class CountingSink final : public KvEventSink {
 public:
  void publish(const KvEvent&) override { ++events; }
  std::size_t events = 0;
};

/// The request ring's sequences, hashed once outside any timing.
std::vector<ActiveSequence> make_sequences() {
  std::vector<ActiveSequence> sequences;
  sequences.reserve(kRequestRing);
  TokenId next_unique = 1U << 20;
  for (std::size_t r = 0; r < kRequestRing; ++r) {
    std::vector<TokenId> prompt(kTokens);
    for (std::size_t t = 0; t < kTokens; ++t) prompt[t] = t < kSharedTokens ? static_cast<TokenId>(t) : next_unique++;
    sequences.emplace_back(std::move(prompt), ActiveSequenceConfig{.block_size = kBlockSize});
  }
  return sequences;
}

void request_cycle(benchmark::State& state, g1::G1Backend backend, g1::EvictionBackend eviction) {
  static std::vector<ActiveSequence> sequences = make_sequences();
  auto sink = std::make_shared<CountingSink>();
  g1::G1Manager manager(g1::G1ManagerConfig{.capacity = kPages,
                                            .block_size = kBlockSize,
                                            .dp_rank = 0,
                                            .backend = backend,
                                            .enable_prefix_caching = true,
                                            .eviction = eviction},
                        {sink});
  driver::RequestDriver driver(manager);
  // Warm up to the steady state: a full pool whose inactive list is evicted from.
  std::size_t next = 0;
  const auto cycle = [&](ActiveSequence& sequence) {
    const g1::OwnerId owner(next + 1);
    // The native backend reuses the resident prefix the driver finds; KVBM matches by lineage itself.
    if (!driver.allocate(owner, sequence, kTokens).is_ready()) state.SkipWithError("capacity exhausted");
    driver.finalize(owner, sequence, 0, kTokens);
    driver.release(owner, sequence);
  };
  for (std::size_t i = 0; i < kRequestRing; ++i, ++next) cycle(sequences[next % kRequestRing]);
  for (auto _ : state) {
    cycle(sequences[next % kRequestRing]);
    ++next;
  }
  state.counters["blocks/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kBlocks), benchmark::Counter::kIsRate);
  state.counters["metadata_B_per_page"] = static_cast<double>(manager.metadata_bytes()) / kPages;
  state.counters["inactive"] = static_cast<double>(manager.num_inactive_blocks());
  state.counters["events_per_request"] = static_cast<double>(sink->events) / static_cast<double>(next == 0 ? 1 : next);
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
