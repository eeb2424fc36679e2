#pragma once
// G3 as a service of an engine's rows (docs/vllm.md): a DiskStore of the
// engine's row size and namespace, driven by a thread of its own. Jobs (store
// rows, load rows, by the engine's keys) are queued without blocking and run
// on the store's io_uring in place — the engine's rows are written to and
// read from the file with no copy —; their results wait for the engine to
// take them, each once. A lookup answers at once from what the tier holds.
//   submit -> queued -> running (its I/O in flight) -> finished (taken once)
// A load reports a key only when its record verified (checksum, key bytes
// and, with a tier key, the MAC); a key whose record did not is dropped from
// the tier (its header zeroed) and misses from then on. No Python runs on
// this thread; every call that may wait (drain, shutdown) is the caller's to
// make without its interpreter lock.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kvtier/tiers/disk/disk_store.hpp"
#include "kvtier/tiers/rows/row_jobs.hpp"

namespace kvtier::tiers::rows {

struct DiskRowServiceConfig {
  /// The tier's file, capacity in rows (`slots`), queue depth, backlog,
  /// reformat, key and sync (disk_store.hpp).
  disk::DiskStoreConfig store;
  /// What makes rows compatible (the engine's model, dtype, chunk size,
  /// parallel layout): a tier file of another namespace or row size is
  /// refused, or started anew with `store.reformat`.
  std::string namespace_text;
  /// Keep stored and removed events for take_events.
  bool events = false;
};

/// The fingerprint of rows of `row_bytes` under `namespace_text` (never 0).
std::uint64_t row_namespace_fingerprint(const std::string& namespace_text, std::size_t row_bytes) noexcept;

class DiskRowService {
 public:
  /// Opens (or recovers) the tier file and starts the service's thread.
  /// ConfigError: see DiskStore, and a region whose rows are not aligned
  /// for O_DIRECT (base and row size multiples of 4096).
  DiskRowService(const DiskRowServiceConfig& config, const RowRegion& region);
  DiskRowService(const DiskRowService&) = delete;
  DiskRowService& operator=(const DiskRowService&) = delete;
  /// shutdown().
  ~DiskRowService();

  /// Whether the tier holds `key` and can load it now; a hit is a use (LRU).
  bool lookup(std::span<const std::byte> key);
  /// Queues a job; never blocks on I/O. A malformed job (rows outside the
  /// region, a key of no bytes or too long, keys and rows of other lengths)
  /// fails as a whole, reported like any other. ContractError after shutdown.
  void submit(RowJob job);
  /// The jobs that ended since the last call, each reported once.
  std::vector<RowJobResult> take_finished();
  /// Waits until every job submitted so far ended (their results wait for take_finished).
  void drain();
  /// Drains, stops the thread and closes the file; the region is not touched
  /// again. Idempotent.
  void shutdown();
  /// Stored and removed keys since the last call (config.events).
  std::vector<RowEvent> take_events();
  RowTierCounters counters() const;
  std::uint64_t fingerprint() const noexcept { return fingerprint_; }
  std::size_t row_bytes() const noexcept { return region_.row_bytes; }
  std::uint32_t capacity() const noexcept { return capacity_; }
  /// What the file held when it was opened.
  const disk::SlotScan& recovered() const noexcept { return recovered_; }
  bool direct_io() const noexcept { return direct_io_; }

 private:
  struct Running;  // a job whose I/O is in flight (the thread's)
  void run();
  /// Starts what the running jobs can start now (the thread's).
  void start_work();
  void take_progress(const LowerTierProgress& progress);
  void note_removed(const g1::TieredBlock& block);
  void finish_ready();
  /// Every running and queued job fails: the store failed under them.
  void fail_everything(const std::string& why);

  RowRegion region_;
  std::uint64_t fingerprint_;
  std::uint32_t capacity_;
  bool events_;
  bool direct_io_ = false;
  disk::SlotScan recovered_;
  std::unique_ptr<disk::DiskStore> store_;  // the thread's, once it started

  mutable std::mutex mutex_;
  std::condition_variable work_;  // the thread waits for jobs, touches or stop
  std::condition_variable idle_;  // drain waits for every job to end
  std::deque<RowJob> queued_;
  std::vector<PositionalLineageHash> touched_;
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
