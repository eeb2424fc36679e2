#pragma once
// The seam below G2 (docs/architecture.md, "The lower-tier seam"): a tier
// that keeps blocks G2 evicted and hands them back into pinned G2 pages. The
// offload engine drives it from the manager's thread; its I/O runs
// asynchronously and is collected by poll. Every implementation keeps the
// same rules: a block is visible only once its write completed, a read
// serves only bytes that verified, a page handed to a read is written only
// by that read's completion, and a failure is a miss, never an exception.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kvtier/core/block_hash.hpp"
#include "kvtier/core/kv_event.hpp"
#include "kvtier/core/lineage_hash.hpp"
#include "kvtier/g1/offload_tier.hpp"

namespace kvtier::tiers {

/// Counters of a lower tier since it was opened.
struct LowerTierStats {
  std::uint64_t blocks_written = 0;
  std::uint64_t blocks_read = 0;
  std::uint64_t bytes_written = 0;
  std::uint64_t bytes_read = 0;
  std::uint64_t write_failures = 0;     // failed or short writes: the block never became visible
  std::uint64_t read_failures = 0;      // failed or short reads
  std::uint64_t checksum_failures = 0;  // reads whose header or payload did not verify (MAC failures included)
  /// Of those, records a tier key refused: no MAC of this key, or a MAC that
  /// does not match (someone wrote it without the key).
  std::uint64_t authentication_failures = 0;
  /// Blocks refused for their format: a write of a block not in its key's
  /// group format, or a record of another layout, group or page format.
  std::uint64_t format_refusals = 0;
  std::uint64_t evictions = 0;
  std::uint64_t writes_refused = 0;  // writes turned away for want of room (the block was not kept)
  std::uint64_t syncs = 0;           // G3 under a sync policy: fdatasyncs that made written blocks durable
  /// Wall time during which at least one write (read) was in flight, seen at
  /// poll time: an upper bound, so bytes / busy time is a floor on bandwidth.
  double write_busy_s = 0.0;
  double read_busy_s = 0.0;
};

/// A read whose every block ended.
struct LowerRead {
  std::uint64_t id = 0;
  /// Per block: its page holds the block's verified bytes. A block that did
  /// not verify was dropped from the tier (its hash is in `dropped`).
  std::vector<bool> ok;
  std::vector<g1::TieredBlock> blocks;
};

/// What one poll collected.
struct LowerTierProgress {
  std::vector<g1::TieredBlock> stored;    // writes that became visible
  std::vector<g1::TieredBlock> unstored;  // writes that failed (or were not synced): the block is not there
  std::vector<g1::TieredBlock> dropped;   // blocks removed because a read did not verify
  std::vector<LowerRead> reads;
};

class LowerTier {
 public:
  virtual ~LowerTier() = default;

  /// The medium its KV events name (Disk for G3, External for G4).
  virtual StorageTier medium() const noexcept = 0;
  /// The bytes of one block: one page of the G2 layout.
  virtual std::size_t page_bytes() const noexcept = 0;
  virtual std::uint32_t capacity() const noexcept = 0;
  /// True: the tier takes each block as it lands in G2, not only once G2
  /// evicts it (a shared tier: other instances hit a block while it is
  /// still in this one's G2; G2's eviction then finds it written).
  virtual bool write_through() const noexcept { return false; }
  /// Resident blocks and blocks being written.
  virtual std::size_t used() const noexcept = 0;
  /// Resident or being written: the presence filter of a demotion.
  virtual bool contains(const PositionalLineageHash& plh) const = 0;
  /// The block `plh` names when it is resident (readable now).
  virtual std::optional<g1::TieredBlock> find(const PositionalLineageHash& plh) const = 0;
  /// Of `plhs`, each block the tier holds and can read now (nullopt where
  /// it holds none), in one round trip for a remote tier; what it found is
  /// what find() answers until the tier learns otherwise.
  virtual std::vector<std::optional<g1::TieredBlock>> lookup(std::span<const PositionalLineageHash> plhs) {
    std::vector<std::optional<g1::TieredBlock>> found;
    found.reserve(plhs.size());
    for (const PositionalLineageHash& plh : plhs) found.push_back(find(plh));
    return found;
  }
  /// Every resident block, least recently used first (a shared tier: none;
  /// it does not list what other instances stored).
  virtual std::vector<g1::TieredBlock> resident_blocks() const = 0;

  enum class WriteStart : std::uint8_t { Started, Present, NoRoom };
  /// Starts writing `block` with `payload` (one page, copied before this
  /// returns), evicting the least recently used block when full (it is
  /// appended to `evicted`). NoRoom: nothing changed.
  virtual WriteStart write(const g1::TieredBlock& block, std::span<const std::byte> payload,
                           std::vector<g1::TieredBlock>& evicted) = 0;
  /// Blocks one read can take now.
  virtual std::size_t read_room() const noexcept = 0;
  /// Starts reading the resident blocks `plhs` (at most read_room()) into
  /// `pages`, each valid until the read is reported; they are pinned in the
  /// tier until then. nullopt when there is no room now.
  virtual std::optional<std::uint64_t> read(std::span<const PositionalLineageHash> plhs,
                                            std::span<std::byte* const> pages) = 0;
  /// Collects the I/O that ended; with `wait`, every operation in flight.
  virtual LowerTierProgress poll(bool wait) = 0;
  /// Waits until some operation in flight ended (at once when none is), and collects.
  virtual LowerTierProgress wait_some() { return poll(true); }

  // An engine's rows (tiers/rows/row_service.hpp): blocks named by engine
  // keys, moved from and to pages the engine owns.
  /// As write, with `page` the caller's until the write is reported stored
  /// or unstored by a poll: a tier that moves pages in place reads it then;
  /// by default it is copied now.
  virtual WriteStart write_in_place(const g1::TieredBlock& block, std::span<const std::byte> page,
                                    std::vector<g1::TieredBlock>& evicted) {
    return write(block, page, evicted);
  }
  /// As read; a page may be written before its block verified (and reported
  /// not ok), so only pages reported ok hold the block.
  virtual std::optional<std::uint64_t> read_in_place(std::span<const PositionalLineageHash> plhs,
                                                     std::span<std::byte* const> pages) {
    return read(plhs, pages);
  }
  /// A use of a block the tier holds (an engine's hit): its eviction order may take note.
  virtual void touch(const PositionalLineageHash&) {}
  /// A block the engine can no longer use (its prefix is gone): the first its
  /// eviction order takes, when it keeps one.
  virtual void demote(const PositionalLineageHash&) {}

  virtual LowerTierStats stats() const = 0;
};

}  // namespace kvtier::tiers
