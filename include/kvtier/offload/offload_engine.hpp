#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kvtier/g1/offload_tier.hpp"
#include "kvtier/memory/kv_pool.hpp"
#include "kvtier/memory/runtime.hpp"
#include "kvtier/offload/host_block_registry.hpp"
#include "kvtier/offload/processor_sharing_link.hpp"
#include "kvtier/offload/tier_admission.hpp"
#include "kvtier/tiers/block_formats.hpp"
#include "kvtier/tiers/lower_tier.hpp"

namespace kvtier::offload {

/// Validated settings of an OffloadEngine.
struct OffloadConfig {
  /// G2 pages of pinned host memory (must be > 0: no engine means no tier).
  std::uint32_t host_blocks = 0;
  /// Blocks per swap-out transfer (docs/semantics.md §5.2 offload_batch_size).
  std::uint32_t batch_blocks = 16;
  /// Checksum (XXH3) each block when it lands in G2 and check it before it is
  /// copied back; a mismatch drops the block and fails that part of the swap-in.
  bool verify_swaps = false;
  /// The estimator's bandwidth until copies have been measured (GB/s; 0 = none yet).
  double link_gbps = 0.0;
  /// The small-page path: pages of a multi-page transfer smaller than
  /// `staging_below_bytes` are gathered by the copy kernel into a contiguous
  /// device ring of this many pages, which moves to G2 as coalesced runs (the
  /// reverse for swap-in), instead of one copy-engine descriptor per page.
  /// nullopt: on for CUDA (64 MiB of ring, at most 4096 pages), off on the host
  /// runtime; 0: off.
  std::optional<std::uint32_t> staging_pages{};
  std::size_t staging_below_bytes = std::size_t{64} << 10;
  /// What G2 stores of the blocks G1 evicts, and what G3 (Disk) and G4
  /// (External) store of the blocks G2 evicts (docs/policies.md); a tier's
  /// second-offer history holds twice its capacity.
  TierAdmission g2_admission = TierAdmission::All;
  TierAdmission disk_admission = TierAdmission::All;
  TierAdmission shared_admission = TierAdmission::All;
  /// G2's eviction order; nullopt: the spec's (KVBM Lineage, native LRU).
  std::optional<g1::EvictionBackend> g2_eviction{};
};

/// The copies of one direction that completed: bytes, and the wall time during
/// which at least one of them was in flight, from submission to the poll that
/// saw it end (an upper bound on the copy time: bytes / busy_ms is a floor on
/// the achieved bandwidth).
struct CopyUsage {
  std::uint64_t transfers = 0;
  std::uint64_t bytes = 0;
  double busy_ms = 0.0;
  double gbps() const { return busy_ms > 0.0 ? static_cast<double>(bytes) / busy_ms / 1e6 : 0.0; }
};

/// Blocks that moved between G2 and the tier below it (G3).
struct LowerTierUsage {
  std::uint64_t declined = 0;           // offers the tier's admission declined (nothing written)
  std::uint64_t demoted = 0;            // G2 evictions (landings, write-through) whose write started
  std::uint64_t demotions_skipped = 0;  // held there already (written once)
  std::uint64_t demotions_refused = 0;  // no room for the write: the block was lost
  std::uint64_t promoted = 0;           // blocks read back into G2 for a swap-in, verified
  std::uint64_t promotions_failed = 0;  // reads that failed or did not verify: the request recomputes
};

/// The G2 tier under a G1 backend, with real copies (docs/offload.md):
/// swap-outs run on the offload stream, swap-ins on the onboard stream, each
/// transfer one batched copy submission followed by one event. Single-threaded:
/// the manager's thread calls every method; the streams do the copying.
/// With a lower tier (G3, docs/disk.md), a block G2 evicts is demoted into it
/// from its pinned G2 page, and a swap-in of a block only it holds reads the
/// block into a G2 page first (G3 -> pinned G2 -> G1).
class OffloadEngine final : public g1::OffloadTier {
 public:
  /// Allocates the G2 slab (pinned host memory, one contiguous chunk per
  /// block); throws ConfigError for an impossible configuration (a lower
  /// tier of another page size included) and the runtime's error when the
  /// allocation fails. `g1_pool` must outlive the engine.
  OffloadEngine(memory::Runtime& runtime, memory::KvPool& g1_pool, OffloadConfig config,
                std::unique_ptr<tiers::LowerTier> lower = nullptr);
  /// With several tiers below G2, nearest first (G3, then G4), of distinct media.
  OffloadEngine(memory::Runtime& runtime, memory::KvPool& g1_pool, OffloadConfig config,
                std::vector<std::unique_ptr<tiers::LowerTier>> lowers);
  /// Waits for every copy still running: none may outlive the pages it touches.
  ~OffloadEngine() override;
  OffloadEngine(const OffloadEngine&) = delete;
  OffloadEngine& operator=(const OffloadEngine&) = delete;

  void bind(KvEventPublisher& publisher, g1::G1Backend backend) override;
  void bind_groups(KvEventPublisher& publisher, std::vector<KvEventGroup> groups,
                   std::vector<std::uint64_t> fingerprints) override;
  std::vector<bool> holds(std::span<const PositionalLineageHash> plhs) override;
  g1::SwapOutTicket swap_out(std::span<const g1::EvictedBlock> victims) override;
  g1::TierProgress poll(bool wait) override;
  std::optional<double> earliest_deadline_ms() const override;
  bool is_resident(SequenceHash hash) const override { return registry_.is_resident(hash); }
  g1::SwapInCopy prepare_swap_in(std::span<const PositionalLineageHash> plhs) override;
  void start_swap_in(std::uint64_t transfer, std::span<const PageId> g1_pages) override;
  g1::TransferState swap_in_state(std::uint64_t transfer) const override;
  g1::TransferState wait_swap_in(std::uint64_t transfer) override;
  void finish_swap_in(std::uint64_t transfer) override;
  g1::TierStats stats() const override;

  const OffloadConfig& config() const noexcept { return config_; }
  /// Pages of each staging ring (0: the small-page path is off).
  std::uint32_t staging_pages() const noexcept { return out_ring_ ? out_ring_->capacity() : 0; }
  /// Transfers that went through a staging ring.
  std::uint64_t staged_transfers() const noexcept { return staged_transfers_; }
  /// The G2 slab (tests corrupt it to exercise verify_swaps).
  memory::KvPool& host_pool() noexcept { return host_pool_; }
  /// Bytes of one page (G1 and G2 pages have the same layout).
  std::size_t page_bytes() const noexcept { return host_pool_.layout().page_bytes(); }
  /// The page of G2 holding `plh`, when resident.
  std::optional<G2Page> host_page(const PositionalLineageHash& plh) const { return registry_.resident_page(plh); }
  /// Every block resident in G2 with its page, in page order.
  std::vector<std::pair<G2Page, SequenceHash>> resident_blocks() const { return registry_.resident_blocks(); }
  /// Completed swap-outs (G1 -> G2) and swap-ins (G2 -> G1).
  const CopyUsage& swap_out_usage() const noexcept { return usage_[0]; }
  const CopyUsage& swap_in_usage() const noexcept { return usage_[1]; }
  /// How long allocating the G2 slab took (pinning is slow; `kvtier info` reports it).
  double host_allocation_seconds() const noexcept { return allocation_seconds_; }
  /// Fails the Nth copy batch this engine submits from now (1 = the next);
  /// HostRuntime only: ContractError on CUDA.
  void inject_copy_fault(std::uint64_t nth);
  /// The nearest tier below G2 (G3 when there is one); nullptr without one.
  const tiers::LowerTier* lower_tier() const noexcept { return lowers_.empty() ? nullptr : lowers_.front().get(); }
  tiers::LowerTier* lower_tier() noexcept { return lowers_.empty() ? nullptr : lowers_.front().get(); }
  /// The tier below G2 of that medium (Disk: G3, External: G4); nullptr without one.
  const tiers::LowerTier* lower_tier(StorageTier medium) const noexcept;
  tiers::LowerTier* lower_tier(StorageTier medium) noexcept;
  /// The nearest tier's usage, or that of the tier of `medium` (zeros without one).
  const LowerTierUsage& lower_usage() const noexcept { return lower_usage(lower_medium(0)); }
  const LowerTierUsage& lower_usage(StorageTier medium) const noexcept;

 private:
  enum class Direction : std::uint8_t { SwapOut, SwapIn };
  struct Transfer {
    Direction direction;
    std::vector<PageId> g1_pages;
    std::vector<G2Page> g2_pages;
    memory::Event done;
    std::size_t bytes = 0;
    double started_ms = 0.0;
    g1::TransferState state = g1::TransferState::Pending;
    bool started = true;    // a prepared swap-in waits for its G1 pages
    bool submitted = true;  // its copy was enqueued (a swap-in waits for its lower-tier reads too)
    bool reported = false;  // a swap-in's end was listed by poll already
    // A swap-in's blocks read from the lower tier into Landing G2 pages first.
    std::vector<bool> pinned{};                 // per G2 page: pinned by this swap-in
    std::vector<std::size_t> lower_unissued{};  // positions whose read waits for room
    std::vector<std::uint8_t> lower_source{};   // per position: the index of the tier it is read from
    std::size_t lower_pending = 0;              // positions not yet read (issued or not)
    bool lower_failed = false;
  };
  /// A read of the lower tier into a swap-in's G2 pages; an abandoned
  /// swap-in's reads (transfer 0) still land when they end.
  struct LowerLoad {
    std::size_t tier = 0;  // index into lowers_
    std::uint64_t transfer = 0;
    std::vector<G2Page> pages;
    std::vector<std::size_t> positions;
  };

  double now_ms() const;
  /// Enqueues the transfer's pages as one batched copy (or through the
  /// staging ring) and records its event.
  void submit(std::uint64_t id, Transfer& transfer);
  /// Gathers/scatters the pages through `ring` in ring-sized chunks, in stream order.
  void submit_staged(memory::Stream& stream, memory::KvPool& ring, const Transfer& transfer,
                     std::span<const PageId> host_pages);
  /// Reads the transfer's event (waiting when asked) and notes how it ended.
  g1::TransferState settle(std::uint64_t id, Transfer& transfer, bool wait);
  void learn_bandwidth(const Transfer& transfer);
  void count_usage(const Transfer& transfer);
  std::uint64_t checksum(G2Page page) const;
  Transfer& swap_in(std::uint64_t transfer);
  const Transfer& swap_in(std::uint64_t transfer) const;
  void publish_stored(StorageTier tier, const g1::TieredBlock& block);
  /// Removed events of `blocks` (with groups, one per group, with its group_idx).
  void publish_removed(StorageTier tier, std::vector<g1::TieredBlock> blocks);
  /// Offers a block G2 evicted from `page` (still holding its bytes) to the tiers below.
  void demote(G2Page page, const HostBlockRegistry::Eviction& evicted);
  /// Starts writing the block `page` holds into lower tier `tier` (counted in its usage).
  /// False when the tier's admission declined it (nothing written).
  bool offer_to_lower(std::size_t tier, G2Page page, const g1::TieredBlock& block);
  StorageTier lower_medium(std::size_t tier) const noexcept {
    return tier < lowers_.size() ? lowers_[tier]->medium() : StorageTier::Disk;
  }
  /// Reserves a G2 page for `block` (demoting what it evicts); nullopt when none is free.
  std::optional<G2Page> reserve_page(const g1::TieredBlock& block, std::vector<g1::TieredBlock>& removed);
  /// Issues the transfer's waiting lower-tier reads while the tier has room.
  void issue_lower_reads(std::uint64_t id, Transfer& transfer);
  /// Applies what lower tier `tier` finished: its events, and reads landing in G2.
  void apply_lower(std::size_t tier, tiers::LowerTierProgress progress);
  void land_lower_read(std::size_t tier, const tiers::LowerRead& read);
  /// The swap-in's lower-tier blocks all ended: its copy starts, or it fails.
  void lower_settled(std::uint64_t id, Transfer& transfer);
  /// Drives the lower tier until the swap-in's reads all ended.
  void wait_lower(std::uint64_t id, Transfer& transfer);

  memory::Runtime& runtime_;
  memory::KvPool& g1_pool_;
  OffloadConfig config_;
  double allocation_seconds_ = 0.0;
  memory::KvPool host_pool_;
  HostBlockRegistry registry_;
  // Declared after the G2 slab: it is closed (its reads landed) before the slab goes.
  std::vector<std::unique_ptr<tiers::LowerTier>> lowers_;
  std::map<std::pair<std::size_t, std::uint64_t>, LowerLoad> lower_loads_;  // by tier and its read id
  // G2 pages that came up from a lower tier (1 + its index) and no swap-in
  // has taken yet (0: none): a swap-in retried after its first try was
  // abandoned still counts them as that tier's hits.
  std::vector<std::uint8_t> promoted_pages_;
  std::vector<LowerTierUsage> lower_usages_;  // by tier index
  AdmissionFilter g2_admission_;
  std::vector<AdmissionFilter> lower_admissions_;  // by tier index
  // G2 pages whose block a write-through tier declined when it landed (bit =
  // tier index): the same stay's eviction is not a second offer.
  std::vector<std::uint8_t> declined_on_landing_;
  memory::Stream offload_stream_;
  memory::Stream onboard_stream_;  // its own stream: a swap-in never queues behind swap-outs
  // One ring per stream: stream order keeps a ring's next gather behind its last copy out.
  std::unique_ptr<memory::KvPool> out_ring_;
  std::unique_ptr<memory::KvPool> in_ring_;
  std::uint64_t staged_transfers_ = 0;
  KvEventPublisher* publisher_ = nullptr;
  // A manager with KV cache groups: each group's event fields and block
  // format (an engine bound without groups takes only blocks of format 0).
  std::vector<KvEventGroup> groups_;
  tiers::BlockFormats formats_{0};
  std::uint64_t format_refusals_ = 0;
  std::map<std::uint64_t, Transfer> transfers_;  // by id: submission order
  ProcessorSharingLink offload_link_;
  ProcessorSharingLink onboard_link_;
  std::chrono::steady_clock::time_point epoch_ = std::chrono::steady_clock::now();
  std::uint64_t next_transfer_ = 1;
  std::uint64_t submitted_batches_ = 0;
  std::uint64_t fault_at_batch_ = 0;
  std::uint64_t verify_failures_ = 0;
  std::uint64_t failed_transfers_ = 0;
  CopyUsage usage_[2];            // by Direction
  double busy_until_ms_[2] = {};  // end of the last counted interval, by Direction
};

}  // namespace kvtier::offload
