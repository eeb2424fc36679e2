#pragma once
// G4's store (docs/shared-tier.md): blocks shared by many kvtier instances
// in Redis (one node or a Redis Cluster). One value per block, never torn:
// key = namespace : layout fingerprint [: tier key id] : positional lineage
// hash; value = a block record (tiers/block_record: hashes, parent, tokens,
// fingerprint, XXH3-64 of the payload and, under a tier key, the MAC of
// header and payload) then the page, written with one SET NX (EX ttl).
// Redis' own eviction (maxmemory + allkeys-lru) is the capacity policy.
//   Publishing: write() copies the page into a value and queues it; a worker
//   thread sends queued values as pipelines; a full queue refuses (counted).
//   Lookup: one pipeline per call, on the caller's thread, that fetches the
//   values themselves (GETRANGE: never more than one value's bytes) of up to
//   max_staged_values blocks and the headers of the rest. A value is found
//   only when its header, payload and MAC check; found values stay staged,
//   so the read that follows copies them into the caller's pages without a
//   second round trip, and pages are reserved only for blocks that verified.
//   A missing key costs no payload bytes. Blocks already staged are
//   answered without asking the store.
//   Reading: staged blocks are copied at once; the rest (found by a header
//   lookup, or whose staged value made room for others) the worker reads,
//   checks and copies as a lookup would.
// Every failure (no answer within the timeout, an error reply, a value gone,
// garbage, empty, of another type, too large, another layout's, forged) is a
// miss and counted; what is not ours to judge (another record version) is
// kept; a down store says so once on stderr and the instance goes on with
// its local tiers. A lookup never takes longer than the timeout (one more per 32 values it fetches),
// and a node that failed is not asked again for a back-off the process
// shares (node_breaker.hpp).
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kvtier/core/kv_layout.hpp"
#include "kvtier/tiers/block_record.hpp"
#include "kvtier/tiers/lower_tier.hpp"
#include "kvtier/tiers/shared/redis_cluster.hpp"
#include "kvtier/tiers/tier_key.hpp"

namespace kvtier::tiers::shared {

struct SharedStoreConfig {
  /// One node, or seeds of a Redis Cluster.
  std::vector<RedisEndpoint> endpoints;
  /// Credentials every node is given (AUTH), none when the password is empty.
  RedisAuth auth{};
  /// The user's part of every key: instances share blocks only under the same one.
  std::string key_namespace = "kvtier";
  std::uint32_t ttl_seconds = 0;  // 0: values live until Redis evicts them
  /// Blocks queued for publishing (each holds one value's buffer); beyond, write() refuses.
  std::uint32_t max_writes_in_flight = 256;
  /// Blocks being read.
  std::uint32_t max_reads_in_flight = 256;
  /// Verified values a lookup fetched whole and keeps for the read that
  /// follows (each holds one value's bytes; the oldest go first). 0: lookups
  /// fetch headers only and every read is a second round trip.
  std::uint32_t max_staged_values = 256;
  /// A lookup's whole time, and each connect, pipeline and reply's: nothing waits longer.
  std::chrono::milliseconds timeout{250};
  /// A node that failed is not tried again before this (doubling while it keeps failing).
  std::chrono::milliseconds retry_after{1000};
  /// With a key, values carry their MAC and only values with a valid one are
  /// served; its id is part of every key, so instances of another key (or
  /// none) never meet these values.
  std::optional<TierKey> key{};
  /// A manager with KV cache groups: each group's block fingerprint
  /// (BlockFormats); a value of another group format is never served. Empty: one layout.
  std::vector<std::uint64_t> group_formats{};
  /// Eager (true): each block is published as it lands in G2, so other
  /// instances hit it while it is still in this one's G2. Lazy (false): when
  /// G2 evicts it, as G3 is written (docs/policies.md).
  bool publish_on_landing = true;
};

/// What a shared store counts besides LowerTierStats.
struct SharedStoreStats {
  std::uint64_t lookups = 0;          // lookup() calls that asked the store
  std::uint64_t lookup_blocks = 0;    // blocks asked for
  std::uint64_t lookup_hits = 0;      // blocks found with a header that checked
  std::uint64_t already_present = 0;  // publishes another instance (or an earlier run) had made: SET NX refused
  std::uint64_t values_missing = 0;   // a read found no value (Redis evicted it, a shard restarted empty)
  std::uint64_t other_layout = 0;     // values of another layout fingerprint (never served)
  std::uint64_t other_version = 0;    // values of another record format version: kept, never served
  std::uint64_t oversized = 0;        // values longer than a block's (refused unread, deleted)
  std::uint64_t values_deleted = 0;   // values that did not check and were removed so they can be published again
  std::uint64_t answered = 0;         // commands the store answered (not an error): 0 means it never served
  std::uint64_t errors = 0;           // commands without an answer or with an error reply
  std::uint64_t redirections = 0;     // MOVED replies followed
  std::uint64_t values_staged = 0;    // values a lookup fetched whole and verified
  std::uint64_t staged_unread = 0;    // of those, dropped for room before a read took them
  bool degraded = false;              // the last command to the store failed
  bool read_only = false;             // the store refused our writes (NOPERM): this instance only reads
};

class SharedStore final : public LowerTier {
 public:
  /// Starts the worker; connections are made on first use (a store that is
  /// down at start is a miss, not an error). ConfigError: no endpoint, a
  /// zero in-flight bound or timeout, an empty namespace or one with a hash
  /// tag ('{' or '}': every block would land on one shard).
  SharedStore(SharedStoreConfig config, const KvLayout& layout);
  /// A store of an engine's rows (tiers/rows/row_service.hpp): values of
  /// records named by engine keys, under the rows' fingerprint.
  SharedStore(SharedStoreConfig config, const RowShape& rows);
  /// Finishes what was queued (each command bounded by the timeout), then stops the worker.
  ~SharedStore() override;
  SharedStore(const SharedStore&) = delete;
  SharedStore& operator=(const SharedStore&) = delete;

  StorageTier medium() const noexcept override { return StorageTier::External; }
  std::size_t page_bytes() const noexcept override { return page_bytes_; }
  /// 0: the store's capacity is its own (maxmemory).
  std::uint32_t capacity() const noexcept override { return 0; }
  bool write_through() const noexcept override { return config_.publish_on_landing; }
  /// Blocks this instance knows the store holds or is publishing.
  std::size_t used() const noexcept override { return known_.size() + publishing_.size(); }
  bool contains(const PositionalLineageHash& plh) const override {
    return known_.contains(plh) || publishing_.contains(plh);
  }
  std::optional<g1::TieredBlock> find(const PositionalLineageHash& plh) const override;
  std::vector<std::optional<g1::TieredBlock>> lookup(std::span<const PositionalLineageHash> plhs) override;
  std::vector<g1::TieredBlock> resident_blocks() const override { return {}; }
  WriteStart write(const g1::TieredBlock& block, std::span<const std::byte> payload,
                   std::vector<g1::TieredBlock>& evicted) override;
  std::size_t read_room() const noexcept override;
  std::optional<std::uint64_t> read(std::span<const PositionalLineageHash> plhs,
                                    std::span<std::byte* const> pages) override;
  LowerTierProgress poll(bool wait) override;
  LowerTierStats stats() const override;
  SharedStoreStats shared_stats() const;

  /// The key of the block `plh` names (tests overwrite values through it).
  std::string key(const PositionalLineageHash& plh) const;
  const SharedStoreConfig& config() const noexcept { return config_; }
  std::uint64_t fingerprint() const noexcept { return fingerprint_; }

 private:
  struct WriteJob {
    g1::TieredBlock block;
    std::string key;
    std::unique_ptr<char[]> command;  // SET key value NX [EX ttl] in RESP; the value: record header, then the page
    std::size_t command_bytes = 0;
  };
  struct ReadJob {
    std::uint64_t id = 0;
    std::vector<g1::TieredBlock> blocks;
    std::vector<std::byte*> pages;
    std::vector<bool> copied;  // served from a staged value: the worker does not fetch it
  };
  /// A value a lookup fetched and verified, kept for its read.
  struct StagedValue {
    RedisReplyPtr reply;
    std::size_t header = 0;  // where the payload starts
    g1::TieredBlock block;
    std::uint64_t sequence = 0;  // its entry in staged_order_
  };
  struct WriteDone {
    g1::TieredBlock block;
    bool stored = false;  // in the store now (this SET, or another's before it)
  };

  /// Both constructors: a value's page and header bytes, and its records' fingerprint.
  SharedStore(SharedStoreConfig config, std::size_t page_bytes, std::size_t header_bytes, std::uint64_t fingerprint);
  /// Keeps a verified value for its read, dropping the oldest beyond max_staged_values.
  void stage(const PositionalLineageHash& plh, StagedValue value);
  /// Drops staged values, oldest first, until `room` more fit.
  void make_staging_room(std::size_t room);
  /// Notes a block the store holds; past kKnownLimit blocks the notes start over.
  void remember(g1::TieredBlock block);
  /// What went wrong: the first error reply's text, or why the node failed.
  static std::string error_text(const RedisCluster& cluster, const std::vector<RedisReplyPtr>& replies);
  void work();
  void run_writes(std::vector<WriteJob>& jobs);
  void run_reads(std::vector<ReadJob>& jobs);
  /// Counts a command without an answer; says once that the store is down.
  void note_failure(std::string_view what);
  /// Removes values that did not check, so the block can be published again.
  void delete_values(RedisCluster& cluster, const std::vector<std::string>& keys);
  /// What a value (or a header of one) says: Ok, or why it is refused.
  RecordCheck check_value(const redisReply* reply, const PositionalLineageHash& plh, bool whole,
                          BlockRecordMeta& meta) const;
  const TierKey* key() const noexcept { return config_.key ? &*config_.key : nullptr; }
  /// Under mutex_, on the worker: adds the MOVED replies it followed since the last call.
  void count_worker_redirections();

  SharedStoreConfig config_;
  std::size_t page_bytes_;
  std::size_t header_bytes_;           // a record header of a full block's tokens
  std::size_t max_value_bytes_;        // the largest value a block has: header and page
  std::size_t max_command_bytes_ = 0;  // the largest SET a block makes, in RESP
  std::uint64_t fingerprint_;          // the layout's: the key namespace's
  BlockFormats formats_;               // each value's
  std::string key_prefix_;
  // The caller's thread (lookups) and the worker each have their connections.
  RedisCluster lookup_cluster_;
  RedisCluster worker_cluster_;

  static constexpr std::size_t kKnownLimit = 65536;
  // The caller's thread only.
  std::unordered_map<PositionalLineageHash, g1::TieredBlock> known_;
  std::unordered_set<PositionalLineageHash> publishing_;
  std::uint64_t next_read_ = 1;
  std::uint64_t lookup_redirections_ = 0;  // counted into shared_ so far
  std::uint64_t worker_redirections_ = 0;  // the worker's, under mutex_
  std::uint64_t generation_ = 0;
  std::unordered_map<PositionalLineageHash, StagedValue> staged_;
  std::deque<std::pair<PositionalLineageHash, std::uint64_t>> staged_order_;  // oldest first; stale entries skipped
  std::uint64_t next_staged_ = 1;
  std::vector<LowerRead> copied_reads_;  // reads served whole from staged values, for the next poll

  // Shared with the worker, under mutex_.
  mutable std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  std::deque<WriteJob> writes_;
  std::deque<ReadJob> reads_;
  std::size_t writes_in_flight_ = 0;  // queued or being sent
  std::size_t reads_in_flight_ = 0;   // blocks
  std::vector<WriteDone> writes_done_;
  std::vector<std::unique_ptr<char[]>> spare_commands_;  // sent commands' buffers, for the next publishes
  std::vector<LowerRead> reads_done_;
  std::vector<g1::TieredBlock> dropped_;
  LowerTierStats stats_;
  SharedStoreStats shared_;
  bool said_down_ = false;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace kvtier::tiers::shared
