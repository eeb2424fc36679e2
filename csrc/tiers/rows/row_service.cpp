#include "kvtier/tiers/rows/row_service.hpp"

#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <utility>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"
#include "kvtier/tiers/block_record.hpp"

namespace kvtier::tiers::rows {
namespace {

using Clock = std::chrono::steady_clock;

g1::TieredBlock row_block(const std::vector<std::byte>& key) {
  const PositionalLineageHash plh = engine_key_plh(key);
  return g1::TieredBlock{.plh = plh,
                         .hash = SequenceHash(plh.low()),
                         .parent = std::nullopt,
                         .local = LocalBlockHash(0),
                         .token_ids = std::nullopt,
                         .format = 0,
                         .engine_key = key};
}

/// Why a job cannot run at all, or empty.
std::string malformed(const RowJob& job, const RowRegion& region) {
  if (job.keys.size() != job.rows.size()) {
    return "a job of " + std::to_string(job.keys.size()) + " keys and " + std::to_string(job.rows.size()) + " rows";
  }
  for (std::size_t i = 0; i < job.keys.size(); ++i) {
    if (job.rows[i] < 0 || static_cast<std::uint64_t>(job.rows[i]) >= region.count) {
      return "row " + std::to_string(job.rows[i]) + " is outside the engine's " + std::to_string(region.count) +
             " rows";
    }
    if (job.keys[i].empty() || job.keys[i].size() > kMaxEngineKeyBytes) {
      return "a key of " + std::to_string(job.keys[i].size()) + " bytes (1 to " + std::to_string(kMaxEngineKeyBytes) +
             ")";
    }
  }
  return {};
}

}  // namespace

/// A job whose I/O is in flight: positions not yet started wait in `pending`.
struct RowService::Running {
  RowJob job;
  Clock::time_point submitted;
  std::deque<std::uint32_t> pending;  // positions not started yet, in order
  std::size_t in_flight = 0;
  bool failed = false;
  std::vector<std::uint32_t> loaded;
  std::uint64_t bytes = 0;
  bool done() const noexcept { return pending.empty() && in_flight == 0; }
};

/// A lookup_many whose caller waits for the thread's answer.
struct RowService::Asked {
  const std::vector<std::vector<std::byte>>* keys = nullptr;
  std::vector<bool> found;
  bool answered = false;
};

std::uint64_t row_namespace_fingerprint(const std::string& namespace_text, std::size_t row_bytes) noexcept {
  const std::string text = "kvtier rows v1\n" + namespace_text + "\nrow bytes " + std::to_string(row_bytes);
  const std::uint64_t fingerprint = XXH3_64bits(text.data(), text.size());
  return fingerprint == 0 ? 1 : fingerprint;
}

RowService::RowService(RowStore store, const RowRegion& region, bool events)
    : region_(region),
      capacity_(store.tier->capacity()),
      events_(events),
      opened_(std::move(store.opened)),
      health_(std::move(store.health)),
      store_(std::move(store.tier)) {
  KVTIER_EXPECTS(region.base != nullptr && region.count > 0 && region.row_bytes == store_->page_bytes(),
                 "a row service over rows of the store's page size");
  for (const g1::TieredBlock& block : store_->resident_blocks()) resident_.insert(block.plh);
  counters_.capacity = capacity_;
  counters_.used = store_->used();
  thread_ = std::thread([this] { run(); });
}

RowService::~RowService() {
  try {
    shutdown();
  } catch (...) {  // a destructor never throws
  }
}

bool RowService::lookup(std::span<const std::byte> key) {
  const PositionalLineageHash plh = engine_key_plh(key);
  std::lock_guard lock(mutex_);
  ++counters_.lookups;
  if (!resident_.contains(plh)) return false;
  ++counters_.lookup_hits;
  // Bounded: recency is a hint, a burst of hits between two steps need not all count.
  if (touched_.size() < 65536) touched_.push_back(Use{.plh = plh});
  work_.notify_one();
  return true;
}

std::vector<bool> RowService::held(const std::vector<std::vector<std::byte>>& keys) const {
  std::vector<bool> found;
  found.reserve(keys.size());
  std::lock_guard lock(mutex_);
  for (const std::vector<std::byte>& key : keys) found.push_back(resident_.contains(engine_key_plh(key)));
  return found;
}

void RowService::note_uses(const std::vector<std::vector<std::byte>>& keys, bool demote) {
  std::lock_guard lock(mutex_);
  for (const std::vector<std::byte>& key : keys) {
    if (touched_.size() >= 65536) break;  // a hint: a burst past this need not all count
    touched_.push_back(Use{.plh = engine_key_plh(key), .demote = demote});
  }
  work_.notify_one();
}

std::vector<bool> RowService::lookup_many(const std::vector<std::vector<std::byte>>& keys) {
  Asked asked{.keys = &keys, .found = std::vector<bool>(keys.size(), false)};
  std::unique_lock lock(mutex_);
  if (stopping_ || keys.empty()) return asked.found;
  asked_.push_back(&asked);
  work_.notify_one();
  idle_.wait(lock, [&] { return asked.answered; });
  return asked.found;
}

void RowService::submit(RowJob job) {
  std::lock_guard lock(mutex_);
  KVTIER_EXPECTS(!stopping_, "a job submitted to a tier that was shut down");
  ++unfinished_;
  queued_.push_back(std::move(job));
  work_.notify_one();
}

std::vector<RowJobResult> RowService::take_finished() {
  std::lock_guard lock(mutex_);
  return std::exchange(finished_, {});
}

std::vector<RowEvent> RowService::take_events() {
  std::lock_guard lock(mutex_);
  return std::exchange(events_out_, {});
}

RowTierCounters RowService::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

void RowService::drain() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return unfinished_ == 0; });
}

RowJobResult RowService::wait(std::uint64_t id) {
  std::unique_lock lock(mutex_);
  std::vector<RowJobResult>::iterator it;
  idle_.wait(lock, [&] {
    it = std::find_if(finished_.begin(), finished_.end(), [&](const RowJobResult& r) { return r.id == id; });
    return it != finished_.end();
  });
  RowJobResult result = std::move(*it);
  finished_.erase(it);
  return result;
}

void RowService::shutdown() {
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    stopping_ = true;
    work_.notify_one();
  }
  if (thread_.joinable()) thread_.join();  // it ends every job first: none is abandoned mid-transfer
  store_.reset();                          // waits for its I/O, closes its file or connections
  std::lock_guard lock(mutex_);
  stopped_ = true;
}

bool RowService::io_in_flight() const noexcept {
  return std::any_of(running_.begin(), running_.end(), [](const auto& r) { return r->in_flight > 0; });
}

void RowService::answer(Asked& asked) {
  std::vector<PositionalLineageHash> plhs;
  for (const std::vector<std::byte>& key : *asked.keys) plhs.push_back(engine_key_plh(key));
  std::vector<std::optional<g1::TieredBlock>> found;
  if (broken_.empty()) found = store_->lookup(plhs);
  std::lock_guard lock(mutex_);
  std::size_t hits = 0;
  for (std::size_t i = 0; i < found.size(); ++i) {
    // The record names the key whole: a hash that matched another key's is no hit.
    asked.found[i] = found[i].has_value() && found[i]->engine_key == (*asked.keys)[i];
    hits += asked.found[i] ? 1 : 0;
  }
  counters_.lookups += asked.keys->size();
  counters_.lookup_hits += hits;
  asked.answered = true;
  idle_.notify_all();
}

void RowService::run() {
  for (;;) {
    std::vector<RowJob> arrived;
    std::vector<Use> touched;
    std::vector<Asked*> asked;
    {
      std::unique_lock lock(mutex_);
      if (running_.empty()) {
        work_.wait(lock, [&] { return stopping_ || !queued_.empty() || !touched_.empty() || !asked_.empty(); });
        if (stopping_ && queued_.empty() && asked_.empty()) return;
      }
      arrived.assign(std::make_move_iterator(queued_.begin()), std::make_move_iterator(queued_.end()));
      queued_.clear();
      asked.assign(asked_.begin(), asked_.end());
      asked_.clear();
      touched.swap(touched_);
    }
    try {
      for (Asked* a : asked) answer(*a);
      for (const Use& use : touched) {
        if (use.demote) {
          store_->demote(use.plh);
        } else {
          store_->touch(use.plh);
        }
      }
      for (RowJob& job : arrived) {
        auto running = std::make_unique<Running>();
        running->submitted = Clock::now();
        std::string why = broken_.empty() ? malformed(job, region_) : "the tier failed: " + broken_;
        running->job = std::move(job);
        if (!why.empty()) {
          std::lock_guard lock(mutex_);
          finished_.push_back(RowJobResult{.id = running->job.id, .kind = running->job.kind, .error = why});
          --unfinished_;
          idle_.notify_all();
          continue;
        }
        for (std::uint32_t i = 0; i < running->job.keys.size(); ++i) running->pending.push_back(i);
        running_.push_back(std::move(running));
      }
      start_work();
      finish_ready();
      if (io_in_flight()) {
        take_progress(store_->wait_some());
        finish_ready();
      }
    } catch (const std::exception& error) {
      try {
        (void)store_->poll(true);  // no I/O may still land in the engine's rows once their jobs are reported
      } catch (...) {
      }
      fail_everything(error.what());
      for (Asked* a : asked) {
        std::lock_guard lock(mutex_);
        a->answered = true;  // answered no, or already answered
        idle_.notify_all();
      }
    }
  }
}

void RowService::start_work() {
  for (const std::unique_ptr<Running>& r : running_) {
    if (r->job.kind == RowJobKind::Load) {
      start_load(*r);
      continue;
    }
    while (!r->pending.empty()) {
      const std::uint32_t at = r->pending.front();
      const g1::TieredBlock block = row_block(r->job.keys[at]);
      std::vector<g1::TieredBlock> evicted;
      const std::span<const std::byte> row(region_.row(static_cast<std::size_t>(r->job.rows[at])), region_.row_bytes);
      const LowerTier::WriteStart start = store_->write_in_place(block, row, evicted);
      for (const g1::TieredBlock& victim : evicted) note_removed(victim);
      if (start == LowerTier::WriteStart::NoRoom && io_in_flight()) return;  // again once some I/O ended
      r->pending.pop_front();
      if (start == LowerTier::WriteStart::Present) store_->touch(block.plh);  // a store of it again is a use
      std::lock_guard lock(mutex_);
      if (start == LowerTier::WriteStart::Started) {
        writing_.emplace(block.plh, std::pair{r.get(), at});
        ++r->in_flight;
      } else if (start == LowerTier::WriteStart::Present) {
        ++counters_.keys_already_held;
      } else {
        ++counters_.keys_store_failed;  // no room, and nothing in flight that would make some
        r->failed = true;
      }
    }
  }
}

void RowService::start_load(Running& r) {
  // The keys the tier holds, as many as it can read at once; a remote tier is
  // asked first for those it does not know of (one round trip).
  std::vector<std::uint32_t> positions;
  std::vector<PositionalLineageHash> plhs;
  while (!r.pending.empty() && plhs.size() < store_->read_room()) {
    positions.push_back(r.pending.front());
    plhs.push_back(engine_key_plh(r.job.keys[r.pending.front()]));
    r.pending.pop_front();
  }
  if (plhs.empty()) return;
  std::vector<std::optional<g1::TieredBlock>> found(plhs.size());
  std::vector<PositionalLineageHash> unknown;
  for (std::size_t i = 0; i < plhs.size(); ++i) {
    found[i] = store_->find(plhs[i]);
    if (!found[i]) unknown.push_back(plhs[i]);
  }
  if (!unknown.empty()) {
    const std::vector<std::optional<g1::TieredBlock>> asked = store_->lookup(unknown);
    for (std::size_t i = 0, u = 0; i < plhs.size(); ++i) {
      if (!found[i]) found[i] = asked[u++];
    }
  }
  std::vector<std::uint32_t> reading;
  std::vector<PositionalLineageHash> reads;
  std::vector<std::byte*> pages;
  for (std::size_t i = 0; i < plhs.size(); ++i) {
    const std::uint32_t at = positions[i];
    if (!found[i] || found[i]->engine_key != r.job.keys[at]) {
      std::lock_guard lock(mutex_);
      ++counters_.keys_load_failed;  // evicted since its lookup, or never held
      r.failed = true;
      continue;
    }
    reading.push_back(at);
    reads.push_back(plhs[i]);
    pages.push_back(region_.row(static_cast<std::size_t>(r.job.rows[at])));
  }
  if (reads.empty()) return;
  const std::optional<std::uint64_t> read = store_->read_in_place(reads, pages);
  KVTIER_ASSERT(read.has_value(), "a tier read refused within its read room");
  r.in_flight += reads.size();
  reading_.emplace(*read, std::pair{&r, std::move(reading)});
}

void RowService::note_removed(const g1::TieredBlock& block) {
  std::lock_guard lock(mutex_);
  resident_.erase(block.plh);
  if (events_) events_out_.push_back(RowEvent{.key = block.engine_key, .removed = true});
}

void RowService::take_progress(const LowerTierProgress& progress) {
  for (const g1::TieredBlock& block : progress.dropped) note_removed(block);
  std::lock_guard lock(mutex_);
  for (const g1::TieredBlock& block : progress.stored) {
    resident_.insert(block.plh);
    if (events_) events_out_.push_back(RowEvent{.key = block.engine_key, .removed = false});
    const auto it = writing_.find(block.plh);
    if (it == writing_.end()) continue;
    Running& r = *it->second.first;
    --r.in_flight;
    r.bytes += region_.row_bytes;
    ++counters_.keys_stored;
    counters_.bytes_stored += region_.row_bytes;
    writing_.erase(it);
  }
  for (const g1::TieredBlock& block : progress.unstored) {
    const auto it = writing_.find(block.plh);
    if (it == writing_.end()) continue;
    Running& r = *it->second.first;
    --r.in_flight;
    r.failed = true;
    ++counters_.keys_store_failed;
    writing_.erase(it);
  }
  for (const LowerRead& read : progress.reads) {
    const auto it = reading_.find(read.id);
    KVTIER_ASSERT(it != reading_.end(), "a tier read of no job");
    Running& r = *it->second.first;
    const std::vector<std::uint32_t>& positions = it->second.second;
    for (std::size_t i = 0; i < positions.size(); ++i) {
      if (read.ok[i]) {
        r.loaded.push_back(positions[i]);
        r.bytes += region_.row_bytes;
        ++counters_.keys_loaded;
        counters_.bytes_loaded += region_.row_bytes;
      } else {
        r.failed = true;
        ++counters_.keys_load_failed;
      }
    }
    r.in_flight -= positions.size();
    reading_.erase(it);
  }
}

void RowService::finish_ready() {
  const LowerTierStats stats = store_->stats();
  std::lock_guard lock(mutex_);
  const std::size_t ended = std::erase_if(running_, [&](const std::unique_ptr<Running>& r) {
    if (!r->done()) return false;
    RowJobResult result{.id = r->job.id,
                        .kind = r->job.kind,
                        .success = !r->failed,
                        .loaded = std::move(r->loaded),
                        .seconds = std::chrono::duration<double>(Clock::now() - r->submitted).count(),
                        .bytes = r->bytes};
    std::sort(result.loaded.begin(), result.loaded.end());
    finished_.push_back(std::move(result));
    --unfinished_;
    return true;
  });
  counters_.checksum_failures = stats.checksum_failures;
  counters_.authentication_failures = stats.authentication_failures;
  counters_.evictions = stats.evictions;
  counters_.used = store_->used();
  if (health_) health_(counters_);
  if (ended > 0 || unfinished_ == 0) idle_.notify_all();  // drain, and wait for a job
}

void RowService::fail_everything(const std::string& why) {
  std::fprintf(stderr, "kvtier: a tier of an engine's rows failed (%s): every job fails from now on\n", why.c_str());
  std::lock_guard lock(mutex_);
  broken_ = why;
  for (const std::unique_ptr<Running>& r : running_) {
    finished_.push_back(
        RowJobResult{.id = r->job.id, .kind = r->job.kind, .success = false, .error = "the tier failed: " + why});
    --unfinished_;
  }
  running_.clear();
  writing_.clear();
  reading_.clear();
  resident_.clear();  // nothing is served by a store that failed
  idle_.notify_all();
}

}  // namespace kvtier::tiers::rows
