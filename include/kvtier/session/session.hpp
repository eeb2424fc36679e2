#pragma once
// One kvtier session: the runtime, the G1 pool of real pages, the optional
// G2 offload engine and the G1Manager over them, built from one validated
// SessionConfig. The script, the Python package and the replay are thin
// front doors over it.
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "kvtier/core/unique_block.hpp"
#include "kvtier/driver/request_driver.hpp"
#include "kvtier/g1/g1_manager.hpp"
#include "kvtier/memory/block_table_builder.hpp"
#include "kvtier/memory/kv_pool.hpp"
#include "kvtier/memory/runtime.hpp"
#include "kvtier/metrics/kv_metrics.hpp"
#include "kvtier/metrics/tier_event_counter.hpp"
#include "kvtier/offload/offload_engine.hpp"
#include "kvtier/session/session_config.hpp"

namespace kvtier::session {

/// The runtime and the G1 pool, shared with whatever views their memory (a
/// DLPack tensor outlives the session that made it). The pool goes before
/// the runtime it came from.
class PageMemory {
 public:
  /// Owns `runtime`.
  PageMemory(std::unique_ptr<memory::Runtime> runtime, const KvLayout& layout);
  /// Borrows `runtime`: the caller keeps it alive past this memory.
  PageMemory(memory::Runtime& runtime, const KvLayout& layout);
  PageMemory(const PageMemory&) = delete;
  PageMemory& operator=(const PageMemory&) = delete;
  ~PageMemory() { pool_.reset(); }

  memory::Runtime& runtime() const noexcept { return *runtime_; }
  memory::KvPool& pool() const noexcept { return *pool_; }

 private:
  std::unique_ptr<memory::Runtime> owned_runtime_;
  memory::Runtime* runtime_;
  std::unique_ptr<memory::KvPool> pool_;
};

class Session {
 public:
  /// On the runtime config.device names. ConfigError for an impossible
  /// configuration, AllocationError when memory is short; nothing is kept.
  explicit Session(SessionConfig config);
  /// On a runtime the caller keeps alive past the session (the replay's, a test's).
  Session(memory::Runtime& runtime, SessionConfig config);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const SessionConfig& config() const noexcept { return config_; }
  memory::Runtime& runtime() const noexcept { return memory_->runtime(); }
  memory::KvPool& pool() const noexcept { return memory_->pool(); }
  /// What a view of the pages holds on to.
  std::shared_ptr<PageMemory> page_memory() const noexcept { return memory_; }
  /// The G2 tier; nullptr without one (host_blocks 0).
  offload::OffloadEngine* engine() const noexcept { return engine_.get(); }
  g1::G1Manager& manager() noexcept { return *manager_; }
  const g1::G1Manager& manager() const noexcept { return *manager_; }
  /// The request driver over the manager; pages it hands a group of another
  /// precision are zeroed in the pool before the call returns.
  driver::RequestDriver driver();

  /// The tier under G2 of that medium (Disk: G3, External: G4); nullptr without one.
  const tiers::LowerTier* lower_tier(StorageTier medium) const noexcept;
  /// The tiers under G2's usage and counters under the names the script's
  /// `stats` and Python's `metrics()` give them (disk_*, then shared_*).
  std::vector<std::pair<const char*, std::uint64_t>> lower_tier_counters() const;

  /// Blocks each tier stored and removed, counted from the manager's events.
  const metrics::TierEventCounter& tier_events() const noexcept { return *tier_events_; }
  /// Every tier's usage now and its Stored/Removed counts (request-level
  /// counts are the front door's).
  metrics::KvMetrics tier_metrics() const;

  /// The block tables of `owners` (and their lengths, when given) as device
  /// tensors for work on `stream` (paged attention): one host-to-device copy
  /// through the session's BlockTableBuilder, no allocation once it is large
  /// enough (it grows, after `stream` drained, when a batch outgrows it).
  /// Valid until the next call; `columns` as BlockTableBuilder::build.
  /// ContractError for an owner the manager does not know.
  memory::DeviceBlockTables block_tables(std::span<const g1::OwnerId> owners, memory::Stream& stream,
                                         std::span<const std::int32_t> seq_lens = {}, std::uint32_t columns = 0);
  /// KV cache group `group`'s pages in this session's pool as the group
  /// kernels address them (memory::GroupKvWrite, GroupAttentionDecode):
  /// its format, layers and the pool's page as the stride. ContractError on a
  /// manager without groups, for a group it does not have, or when the pool's
  /// pages in memory are smaller than the group's (group_page_bytes).
  kernels::GroupPages group_pages(std::size_t group) const;
  /// The session's stream for work a front door enqueues on the pages
  /// (paged attention, block tables) when the caller brings none.
  memory::Stream& compute_stream();

  /// The page pattern identity of a block, one meaning for every front door:
  /// its sequence hash when full, a mix of its UUID when partial (what
  /// KvPool::fill_pattern writes and find_pattern_mismatches checks).
  static std::uint64_t pattern_identity(const UniqueBlock& block) noexcept;
  /// Pattern identities of the blocks the owner's pages back now, in table order.
  std::vector<std::uint64_t> pattern_identities(g1::OwnerId owner) const;

 private:
  /// Builds the stack on `borrowed`, or on a runtime of its own when null.
  void build(memory::Runtime* borrowed);

  SessionConfig config_;
  std::shared_ptr<PageMemory> memory_;
  std::shared_ptr<offload::OffloadEngine> engine_;  // reads and writes memory_'s pages: declared after it
  std::shared_ptr<metrics::TierEventCounter> tier_events_ = std::make_shared<metrics::TierEventCounter>();
  std::unique_ptr<g1::G1Manager> manager_;
  std::unique_ptr<memory::BlockTableBuilder> tables_;  // grown on demand
  std::unique_ptr<memory::Stream> compute_stream_;     // made on first use
};

}  // namespace kvtier::session
