#include "kvtier/tiers/shared/shared_store.hpp"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <utility>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"
#include "redis_reply.hpp"

namespace kvtier::tiers::shared {
namespace {

std::string hex(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

RedisNodeLimits limits_of(const SharedStoreConfig& config, std::size_t max_value_bytes) {
  // Room for one value and the protocol around it; CLUSTER SLOTS of a large cluster fits 4 MiB.
  return RedisNodeLimits{.timeout = config.timeout,
                         .retry_after = config.retry_after,
                         .max_reply_bytes = std::max<std::size_t>(std::size_t{4} << 20, max_value_bytes + 65536)};
}

}  // namespace

SharedStore::SharedStore(SharedStoreConfig config, const KvLayout& layout)
    : SharedStore(std::move(config), layout.page_bytes(), record_header_bytes(layout.geometry().tokens_per_block),
                  layout_fingerprint(layout)) {}

SharedStore::SharedStore(SharedStoreConfig config, const RowShape& rows)
    : SharedStore(std::move(config), rows.row_bytes, record_header_bytes(0, kMaxEngineKeyBytes), rows.fingerprint) {
  if (rows.row_bytes == 0 || rows.fingerprint == 0) {
    throw ConfigError("the shared tier's rows need a size and a namespace fingerprint other than 0");
  }
}

SharedStore::SharedStore(SharedStoreConfig config, std::size_t page_bytes, std::size_t header_bytes,
                         std::uint64_t fingerprint)
    : config_(std::move(config)),
      page_bytes_(page_bytes),
      header_bytes_(header_bytes),
      max_value_bytes_(header_bytes_ + page_bytes_),
      fingerprint_(fingerprint),
      formats_(fingerprint_, config_.group_formats),
      lookup_cluster_(RedisClusterConfig{
          .seeds = config_.endpoints, .auth = config_.auth, .limits = limits_of(config_, max_value_bytes_)}),
      worker_cluster_(RedisClusterConfig{
          .seeds = config_.endpoints, .auth = config_.auth, .limits = limits_of(config_, max_value_bytes_)}) {
  if (config_.key_namespace.empty()) throw ConfigError("the shared tier's key namespace must not be empty");
  if (config_.key_namespace.find_first_of("{}") != std::string::npos) {
    throw ConfigError("the shared tier's key namespace '" + config_.key_namespace +
                      "' must not hold '{' or '}': a Redis Cluster hash tag would put every block on one shard");
  }
  if (config_.max_writes_in_flight == 0 || config_.max_reads_in_flight == 0) {
    throw ConfigError("the shared tier needs room for at least one write and one read in flight");
  }
  if (config_.timeout.count() <= 0) throw ConfigError("the shared tier's timeout must be at least 1 ms");
  key_prefix_ = config_.key_namespace + ":" + hex(fingerprint_) + ":";
  if (config_.key) key_prefix_ += "k" + hex(config_.key->id()) + ":";
  // The largest SET a block makes: its framing around the largest value (every key is as long).
  const std::string longest_key = key(PositionalLineageHash::from_raw(0, 0));
  const std::string_view set[] = {"SET", longest_key};
  const std::string ttl = std::to_string(config_.ttl_seconds);
  const std::string_view after[] = {"NX", "EX", ttl};
  const RespFraming framing = resp_framing(set, max_value_bytes_, after);
  max_command_bytes_ = framing.head.size() + max_value_bytes_ + framing.tail.size();
  worker_ = std::thread([this] { work(); });
}

SharedStore::~SharedStore() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  work_ready_.notify_all();
  worker_.join();
}

std::string SharedStore::key(const PositionalLineageHash& plh) const {
  return key_prefix_ + hex(plh.high()) + hex(plh.low());
}

std::optional<g1::TieredBlock> SharedStore::find(const PositionalLineageHash& plh) const {
  const auto it = known_.find(plh);
  if (it == known_.end()) return std::nullopt;
  return it->second;
}

void SharedStore::remember(g1::TieredBlock block) {
  // A hint, not the store's index: forgetting costs a lookup or a publish that NX refuses.
  if (known_.size() >= kKnownLimit) known_.clear();
  const PositionalLineageHash plh = block.plh;
  known_.insert_or_assign(plh, std::move(block));
}

std::string SharedStore::error_text(const RedisCluster& cluster, const std::vector<RedisReplyPtr>& replies) {
  for (const RedisReplyPtr& reply : replies) {
    if (reply != nullptr && reply->type == REDIS_REPLY_ERROR) return std::string(reply->str, reply->len);
  }
  return cluster.last_error();
}

void SharedStore::note_failure(std::string_view what) {
  // Under mutex_.
  ++shared_.errors;
  shared_.degraded = true;
  if (said_down_) return;
  said_down_ = true;
  std::fprintf(stderr,
               "kvtier: the shared tier failed (%.*s); this instance goes on with its local tiers (misses, counted)\n",
               static_cast<int>(what.size()), what.data());
}

RecordCheck SharedStore::check_value(const redisReply* reply, const PositionalLineageHash& plh, bool whole,
                                     BlockRecordMeta& meta) const {
  if (reply->type != REDIS_REPLY_STRING || reply->len == 0) return RecordCheck::NotARecord;  // another type, or empty
  const std::span<const std::byte> value = bytes_of(*reply);
  RecordCheck check = read_record_header(value, formats_, meta, key());
  if (check != RecordCheck::Ok) return check;
  if (meta.block.plh != plh || meta.payload_bytes != page_bytes_) return RecordCheck::HeaderCorrupt;
  if (!whole) return RecordCheck::Ok;
  const std::size_t header = stored_header_bytes(value);
  return check_payload(meta, value.first(std::min(header, value.size())), value.subspan(std::min(header, value.size())),
                       key());
}

void SharedStore::make_staging_room(std::size_t room) {
  const std::size_t limit = config_.max_staged_values;
  while (!staged_order_.empty() && staged_.size() + room > limit) {
    const auto [plh, sequence] = staged_order_.front();
    staged_order_.pop_front();
    const auto it = staged_.find(plh);
    if (it == staged_.end() || it->second.sequence != sequence) continue;  // read already, or staged again since
    staged_.erase(it);
    std::lock_guard lock(mutex_);
    ++shared_.staged_unread;
  }
}

void SharedStore::stage(const PositionalLineageHash& plh, StagedValue value) {
  make_staging_room(1);
  value.sequence = next_staged_++;
  staged_order_.emplace_back(plh, value.sequence);
  staged_.insert_or_assign(plh, std::move(value));
  // Entries of values read since are skipped when they come up; past twice the bound they are swept out.
  if (staged_order_.size() > 2 * std::size_t{config_.max_staged_values} + 64) {
    std::erase_if(staged_order_, [&](const auto& entry) {
      const auto it = staged_.find(entry.first);
      return it == staged_.end() || it->second.sequence != entry.second;
    });
  }
}

std::vector<std::optional<g1::TieredBlock>> SharedStore::lookup(std::span<const PositionalLineageHash> plhs) {
  std::vector<std::optional<g1::TieredBlock>> found(plhs.size());
  if (plhs.empty()) return found;
  // Staged blocks are answered here; the store is asked for the rest, the
  // first max_staged_values of them whole.
  std::vector<std::size_t> asked;
  std::size_t staged_hits = 0;
  for (std::size_t i = 0; i < plhs.size(); ++i) {
    const auto it = staged_.find(plhs[i]);
    if (it != staged_.end()) {
      found[i] = it->second.block;
      ++staged_hits;
    } else {
      asked.push_back(i);
    }
  }
  const std::size_t whole = std::min<std::size_t>(asked.size(), config_.max_staged_values);
  std::vector<std::string> keys;
  keys.reserve(asked.size());
  for (const std::size_t i : asked) keys.push_back(key(plhs[i]));
  // One byte past the largest value a block has: a longer one is refused (and deleted).
  const std::string value_end = std::to_string(max_value_bytes_);
  const std::string header_end = std::to_string(header_bytes_ - 1);
  std::vector<RedisCommand> commands;
  commands.reserve(keys.size());
  for (std::size_t j = 0; j < keys.size(); ++j) {
    commands.push_back(RedisCommand{.args = {"GETRANGE", keys[j], "0", j < whole ? value_end : header_end}});
  }
  // The whole lookup, every shard together, within one timeout (one more per
  // 32 values it fetches, as a read has): the scheduler waits for it.
  const auto deadline = RedisCluster::Clock::now() + config_.timeout * static_cast<long>(1 + whole / 32);
  auto replies = commands.empty() ? std::vector<RedisReplyPtr>{} : lookup_cluster_.run(commands, deadline);
  std::vector<std::string> bad;
  std::size_t hits = staged_hits;
  std::size_t failed = 0;
  std::size_t other_layout = 0;
  std::size_t other_version = 0;
  std::size_t unauthenticated = 0;
  std::size_t oversized = 0;
  std::size_t staged = 0;
  std::size_t ok = 0;
  for (std::size_t j = 0; j < asked.size(); ++j) {
    const std::size_t i = asked[j];
    RedisReplyPtr& reply = replies[j];
    ok += answered(reply.get()) ? 1 : 0;
    if (error_starts(reply.get(), "WRONGTYPE")) {  // a list or a hash under our key: never ours, and it blocks SET NX
      bad.push_back(keys[j]);
    } else if (reply == nullptr || reply->type == REDIS_REPLY_ERROR) {
      ++failed;
    } else if (reply->type == REDIS_REPLY_STRING && j < whole && reply->len > max_value_bytes_) {
      // Too long for a block of ours: refused unread, but another version's or layout's is said so.
      BlockRecordMeta meta;
      const RecordCheck check = check_value(reply.get(), plhs[i], false, meta);
      if (check == RecordCheck::OtherVersion) {
        ++other_version;  // another kvtier's to judge: kept, not served
      } else {
        ++(check == RecordCheck::OtherLayout ? other_layout : oversized);
        bad.push_back(keys[j]);
      }
    } else if (reply->type == REDIS_REPLY_STRING &&
               reply->len > 0) {  // "" is no key (or an empty value: publish fixes it)
      BlockRecordMeta meta;
      const RecordCheck check = check_value(reply.get(), plhs[i], j < whole, meta);
      if (check == RecordCheck::Ok) {
        found[i] = meta.block;
        if (j < whole) {
          const std::size_t header = stored_header_bytes(bytes_of(*reply));
          stage(plhs[i], StagedValue{.reply = std::move(reply), .header = header, .block = meta.block});
          ++staged;
        }
        remember(std::move(meta.block));
        ++hits;
        continue;
      }
      if (check == RecordCheck::OtherVersion) {
        ++other_version;  // another kvtier's to judge: kept, not served
      } else {
        if (check == RecordCheck::OtherLayout) ++other_layout;
        if (check == RecordCheck::Unauthenticated || check == RecordCheck::Forged) ++unauthenticated;
        bad.push_back(keys[j]);  // garbage under our key would refuse every publish of the block (NX)
      }
    }
    known_.erase(plhs[i]);  // gone, or not what it should be
  }
  if (!bad.empty()) delete_values(lookup_cluster_, bad);
  std::lock_guard lock(mutex_);
  ++shared_.lookups;
  shared_.lookup_blocks += plhs.size();
  shared_.lookup_hits += hits;
  shared_.values_staged += staged;
  shared_.other_layout += other_layout;
  stats_.format_refusals += other_layout;
  shared_.other_version += other_version;
  shared_.oversized += oversized;
  shared_.answered += ok;
  stats_.checksum_failures += bad.size();
  stats_.authentication_failures += unauthenticated;
  if (failed > 0) {
    note_failure(error_text(lookup_cluster_, replies));
    shared_.errors += failed - 1;
  } else if (!commands.empty()) {
    shared_.degraded = false;
  }
  shared_.redirections += lookup_cluster_.redirections() - lookup_redirections_;
  lookup_redirections_ = lookup_cluster_.redirections();
  return found;
}

void SharedStore::delete_values(RedisCluster& cluster, const std::vector<std::string>& keys) {
  std::vector<RedisCommand> commands;
  for (const std::string& k : keys) commands.push_back(RedisCommand{.args = {"DEL", k}});
  const auto replies = cluster.run(commands, RedisCluster::Clock::now() + config_.timeout);
  std::size_t deleted = 0;
  for (const auto& reply : replies) deleted += reply != nullptr && reply->type == REDIS_REPLY_INTEGER ? 1 : 0;
  std::lock_guard lock(mutex_);
  shared_.values_deleted += deleted;
}

LowerTier::WriteStart SharedStore::write(const g1::TieredBlock& block, std::span<const std::byte> payload,
                                         std::vector<g1::TieredBlock>&) {
  if (contains(block.plh)) return WriteStart::Present;
  if (!formats_.accepts(block)) {
    std::lock_guard lock(mutex_);
    ++stats_.format_refusals;  // a value is written only in its key's group and format
    return WriteStart::NoRoom;
  }
  KVTIER_EXPECTS(payload.size() == page_bytes_, "a shared-tier block is one page of ", page_bytes_, " bytes, not ",
                 payload.size());
  const std::size_t tokens = block.token_ids ? block.token_ids->size() : 0;
  const std::size_t header = record_header_bytes(tokens, block.engine_key.size());
  KVTIER_EXPECTS(header <= header_bytes_, "a block's record header of ", header, " bytes in a store of ",
                 header_bytes_);
  std::unique_ptr<char[]> job_buffer;
  {
    std::lock_guard lock(mutex_);
    if (writes_in_flight_ >= config_.max_writes_in_flight || shared_.read_only) {
      ++stats_.writes_refused;
      return WriteStart::NoRoom;
    }
    ++writes_in_flight_;
    if (!spare_commands_.empty()) {
      job_buffer = std::move(spare_commands_.back());
      spare_commands_.pop_back();
    }
  }
  // The SET NX command is framed around the value, which is written in place:
  // the page is copied once here and once more by the connection, as a raw
  // SET's is. Buffers are reused: a fresh one for every block would fault its
  // pages in each time.
  WriteJob job{.block = block, .key = key(block.plh), .command = std::move(job_buffer), .command_bytes = 0};
  const std::string_view set[] = {"SET", job.key};
  const std::string ttl = std::to_string(config_.ttl_seconds);
  const std::string_view no_ttl[] = {"NX"};
  const std::string_view with_ttl[] = {"NX", "EX", ttl};
  const RespFraming framing = resp_framing(set, header + payload.size(),
                                           config_.ttl_seconds > 0 ? std::span<const std::string_view>(with_ttl)
                                                                   : std::span<const std::string_view>(no_ttl));
  job.command_bytes = framing.head.size() + header + payload.size() + framing.tail.size();
  KVTIER_ASSERT(job.command_bytes <= max_command_bytes_, "a block's SET is longer than the largest one");
  if (!job.command) job.command = std::make_unique_for_overwrite<char[]>(max_command_bytes_);
  char* value = job.command.get() + framing.head.size();
  std::memcpy(job.command.get(), framing.head.data(), framing.head.size());
  write_record_header(std::as_writable_bytes(std::span(value, header)), block, formats_, ++generation_, payload, key());
  std::memcpy(value + header, payload.data(), payload.size());
  std::memcpy(value + header + payload.size(), framing.tail.data(), framing.tail.size());
  publishing_.insert(block.plh);
  {
    std::lock_guard lock(mutex_);
    writes_.push_back(std::move(job));
  }
  work_ready_.notify_one();
  return WriteStart::Started;
}

std::size_t SharedStore::read_room() const noexcept {
  std::lock_guard lock(mutex_);
  return config_.max_reads_in_flight - std::min<std::size_t>(config_.max_reads_in_flight, reads_in_flight_);
}

std::optional<std::uint64_t> SharedStore::read(std::span<const PositionalLineageHash> plhs,
                                               std::span<std::byte* const> pages) {
  KVTIER_EXPECTS(plhs.size() == pages.size(), "a read needs one page per block");
  ReadJob job{.id = next_read_,
              .blocks = {},
              .pages = std::vector<std::byte*>(pages.begin(), pages.end()),
              .copied = std::vector<bool>(plhs.size(), false)};
  std::size_t fetched = 0;  // blocks the worker reads
  for (std::size_t i = 0; i < plhs.size(); ++i) {
    if (const auto staged = staged_.find(plhs[i]); staged != staged_.end()) {
      job.blocks.push_back(staged->second.block);
      job.copied[i] = true;
      continue;
    }
    const auto it = known_.find(plhs[i]);
    KVTIER_EXPECTS(it != known_.end(), "a shared-tier read of a block no lookup found: ", plhs[i].to_string());
    job.blocks.push_back(it->second);
    ++fetched;
  }
  {
    std::lock_guard lock(mutex_);
    if (fetched > 0 && reads_in_flight_ + fetched > config_.max_reads_in_flight) return std::nullopt;
    reads_in_flight_ += fetched;
  }
  // Verified at the lookup: only now do the bytes reach the caller's pages.
  const std::size_t copied = plhs.size() - fetched;
  for (std::size_t i = 0; i < plhs.size(); ++i) {
    if (!job.copied[i]) continue;
    const auto staged = staged_.find(plhs[i]);
    std::memcpy(pages[i], staged->second.reply->str + staged->second.header, page_bytes_);
    staged_.erase(staged);
  }
  ++next_read_;
  if (fetched == 0) copied_reads_.push_back(LowerRead{.id = job.id, .ok = job.copied, .blocks = job.blocks});
  {
    std::lock_guard lock(mutex_);
    stats_.blocks_read += copied;
    stats_.bytes_read += copied * page_bytes_;
    if (fetched == 0) return job.id;
    reads_.push_back(std::move(job));
  }
  work_ready_.notify_one();
  return next_read_ - 1;
}

LowerTierProgress SharedStore::poll(bool wait) {
  std::vector<WriteDone> writes;
  LowerTierProgress progress;
  {
    std::unique_lock lock(mutex_);
    if (wait) {
      work_done_.wait(lock, [this] { return writes_in_flight_ == 0 && reads_in_flight_ == 0; });
    }
    writes.swap(writes_done_);
    progress.reads.swap(reads_done_);
    progress.dropped.swap(dropped_);
  }
  // Reads served from staged values, issued before any the worker finished since.
  progress.reads.insert(progress.reads.begin(), std::make_move_iterator(copied_reads_.begin()),
                        std::make_move_iterator(copied_reads_.end()));
  copied_reads_.clear();
  for (WriteDone& done : writes) {
    publishing_.erase(done.block.plh);
    if (!done.stored) {
      progress.unstored.push_back(std::move(done.block));
      continue;
    }
    progress.stored.push_back(done.block);
    remember(std::move(done.block));
  }
  for (const LowerRead& read : progress.reads) {
    for (std::size_t i = 0; i < read.blocks.size(); ++i) {
      if (!read.ok[i]) known_.erase(read.blocks[i].plh);
    }
  }
  return progress;
}

LowerTierStats SharedStore::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

SharedStoreStats SharedStore::shared_stats() const {
  std::lock_guard lock(mutex_);
  return shared_;
}

}  // namespace kvtier::tiers::shared
