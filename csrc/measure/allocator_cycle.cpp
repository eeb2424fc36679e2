#include "kvtier/measure/allocator_cycle.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <vector>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/kv_event_sink.hpp"
#include "kvtier/measure/minimal_allocator.hpp"

namespace kvtier::measure {
namespace {

using Clock = std::chrono::steady_clock;

class CountingSink final : public KvEventSink {
 public:
  void publish(const KvEvent&) override { ++events; }
  std::size_t events = 0;
};

double exact_median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace

bool replay_through_backend(const RequestStream& s, g1::G1Manager& manager) {
  std::deque<g1::OwnerId> live;
  std::uint64_t next_owner = 1;
  g1::ComputedPrefix computed;  // reused: the probe allocates nothing once grown
  for (const auto& request : s.requests) {
    if (live.size() == s.live) {
      const DerefSignal& deref = s.requests[live.front().value() - 1].deref;
      if (!deref.blocks.empty())
        manager.process_for_request(live.front(), deref);  // a prompt shorter than a block holds none
      live.pop_front();
    }
    const g1::OwnerId owner(next_owner++);
    live.push_back(owner);
    if (request.use.blocks.empty()) continue;  // a prompt shorter than one block holds no page
    // What a scheduler asks first (get_computed_blocks), handed to the Use
    // (allocate_slots); KVBM matches by lineage on its own and ignores it.
    manager.computed_prefix(request.use.blocks, computed);
    if (!manager.process_for_request(owner, request.use, computed).is_ready()) return false;
    manager.finalize_computed_prefix(owner, 0, request.use.blocks.size() * s.block_size);
  }
  return true;
}

bool replay_through_floor(const RequestStream& s) {
  MinimalAllocator floor(s.pages);
  std::vector<std::vector<std::uint32_t>> tables(s.live + 1);  // a ring: each live request's page ids
  for (std::size_t r = 0; r < s.requests.size(); ++r) {
    if (r >= s.live) floor.release(tables[(r - s.live) % tables.size()]);
    if (!floor.use(s.requests[r].use.blocks, tables[r % tables.size()])) return false;
  }
  return true;
}

AllocatorCycleResult measure_cycle(
    const RequestStream& s, std::string allocator, std::size_t rounds,
    const std::function<std::unique_ptr<g1::G1Manager>(std::shared_ptr<KvEventSink>)>& make,
    const std::function<bool(g1::G1Manager&)>& run) {
  if (s.requests.empty()) throw ConfigError("the request stream '" + s.name + "' is empty (is the trace there?)");
  if (rounds == 0) throw ConfigError("rounds must be at least 1");
  AllocatorCycleResult result{
      .allocator = std::move(allocator), .stream = s.name, .blocks = s.blocks(), .rounds = rounds};
  std::vector<double> backend_rates, floor_rates, fractions;
  for (std::size_t round = 0; round < rounds; ++round) {
    auto sink = std::make_shared<CountingSink>();
    const std::unique_ptr<g1::G1Manager> manager = make(sink);
    const auto t0 = Clock::now();
    const bool fits = run(*manager);
    const auto t1 = Clock::now();
    const bool floor_fits = replay_through_floor(s);
    const auto t2 = Clock::now();
    if (!fits || !floor_fits)
      throw ConfigError("the stream '" + s.name + "' does not fit its " + std::to_string(s.pages) + " pages");
    const double backend_seconds = std::chrono::duration<double>(t1 - t0).count();
    const double floor_seconds = std::chrono::duration<double>(t2 - t1).count();
    backend_rates.push_back(static_cast<double>(result.blocks) / backend_seconds);
    floor_rates.push_back(static_cast<double>(result.blocks) / floor_seconds);
    fractions.push_back(floor_seconds / backend_seconds);
    result.metadata_bytes_per_page = static_cast<double>(manager->metadata_bytes()) / s.pages;
    result.events_per_round = sink->events;
  }
  result.blocks_per_second = exact_median(backend_rates);
  result.floor_blocks_per_second = exact_median(floor_rates);
  result.fraction_of_floor = exact_median(fractions);
  return result;
}

AllocatorCycleResult measure_allocator_cycle(const RequestStream& s, g1::G1Backend backend,
                                             g1::EvictionBackend eviction, std::size_t rounds) {
  const std::string allocator = backend == g1::G1Backend::Native
                                    ? std::string("native")
                                    : "kvbm/" + std::string(g1::eviction_backend_name(eviction));
  return measure_cycle(
      s, allocator, rounds,
      [&](std::shared_ptr<KvEventSink> sink) {
        return std::make_unique<g1::G1Manager>(g1::G1ManagerConfig{.capacity = s.pages,
                                                                   .block_size = s.block_size,
                                                                   .dp_rank = 0,
                                                                   .backend = backend,
                                                                   .enable_prefix_caching = true,
                                                                   .eviction = eviction},
                                               std::vector<std::shared_ptr<KvEventSink>>{std::move(sink)});
      },
      [&](g1::G1Manager& manager) { return replay_through_backend(s, manager); });
}

}  // namespace kvtier::measure
