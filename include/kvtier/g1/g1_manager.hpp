#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kvtier/core/active_sequence.hpp"
#include "kvtier/core/kv_event_publisher.hpp"
#include "kvtier/core/model_geometry.hpp"
#include "kvtier/g1/computed_prefix.hpp"
#include "kvtier/g1/eviction_policy.hpp"
#include "kvtier/g1/g1_types.hpp"
#include "kvtier/g1/offload_tier.hpp"

namespace kvtier::g1 {

class BlockManager;    // a backend (csrc/g1/common/block_manager.hpp)
class GroupedBackend;  // the backend of a manager with KV cache groups

/// Validated construction settings of a G1Manager.
struct G1ManagerConfig {
  std::uint32_t capacity = 16384;
  std::uint32_t block_size = 64;
  std::uint32_t dp_rank = 0;
  G1Backend backend = G1Backend::Native;
  bool enable_prefix_caching = true;
  /// KVBM only: how the inactive pool picks victims.
  EvictionBackend eviction = EvictionBackend::Lineage;
  /// Native only, one group: an inactive order of kvtier's (lru2, lfu_da, arc,
  /// s3fifo, adaptive: docs/policies.md) instead of vLLM's LRU (nullopt, the
  /// spec's). ConfigError on KVBM, with groups, or for KVBM's own orders.
  std::optional<EvictionBackend> native_eviction{};
  /// KV cache groups (docs/spec/model-geometry.md). Empty: one
  /// full-attention group, today's manager. Native only: more than one group,
  /// or another kind, is a ConfigError on KVBM (Dynamo's KVBM has no hybrid support).
  std::vector<GroupSpec> groups{};
  /// false: the attention block size may be raised to cover a Mamba state
  /// (vLLM's _align_hybrid_block_size), and `block_size` becomes the hash unit.
  bool block_size_fixed = true;
};

/// Swap-in answers of the offload calls (docs/semantics.md §5.5).
enum class SwapInStatus : std::uint8_t { NoHits, Scheduled, BlockedOnG1Offload };
/// "no_hits", "scheduled" or "blocked_on_offload": the name the script and Python answer with.
const char* swap_in_status_name(SwapInStatus status) noexcept;
struct SwapInStart {
  SwapInStatus status = SwapInStatus::NoHits;
  std::uint64_t swap_in_id = 0;   // Scheduled
  std::size_t count = 0;          // Scheduled: blocks being copied in
  std::size_t from_lower = 0;     // Scheduled: of them, blocks read from a tier below G2 first
  std::size_t from_external = 0;  // Scheduled: of those, blocks from the shared store (G4)
  std::uint64_t offload_id = 0;   // BlockedOnG1Offload: the swap-out to wait for
};
/// A pinned G1 prefix (try_pin_g1_prefix); an empty prefix pins nothing (id 0).
struct G1PrefixPins {
  std::uint64_t id = 0;
  std::size_t blocks = 0;
};
struct SwapInRegistration {
  bool failed = false;         // the copy failed or was refused: nothing registered
  std::size_t registered = 0;  // new inactive G1 blocks
};
/// The offload tier's counters plus the G1 pages its copies still read.
struct OffloadStats {
  TierStats tier;
  std::size_t quarantined = 0;
  std::size_t swap_ins = 0;  // scheduled, not yet registered or reaped
};

/// Dynamo's `G1Manager` facade (generation N1): forwards every operation to
/// the backend chosen at construction. Contract violations throw
/// kvtier::ContractError and leave the manager unchanged; capacity
/// exhaustion is a G1Acquire value.
class G1Manager {
 public:
  /// Throws ConfigError for an impossible configuration.
  explicit G1Manager(G1ManagerConfig config, std::vector<std::shared_ptr<KvEventSink>> sinks = {});
  /// Dynamo's `new_with_eviction_backend`: always the KVBM backend.
  static G1Manager with_eviction_backend(G1ManagerConfig config, EvictionBackend eviction,
                                         std::vector<std::shared_ptr<KvEventSink>> sinks = {});
  ~G1Manager();
  G1Manager(G1Manager&&) noexcept;
  G1Manager(const G1Manager&) = delete;
  G1Manager& operator=(const G1Manager&) = delete;

  /// Processes one MoveBlock for `owner`. A Use must carry one PLH per full
  /// block ("PLHs must align with full blocks"); token id lists, where given,
  /// hold exactly block_size tokens.
  G1Acquire process_for_request(OwnerId owner, const MoveBlock& signal, std::size_t reusable_prefix_blocks = 0);
  /// The same without wrapping the signal in a MoveBlock (no copy of its lists).
  G1Acquire process_for_request(OwnerId owner, const UseSignal& signal, std::size_t reusable_prefix_blocks = 0);
  G1Acquire process_for_request(OwnerId owner, const DerefSignal& signal, std::size_t reusable_prefix_blocks = 0);
  /// A request's first Use reusing what computed_prefix found (vLLM's
  /// get_computed_blocks -> allocate_slots): as with `computed.blocks` as the
  /// reusable prefix, but the native backend pins the pages it found without
  /// looking them up again while its hash index is unchanged since the probe.
  G1Acquire process_for_request(OwnerId owner, const UseSignal& signal, const ComputedPrefix& computed);
  /// vLLM's get_computed_blocks: the resident leading run of `blocks`' full
  /// blocks (and, native, their pages) into `into`, which it returns.
  const ComputedPrefix& computed_prefix(std::span<const UniqueBlock> blocks, ComputedPrefix& into) const;
  /// Native: makes the blocks in [before/bs, after/bs) visible, then — when a
  /// sequence is given — promotes its computed tail, so a child is never
  /// published before its parent. KVBM: no-op.
  void finalize_computed_prefix(OwnerId owner, std::size_t before, std::size_t after,
                                ActiveSequence* sequence = nullptr);
  PrefillCost get_prefill_cost(const ActiveSequence& sequence) const;

  /// nullopt: capacity exhausted (nothing changed).
  std::optional<DecodeReservation> reserve_decode_blocks(std::size_t blocks);
  /// A Use draws its fresh pages from the reservation and cannot fail for capacity.
  G1Acquire process_decode_signal_for_request(OwnerId owner, const MoveBlock& signal,
                                              const DecodeReservation& reservation);
  void release_decode_reservation(DecodeReservation&& reservation);

  std::optional<DestinationReservation> reserve_destination_at(OwnerId owner, const ActiveSequence& sequence,
                                                               double eviction_now_ms = 0.0);
  void activate_destination(DestinationReservation&& reservation);
  void cancel_destination(DestinationReservation&& reservation);

  G1Metrics metrics() const;
  std::size_t num_active_blocks() const { return metrics().active_blocks; }
  std::size_t num_active_block_refs() const { return metrics().active_block_refs; }
  std::size_t num_inactive_blocks() const { return metrics().inactive_blocks; }
  double get_active_perc() const { return metrics().active_perc(); }
  std::uint32_t max_capacity() const noexcept { return config_.capacity; }
  std::uint32_t block_size() const noexcept { return config_.block_size; }
  std::uint32_t dp_rank() const noexcept { return config_.dp_rank; }
  G1Backend backend() const noexcept { return config_.backend; }
  bool enable_prefix_caching() const noexcept { return config_.enable_prefix_caching; }
  EvictionBackend eviction_backend() const noexcept { return config_.eviction; }

  bool has_owner(OwnerId owner) const;
  /// Physical page ids of the owner's blocks in request order — what a
  /// paged-attention kernel reads (ContractError for an unknown owner).
  std::span<const PageId> block_table(OwnerId owner) const;
  std::span<const UniqueBlock> owned_blocks(OwnerId owner) const;
  std::vector<OwnerId> owners() const;
  bool is_cached(SequenceHash hash) const;

  // KV cache groups (docs/spec/model-geometry.md; docs/semantics.md §7).
  /// More than one group, or a group other than full attention: the manager
  /// keeps a null page and takes requests (allocate_slots, finalize with the
  /// sequence, free_slots; the RequestDriver calls them), not MoveBlock signals.
  bool has_groups() const noexcept { return grouped_ != nullptr; }
  /// The resolved groups, when the config gave any (nullptr: one full-attention group).
  const ModelGeometry* geometry() const noexcept { return geometry_ ? &*geometry_ : nullptr; }
  std::size_t group_count() const noexcept { return geometry_ ? geometry_->group_count() : 1; }
  /// The owner's pages in `group` (the null page where a group no longer needs
  /// a position); group 0 of a manager without groups is block_table(owner).
  std::span<const PageId> block_table(OwnerId owner, std::size_t group) const;
  /// Active and inactive pages per group (the null page is never counted).
  std::vector<GroupUsage> group_usage() const;
  /// Per group, cached pages requests took as prefix hits since the start
  /// (a manager without groups: empty).
  std::vector<std::uint64_t> group_hit_pages() const;
  /// Per group, the fresh pages (not hits, not the null page) its tables took since the start.
  std::vector<std::uint64_t> group_fresh_pages() const;
  /// The null page, when the manager keeps one.
  std::optional<PageId> null_page() const;
  /// Gives `owner` slots for the first `tokens` tokens of `sequence`: a new
  /// owner first takes the cached prefix of `reuse_tokens` tokens (a multiple
  /// of the scheduler block size every group serves now), a running one first
  /// releases the blocks its computed length skips. Capacity exhausted: no
  /// group took a page. ContractError on a manager without groups.
  G1Acquire allocate_slots(OwnerId owner, const ActiveSequence& sequence, std::size_t tokens,
                           std::size_t reuse_tokens = 0);
  /// Releases the owner's pages, group by group, each table tail first.
  void free_slots(OwnerId owner);
  /// A new scheduler step: Mamba states cached before it may be hit.
  void begin_step();
  /// Pages allocate_slots gave since the last call to a group of another
  /// precision than the one that last wrote them: zero them before writing
  /// (vLLM #47574). Empty unless the groups' page formats differ in precision.
  std::vector<PageId> take_pages_to_zero();
  /// A manager with groups: the owner's pages in `group` (the null page left
  /// out) and each one's pattern identity — a block complete in `sequence`
  /// is its hash in that group (so a page two requests share has one), any
  /// other the owner's, group's and position's.
  /// Blocks [first_block, end_block) of the owner's table in `group` only
  /// (a replay writing what one step computed).
  GroupPatterns group_patterns(OwnerId owner, const ActiveSequence& sequence, std::size_t group,
                               std::size_t first_block = 0, std::size_t end_block = SIZE_MAX) const;
  std::size_t metadata_bytes() const;
  /// The backend's audit: InvariantError when the backend's state is inconsistent.
  void audit() const;
  std::vector<std::pair<PageId, SequenceHash>> registered_blocks() const;

  // Offload calls (docs/semantics.md §5, docs/offload.md). Without a tier they
  // answer "no engine, no hits"; a native manager refuses attach (for now).
  void attach_offload_engine(std::shared_ptr<OffloadTier> engine);
  bool has_offload_engine() const noexcept { return tier_ != nullptr; }
  std::optional<double> earliest_offload_deadline() const;
  /// The spec's tick with real copies: collects the transfers that ended
  /// (with `wait`, every one in flight), applies them, releases their
  /// quarantined G1 pages and reaps cancelled swap-ins whose copy stopped.
  TierProgress collect_offloads(bool wait = false);
  OffloadStats offload_stats() const;
  bool is_host_cached(SequenceHash hash) const { return tier_ != nullptr && tier_->is_resident(hash); }

  /// The offload tier's keys of the sequence's first `blocks` full blocks:
  /// PLHs on KVBM, native_tier_key of the sequence hash on native.
  std::vector<PositionalLineageHash> tier_keys(const ActiveSequence& sequence, std::size_t blocks) const;
  /// A manager with KV cache groups: what a swap-in before `sequence`'s first
  /// allocation brings back — the groups' fixed point over G1 and the tier
  /// for its first `prompt_tokens`, the G1 blocks to pin and the tier blocks
  /// to copy (group_tier_key). Nothing without a tier or beyond G1's own hit.
  SwapInPlan group_swap_in_plan(const ActiveSequence& sequence, std::size_t prompt_tokens) const;
  /// All of `plhs` registered in G1 (active or inactive) are pinned, or none
  /// (nullopt). An empty prefix pins nothing.
  std::optional<G1PrefixPins> try_pin_g1_prefix(std::span<const PositionalLineageHash> plhs);
  void release_g1_prefix_pins(G1PrefixPins&& pins);
  /// Starts copying the tier-resident prefix of `plhs` into fresh G1 pages.
  /// The pins are consumed: a scheduled swap-in keeps them until it is
  /// registered or reaped, every other answer releases them.
  SwapInStart try_batch_swap_in(std::span<const PositionalLineageHash> plhs, std::optional<G1PrefixPins> prefix_pins,
                                double now_ms = 0.0);
  /// true if `swap_in_id` was a live swap-in; its pages are released once its copy has stopped.
  bool cancel_swap_in(std::uint64_t swap_in_id);
  /// Waits for the swap-in's copy, then registers its blocks as inactive G1
  /// blocks (Device Stored, parent = the block before them) and drops its pins.
  SwapInRegistration register_completed_swap_in(std::uint64_t swap_in_id);

 private:
  /// The backend config_ asks for (config_.block_size becomes a hybrid model's hash unit).
  std::unique_ptr<BlockManager> make_backend();
  void check_handle(std::uint64_t manager, G1Backend backend, const char* what) const;
  /// Shape checks every backend shares: PLHs align with the full blocks, token
  /// id lists hold block_size tokens.
  void validate_signal(const MoveBlock& signal) const;
  void validate_use(const UseSignal& use) const;
  void check_token_ids(const std::vector<TokenId>& tokens) const;

  G1ManagerConfig config_;
  std::uint64_t id_;
  std::unique_ptr<KvEventPublisher> publisher_;  // on the heap: the backend keeps a reference across moves
  // Set while backend_ is made (declared before it): the groups and, for a hybrid model, its backend.
  std::optional<ModelGeometry> geometry_;
  GroupedBackend* grouped_ = nullptr;
  std::unique_ptr<BlockManager> backend_;
  struct SwapInLease {
    std::uint64_t slots = 0;
    std::uint64_t pins = 0;  // 0: none
    std::vector<TieredBlock> blocks;
    bool cancelled = false;
  };
  void release_lease(const SwapInLease& lease);
  void reap_cancelled_swap_ins();
  std::shared_ptr<OffloadTier> tier_;
  std::unordered_map<std::uint64_t, SwapInLease> swap_ins_;  // by transfer id
};

}  // namespace kvtier::g1
