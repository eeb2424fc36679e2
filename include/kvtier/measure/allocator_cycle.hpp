#pragma once
// A G1 backend against the same-run floor (MinimalAllocator) on one whole
// request stream from a cold start: per request the prefix lookup a
// scheduler makes, Use, finalize, and — once `live` requests are held — the
// Deref of the oldest. Each round replays the stream through the backend and
// then through the floor, so both see the same machine; a counting event
// sink listens. Used by `kvtier bench alloc` and the Google Benchmark suite.
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "kvtier/g1/g1_manager.hpp"
#include "kvtier/measure/request_streams.hpp"

namespace kvtier::measure {

/// Replays the stream through the manager; false if a Use found no capacity.
bool replay_through_backend(const RequestStream& stream, g1::G1Manager& manager);
/// Replays the stream through a fresh floor allocator; false if it ran out of pages.
bool replay_through_floor(const RequestStream& stream);

struct AllocatorCycleResult {
  std::string allocator;  // "native", "kvbm/lru", "kvbm/multi_lru", "kvbm/lineage"
  std::string stream;
  std::size_t blocks = 0;  // full blocks per round
  std::size_t rounds = 0;
  double blocks_per_second = 0.0;        // median over rounds
  double floor_blocks_per_second = 0.0;  // median over rounds
  double fraction_of_floor = 0.0;        // median of floor time / backend time, per round
  double metadata_bytes_per_page = 0.0;
  std::size_t events_per_round = 0;
};

/// The loop every cycle shares: `rounds` times, `make` builds a fresh manager
/// listened to by the counting sink it is given (and whatever else the
/// round needs, outside the timing), `run` replays the stream through it,
/// then the floor replays it; medians of the rates and of floor time /
/// manager time. ConfigError when the stream is empty or does not fit.
AllocatorCycleResult measure_cycle(
    const RequestStream& stream, std::string allocator, std::size_t rounds,
    const std::function<std::unique_ptr<g1::G1Manager>(std::shared_ptr<KvEventSink>)>& make,
    const std::function<bool(g1::G1Manager&)>& run);

/// `rounds` alternated backend/floor rounds; ConfigError when the stream is
/// empty or does not fit its pages.
AllocatorCycleResult measure_allocator_cycle(const RequestStream& stream, g1::G1Backend backend,
                                             g1::EvictionBackend eviction, std::size_t rounds);

}  // namespace kvtier::measure
