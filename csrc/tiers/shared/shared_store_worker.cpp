// SharedStore's worker thread: the publishes (SET NX pipelines, in batches)
// and the staged reads it runs off the caller's thread, each call under one
// deadline, and what it counts of redirections.
#include <hiredis/hiredis.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "kvtier/core/errors.hpp"
#include "kvtier/tiers/shared/shared_store.hpp"
#include "redis_reply.hpp"

namespace kvtier::tiers::shared {
namespace {

// Writes sent per pipeline: a request's swap-out burst (64 blocks of a 16K-token
// prompt at 256 tokens a block) in one round trip. Reads rarely queue behind
// them: a lookup fetches its values on the caller's own connection.
constexpr std::size_t kWriteBatch = 64;
// Command buffers kept for the next publishes: one pipeline's.
constexpr std::size_t kSpareCommands = kWriteBatch;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

void SharedStore::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [this] { return stop_ || !writes_.empty() || !reads_.empty(); });
    if (writes_.empty() && reads_.empty()) return;  // stopping, nothing left
    // Reads first: a request waits on them; publishing can wait.
    std::vector<ReadJob> reads(std::make_move_iterator(reads_.begin()), std::make_move_iterator(reads_.end()));
    reads_.clear();
    std::vector<WriteJob> writes;
    while (!writes_.empty() && writes.size() < kWriteBatch) {
      writes.push_back(std::move(writes_.front()));
      writes_.pop_front();
    }
    lock.unlock();
    if (!reads.empty()) run_reads(reads);
    if (!writes.empty()) run_writes(writes);
    lock.lock();
    work_done_.notify_all();
  }
}

namespace {

/// A worker call's deadline: one timeout, and one more per 32 values.
RedisCluster::Clock::time_point worker_deadline(std::chrono::milliseconds timeout, std::size_t commands) {
  return RedisCluster::Clock::now() + timeout * static_cast<long>(1 + commands / 32);
}

}  // namespace

void SharedStore::run_writes(std::vector<WriteJob>& jobs) {
  const auto start = std::chrono::steady_clock::now();
  const auto set_command = [&](const WriteJob& job) {
    return RedisCommand{.args = {"SET", job.key}, .formatted = std::string_view(job.command.get(), job.command_bytes)};
  };
  std::vector<RedisCommand> commands;
  for (const WriteJob& job : jobs) commands.push_back(set_command(job));
  auto replies = worker_cluster_.run(commands, worker_deadline(config_.timeout, commands.size()));
  // A value NX refused must look like a block's (an empty value or another
  // type under our key would refuse the block forever): its length is asked
  // then, in a second round trip only publishes that found a value pay.
  std::vector<std::size_t> refused;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (replies[i] != nullptr && replies[i]->type == REDIS_REPLY_NIL) refused.push_back(i);
  }
  std::vector<std::size_t> poisoned;  // deleted, then published again
  if (!refused.empty()) {
    std::vector<RedisCommand> lengths;
    for (const std::size_t i : refused) lengths.push_back(RedisCommand{.args = {"STRLEN", jobs[i].key}});
    const auto answers = worker_cluster_.run(lengths, worker_deadline(config_.timeout, lengths.size()));
    const auto plausible = [&](const redisReply* length) {
      if (length == nullptr || length->type != REDIS_REPLY_INTEGER) return false;
      const auto bytes = static_cast<std::size_t>(std::max<long long>(length->integer, 0));
      return bytes > page_bytes_ && bytes <= max_value_bytes_ && (bytes - page_bytes_) % kRecordAlignment == 0;
    };
    for (std::size_t k = 0; k < refused.size(); ++k) {
      const redisReply* length = answers[k].get();
      if (error_starts(length, "WRONGTYPE") || (answered(length) && !plausible(length))) poisoned.push_back(refused[k]);
    }
  }
  if (!poisoned.empty()) {
    std::vector<RedisCommand> again;
    for (const std::size_t i : poisoned) {
      again.push_back(RedisCommand{.args = {"DEL", jobs[i].key}});
      again.push_back(set_command(jobs[i]));
    }
    auto retried = worker_cluster_.run(again, worker_deadline(config_.timeout, again.size()));
    for (std::size_t k = 0; k < poisoned.size(); ++k) replies[poisoned[k]] = std::move(retried[2 * k + 1]);
  }
  const double took = seconds_since(start);
  std::lock_guard lock(mutex_);
  stats_.write_busy_s += took;
  stats_.checksum_failures += poisoned.size();
  shared_.values_deleted += poisoned.size();
  std::size_t failed = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const redisReply* reply = replies[i].get();
    shared_.answered += answered(reply) ? 1 : 0;
    WriteDone done{.block = std::move(jobs[i].block), .stored = false};
    if (reply != nullptr && reply->type == REDIS_REPLY_STATUS) {  // OK: this SET stored it
      done.stored = true;
      ++stats_.blocks_written;
      stats_.bytes_written += page_bytes_;
    } else if (reply != nullptr && reply->type == REDIS_REPLY_NIL) {  // NX: it was there already
      done.stored = true;
      ++shared_.already_present;
    } else if (error_starts(reply, "NOPERM")) {  // a read-only user: this instance reads, never writes
      ++stats_.write_failures;
      if (!shared_.read_only) {
        shared_.read_only = true;
        std::fprintf(stderr,
                     "kvtier: the shared tier refuses this user's writes (%.*s); this instance only reads from it\n",
                     static_cast<int>(reply->len), reply->str);
      }
    } else {
      ++stats_.write_failures;
      ++failed;
    }
    writes_done_.push_back(std::move(done));
  }
  writes_in_flight_ -= jobs.size();
  for (WriteJob& job : jobs) {
    if (spare_commands_.size() < kSpareCommands) spare_commands_.push_back(std::move(job.command));
  }
  count_worker_redirections();
  if (failed > 0) {
    note_failure(error_text(worker_cluster_, replies));
    shared_.errors += failed - 1;
  }
}

void SharedStore::run_reads(std::vector<ReadJob>& jobs) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> keys;
  for (const ReadJob& job : jobs) {
    for (std::size_t b = 0; b < job.blocks.size(); ++b) {
      if (!job.copied[b]) keys.push_back(key(job.blocks[b].plh));
    }
  }
  // One byte past the largest value a block has: a longer one is refused unread (and deleted).
  const std::string last = std::to_string(max_value_bytes_);
  std::vector<RedisCommand> commands;
  commands.reserve(keys.size());
  for (const std::string& k : keys) commands.push_back(RedisCommand{.args = {"GETRANGE", k, "0", last}});
  const auto replies = worker_cluster_.run(commands, worker_deadline(config_.timeout, commands.size()));
  std::vector<std::string> bad;
  std::size_t failed = 0;
  std::size_t missing = 0;
  std::size_t other_layout = 0;
  std::size_t other_version = 0;
  std::size_t oversized = 0;
  std::size_t unauthenticated = 0;
  std::size_t ok = 0;
  std::size_t bytes = 0;
  std::vector<LowerRead> done;
  std::vector<g1::TieredBlock> dropped;
  std::size_t next = 0;
  for (ReadJob& job : jobs) {
    LowerRead read{.id = job.id, .ok = job.copied, .blocks = job.blocks};
    for (std::size_t b = 0; b < job.blocks.size(); ++b) {
      if (job.copied[b]) continue;  // copied from its staged value when the read was issued
      const std::size_t at = next++;
      const redisReply* reply = replies[at].get();
      ok += answered(reply) ? 1 : 0;
      if (!error_starts(reply, "WRONGTYPE") && (reply == nullptr || reply->type == REDIS_REPLY_ERROR)) {
        ++failed;
        continue;
      }
      if (reply->type == REDIS_REPLY_STRING && reply->len == 0) {  // gone (evicted, a shard restarted empty)
        ++missing;
        continue;
      }
      BlockRecordMeta meta;
      RecordCheck check = RecordCheck::HeaderCorrupt;
      if (reply->type == REDIS_REPLY_STRING && reply->len > max_value_bytes_) {
        ++oversized;
      } else if (reply->type == REDIS_REPLY_STRING) {
        check = check_value(reply, job.blocks[b].plh, true, meta);
      }
      if (check == RecordCheck::OtherVersion) {
        ++other_version;  // kept: another kvtier's
        dropped.push_back(job.blocks[b]);
        continue;
      }
      if (check != RecordCheck::Ok) {
        if (check == RecordCheck::OtherLayout) ++other_layout;
        if (check == RecordCheck::Unauthenticated || check == RecordCheck::Forged) ++unauthenticated;
        bad.push_back(keys[at]);
        dropped.push_back(job.blocks[b]);
        continue;
      }
      const std::size_t header = stored_header_bytes(bytes_of(*reply));
      std::memcpy(job.pages[b], reply->str + header, page_bytes_);  // verified: only now it reaches G2
      read.ok[b] = true;
      bytes += page_bytes_;
    }
    done.push_back(std::move(read));
  }
  if (!bad.empty()) delete_values(worker_cluster_, bad);
  const double took = seconds_since(start);
  std::lock_guard lock(mutex_);
  stats_.read_busy_s += took;
  stats_.blocks_read += bytes / page_bytes_;
  stats_.bytes_read += bytes;
  stats_.read_failures += failed;
  stats_.checksum_failures += bad.size();
  stats_.authentication_failures += unauthenticated;
  shared_.values_missing += missing;
  shared_.other_layout += other_layout;
  stats_.format_refusals += other_layout;
  shared_.other_version += other_version;
  shared_.oversized += oversized;
  shared_.answered += ok;
  for (const ReadJob& job : jobs) {
    reads_in_flight_ -= static_cast<std::size_t>(std::count(job.copied.begin(), job.copied.end(), false));
  }
  count_worker_redirections();
  reads_done_.insert(reads_done_.end(), std::make_move_iterator(done.begin()), std::make_move_iterator(done.end()));
  dropped_.insert(dropped_.end(), dropped.begin(), dropped.end());
  if (failed > 0) {
    note_failure(error_text(worker_cluster_, replies));
    shared_.errors += failed - 1;
  }
}

void SharedStore::count_worker_redirections() {
  shared_.redirections += worker_cluster_.redirections() - worker_redirections_;
  worker_redirections_ = worker_cluster_.redirections();
}

}  // namespace kvtier::tiers::shared
