#pragma once
// A tier below G2 as a service of an engine's rows (docs/vllm.md): G3 or G4
// over the engine's own memory, driven by a thread of its own. Jobs (store
// rows, load rows, by the engine's keys) are queued without blocking and run
// on the tier's I/O machinery — G3's io_uring in place, with no copy; G4's
// Redis pipelines —; their results wait for the engine to take them, each
// once. Lookups answer from what the tier is known to hold (G3: all of it,
// at once), or ask the tier (G4: a batch, within the store's deadline).
//   submit -> queued -> running (its I/O in flight) -> finished (taken once)
// A load reports a key only when its record verified (checksum, the engine's
// whole key and, with a tier key, the MAC); a key whose record did not is
// dropped from the tier and misses from then on. No Python runs on this
// thread; every call that may wait (lookup_many, drain, shutdown) is the
// caller's to make without its interpreter lock.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kvtier/tiers/lower_tier.hpp"
#include "kvtier/tiers/rows/row_jobs.hpp"

namespace kvtier::tiers::rows {

/// The fingerprint of rows of `row_bytes` under `namespace_text` (never 0).
std::uint64_t row_namespace_fingerprint(const std::string& namespace_text, std::size_t row_bytes) noexcept;

/// A store of rows, opened (disk_rows.hpp, shared_rows.hpp), and what the service reports of it.
struct RowStore {
  std::unique_ptr<LowerTier> tier{};
  /// What the store found when it was opened (a G3's restart scan), by name.
  std::vector<std::pair<std::string, std::uint64_t>> opened{};
  /// A remote store's deadline misses and breaker, filled into the counters.
  std::function<void(RowTierCounters&)> health{};
};

class RowService {
 public:
  /// Starts the service's thread over `store` and the engine's `region`
  /// (`events`: keep stored and removed keys for take_events).
  RowService(RowStore store, const RowRegion& region, bool events);
  RowService(const RowService&) = delete;
  RowService& operator=(const RowService&) = delete;
  /// shutdown().
  ~RowService();

  /// Whether the tier is known to hold `key` and can load it now; a hit is a
  /// use (LRU). Never waits for I/O.
  bool lookup(std::span<const std::byte> key);
  /// Asks the tier for each key (one round trip of a remote tier, bounded
  /// by its deadline; a store that is down answers no); waits for the answer.
  std::vector<bool> lookup_many(const std::vector<std::vector<std::byte>>& keys);
  /// Of `keys`, those the tier is known to hold now (what lookup answers,
  /// without counting a use); never waits.
  std::vector<bool> held(const std::vector<std::vector<std::byte>>& keys) const;
  /// Uses of `keys` in this order (the last is the most recent), or, with
  /// `demote`, keys the engine can no longer use: the first to be evicted.
  void note_uses(const std::vector<std::vector<std::byte>>& keys, bool demote);
  /// Queues a job; never blocks on I/O. A malformed job (rows outside the
  /// region, a key of no bytes or too long, keys and rows of other lengths)
  /// fails as a whole, reported like any other. ContractError after shutdown.
  void submit(RowJob job);
  /// The jobs that ended since the last call, each reported once.
  std::vector<RowJobResult> take_finished();
  /// Waits until every job submitted so far ended (their results wait for take_finished).
  void drain();
  /// Waits until job `id` ended and takes its result (it is not reported by
  /// take_finished). A job never submitted is waited for until submitted and ended.
  RowJobResult wait(std::uint64_t id);
  /// Drains, stops the thread and closes the store; the region is not
  /// touched again. Idempotent.
  void shutdown();
  /// Stored and removed keys since the last call (with `events`).
  std::vector<RowEvent> take_events();
  RowTierCounters counters() const;
  std::size_t row_bytes() const noexcept { return region_.row_bytes; }
  std::uint32_t capacity() const noexcept { return capacity_; }
  const std::vector<std::pair<std::string, std::uint64_t>>& opened() const noexcept { return opened_; }

 private:
  struct Running;  // a job whose I/O is in flight (the thread's)
  struct Asked;    // a lookup_many waiting for the thread
  void run();
  void answer(Asked& asked);
  /// Starts what the running jobs can start now (the thread's).
  void start_work();
  void start_load(Running& r);
  void take_progress(const LowerTierProgress& progress);
  void note_removed(const g1::TieredBlock& block);
  void finish_ready();
  /// Every running and queued job fails: the store failed under them.
  void fail_everything(const std::string& why);
  bool io_in_flight() const noexcept;

  RowRegion region_;
  std::uint32_t capacity_;
  bool events_;
  std::vector<std::pair<std::string, std::uint64_t>> opened_;
  std::function<void(RowTierCounters&)> health_;
  std::unique_ptr<LowerTier> store_;  // the thread's, once it started

  mutable std::mutex mutex_;
  std::condition_variable work_;  // the thread waits for jobs, lookups, touches or stop
  std::condition_variable idle_;  // drain and lookup_many wait for the thread
  std::deque<RowJob> queued_;
  std::deque<Asked*> asked_;
  struct Use {
    PositionalLineageHash plh;
    bool demote = false;
  };
  std::vector<Use> touched_;  // uses (and demotions) for the thread to apply, in order
  std::vector<RowJobResult> finished_;
  std::vector<RowEvent> events_out_;
  std::unordered_set<PositionalLineageHash> resident_;  // what a lookup hits
  std::size_t unfinished_ = 0;                          // submitted, not yet reported
  RowTierCounters counters_;
  bool stopping_ = false;
  bool stopped_ = false;
  std::string broken_;  // why the store failed; every later job fails

  // The thread's own.
  std::vector<std::unique_ptr<Running>> running_;
  std::unordered_map<PositionalLineageHash, std::pair<Running*, std::uint32_t>> writing_;
  std::unordered_map<std::uint64_t, std::pair<Running*, std::vector<std::uint32_t>>> reading_;
  std::thread thread_;
};

}  // namespace kvtier::tiers::rows
