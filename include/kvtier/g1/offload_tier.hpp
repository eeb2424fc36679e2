#pragma once
// The seam between a G1 backend and the tier below it (docs/offload.md). The
// G1 layer decides what moves and when; an OffloadTier (offload::OffloadEngine)
// keeps the G2 registry and moves the bytes. Both sides are driven from the
// manager's thread only; the copies themselves run on the tier's streams.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kvtier/core/block_hash.hpp"
#include "kvtier/core/kv_event_publisher.hpp"
#include "kvtier/core/lineage_hash.hpp"
#include "kvtier/core/strong_id.hpp"
#include "kvtier/g1/g1_types.hpp"

namespace kvtier::g1 {

/// The tier key of a native block: the native backend keys blocks by
/// sequence hash, carried whole in the key's low word (KVBM keys by the
/// block's positional lineage hash).
inline PositionalLineageHash native_tier_key(SequenceHash hash) noexcept {
  return PositionalLineageHash::from_raw(0, hash.value());
}

/// The tier key of `hash`'s block of KV cache group `group` on a manager
/// with groups: the group in the high word (group 0 keys as native_tier_key).
inline PositionalLineageHash group_tier_key(SequenceHash hash, std::size_t group) noexcept {
  return PositionalLineageHash::from_raw(group, hash.value());
}

/// A registered block as the tiers remember it (docs/semantics.md §5.2): what
/// a HostPinned Stored and a swap-in registration need.
struct TieredBlock {
  PositionalLineageHash plh;
  SequenceHash hash;
  std::optional<SequenceHash> parent;
  LocalBlockHash local;
  std::optional<std::vector<TokenId>> token_ids;
  /// On a manager with groups, the fingerprint of its group's pages
  /// (ModelGeometry::block_fingerprint of plh.high()): a tier takes and
  /// serves the block only under that group's. 0 without groups.
  std::uint64_t format = 0;
  /// A block an engine stores through a tier on its own (an engine adapter:
  /// vLLM's offload key, block hash and group): its key bytes, kept whole in
  /// the record and compared on every read and at a restart. Empty for
  /// kvtier's own blocks.
  std::vector<std::byte> engine_key{};
};

/// What a swap-in brings back: the hit it makes (in tokens), the G1 blocks
/// of it to pin while room is made, and the tier blocks to copy in. With KV
/// cache groups the hit is the groups' fixed point over G1 and the tier and
/// the keys are group_tier_key, fetched by position and then group. Empty
/// `fetch`: nothing to do.
struct SwapInPlan {
  std::size_t tokens = 0;
  std::vector<PositionalLineageHash> pin;
  std::vector<PositionalLineageHash> fetch;
};

/// A registered block taken out of G1 by eviction; `page` still holds its bytes.
struct EvictedBlock {
  PageId page;
  TieredBlock block;
};

/// What the tier did with one eviction's victims.
struct SwapOutTicket {
  /// Victim pages a copy now reads: quarantined until that copy has stopped.
  std::vector<PageId> quarantined;
  /// The transfer whose end releases the last of them (0 when none).
  std::uint64_t transfer = 0;
};

/// What one poll of the tier found and applied.
struct TierProgress {
  std::vector<std::uint64_t> completed;  // transfer ids that ended (also failed ones), in order
  std::vector<std::uint64_t> failed;     // the subset whose copy failed
  std::vector<PageId> released;          // quarantined G1 pages whose copy has stopped
};

enum class TransferState : std::uint8_t { Pending, Complete, Failed };

/// A swap-in the tier prepared: the first `blocks.size()` requested blocks
/// (fewer when one is missing or fails integrity checking), in order.
struct SwapInCopy {
  std::uint64_t transfer = 0;
  std::vector<TieredBlock> blocks;
  /// Of them, blocks that come from a tier below G2 (read into G2 first).
  std::size_t from_lower = 0;
  /// Of those, blocks from a store shared by instances (G4; the rest from G3).
  std::size_t from_external = 0;
};

struct TierStats {
  std::size_t used = 0;  // resident + landing blocks
  std::size_t capacity = 0;
  std::size_t in_flight = 0;  // transfers no poll has collected yet
  std::uint64_t verify_failures = 0;
  std::uint64_t failed_transfers = 0;
  /// Blocks refused for a format or group that is not the one their key names.
  std::uint64_t format_refusals = 0;
  /// Evicted blocks the tier's admission declined (docs/policies.md): not stored.
  std::uint64_t admission_declined = 0;
};

class OffloadTier {
 public:
  virtual ~OffloadTier() = default;

  /// Called once when a manager attaches the tier: HostPinned events go to
  /// the manager's publisher, so ids stay one sequence; the backend picks the
  /// tier's eviction (KVBM: Lineage by PLH, §5.1; native: LRU, §5.6).
  virtual void bind(KvEventPublisher& publisher, G1Backend backend) = 0;
  /// A manager with KV cache groups binds with each group's event fields and
  /// block fingerprint (index = the group in a tier key's high word): the
  /// tier's events carry group_idx, and a block whose format is not its
  /// group's is refused and counted (TierStats::format_refusals).
  virtual void bind_groups(KvEventPublisher& publisher, std::vector<KvEventGroup> groups,
                           std::vector<std::uint64_t> fingerprints) = 0;
  /// Of `plhs`, which the tier holds now: resident in G2, or readable in a
  /// tier below it (one lookup round trip per lower tier).
  virtual std::vector<bool> holds(std::span<const PositionalLineageHash> plhs) = 0;
  /// The eviction site: copies the victims not resident or landing already
  /// (presence filter) into reserved tier pages, in batches, and answers which
  /// sources it now reads. Victims it cannot take (no room) are dropped.
  virtual SwapOutTicket swap_out(std::span<const EvictedBlock> victims) = 0;
  /// Collects the transfers that ended (with `wait`, every one in flight) and
  /// applies them: swap-outs register in the tier (HostPinned Stored) or are
  /// dropped on failure; their sources are released either way.
  virtual TierProgress poll(bool wait) = 0;
  /// An estimate of when the next transfer ends (processor-sharing model).
  virtual std::optional<double> earliest_deadline_ms() const = 0;

  virtual bool is_resident(SequenceHash hash) const = 0;
  /// Pins the longest run of `plhs`, from the first, resident in the tier
  /// (with integrity checking, up to the first block that fails it), so no
  /// eviction can take them while G1 makes room. No blocks: nothing pinned.
  /// A tier with a tier below it also starts reading the run's blocks that
  /// only that tier holds; the swap-in copies once they arrived, and fails
  /// when one of them does not verify.
  virtual SwapInCopy prepare_swap_in(std::span<const PositionalLineageHash> plhs) = 0;
  /// Copies the prepared blocks into `g1_pages` (one page per block).
  virtual void start_swap_in(std::uint64_t transfer, std::span<const PageId> g1_pages) = 0;
  virtual TransferState swap_in_state(std::uint64_t transfer) const = 0;
  /// Blocks until the swap-in's copy has stopped; answers how it ended.
  virtual TransferState wait_swap_in(std::uint64_t transfer) = 0;
  /// Unpins the swap-in's tier blocks and forgets it. Precondition: it was
  /// never started, or its copy has stopped.
  virtual void finish_swap_in(std::uint64_t transfer) = 0;

  virtual TierStats stats() const = 0;
};

}  // namespace kvtier::g1
