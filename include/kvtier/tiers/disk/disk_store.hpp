#pragma once
// G3's store: blocks in the fixed-size slots of one file, written and read
// through io_uring, indexed by positional lineage hash and evicted in LRU
// order. A slot is visible only once its write completed; a read serves a
// block only when its header and payload checksums verify; the index is
// rebuilt from the slots' headers when the store is opened again.
//   Free -> Writing (a write in flight: found by contains(), never read)
//   Writing -> Resident (the write completed) | Free (it failed)
// A write is two ordered writes: the payload with a zeroed header region,
// then, once that completed, the header. A process killed at any point
// leaves each slot as its old record, as no record, or as a header whose
// checksum fails — never a header that vouches for bytes not on disk.
//   Resident -> pinned while reads use it; evictable (LRU) when not
#include <cstdint>
#include <filesystem>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kvtier/core/kv_layout.hpp"
#include "kvtier/g1/offload_tier.hpp"
#include "kvtier/tiers/disk/direct_file.hpp"
#include "kvtier/tiers/disk/io_queue.hpp"
#include "kvtier/tiers/disk/slot_scan.hpp"

namespace kvtier::tiers::disk {

struct DiskStoreConfig {
  std::filesystem::path file;  // created when missing
  std::uint32_t slots = 0;     // the tier's capacity in blocks
  unsigned queue_depth = 32;   // I/O operations in flight
  /// Discard what the file holds when it is another layout's (otherwise a ConfigError).
  bool reformat = false;
};

struct DiskStoreStats {
  std::uint64_t blocks_written = 0;
  std::uint64_t blocks_read = 0;
  std::uint64_t bytes_written = 0;
  std::uint64_t bytes_read = 0;
  std::uint64_t write_failures = 0;     // failed or short writes: the block never became visible
  std::uint64_t read_failures = 0;      // failed or short reads
  std::uint64_t checksum_failures = 0;  // reads whose header or payload did not verify
  std::uint64_t evictions = 0;
};

class DiskStore {
 public:
  /// Opens the store and recovers what its file holds. ConfigError: the file
  /// cannot be opened or sized, io_uring is unavailable, or the file holds
  /// another layout's blocks and `reformat` is off.
  DiskStore(const DiskStoreConfig& config, const KvLayout& layout);
  DiskStore(const DiskStore&) = delete;
  DiskStore& operator=(const DiskStore&) = delete;
  /// Waits for the I/O in flight (its buffers are the store's).
  ~DiskStore();

  std::uint32_t capacity() const noexcept { return static_cast<std::uint32_t>(slots_.size()); }
  /// Writing or resident slots.
  std::size_t used() const noexcept { return slots_.size() - free_.size(); }
  bool direct_io() const noexcept { return file_.direct(); }
  const SlotGeometry& geometry() const noexcept { return geometry_; }
  /// What the file held when the store was opened.
  const SlotScan& recovered() const noexcept { return recovered_; }
  const DiskStoreStats& stats() const noexcept { return stats_; }

  /// Resident or being written: the presence filter of a demotion.
  bool contains(const PositionalLineageHash& plh) const { return index_.contains(plh); }
  /// The length of the longest run of `plhs`, from the first, resident here.
  std::size_t resident_prefix(std::span<const PositionalLineageHash> plhs) const;

  enum class WriteStart : std::uint8_t { Started, Present, NoRoom };
  /// Starts writing `block` with `payload` (one page, copied: the caller's
  /// page is free when this returns) into a free slot, or the LRU victim's
  /// (its sequence hash is appended to `evicted`). NoRoom: every slot is
  /// being written or read, or the I/O queue is full; nothing changed.
  /// Queued writes are submitted together by the next poll or read.
  WriteStart write(const g1::TieredBlock& block, std::span<const std::byte> payload,
                   std::vector<SequenceHash>& evicted);

  /// Starts reading the resident blocks `plhs` (at most the queue depth, all
  /// resident: ContractError otherwise) into `pages` (one page each, valid
  /// until the read is reported). nullopt when the queue has no room now.
  std::optional<std::uint64_t> read(std::span<const PositionalLineageHash> plhs, std::span<std::byte* const> pages);

  struct ReadDone {
    std::uint64_t id = 0;
    /// Per block: its page holds its verified bytes. A block that did not
    /// verify was dropped from the store (its hash is in Progress::dropped).
    std::vector<bool> ok;
    std::vector<g1::TieredBlock> blocks;
  };
  struct Progress {
    std::vector<g1::TieredBlock> stored;  // writes that became visible
    std::vector<SequenceHash> dropped;    // blocks removed because a read did not verify
    std::vector<ReadDone> reads;          // reads whose every block ended
  };
  /// Collects the I/O that ended; with `wait`, every operation in flight.
  Progress poll(bool wait);

 private:
  enum class State : std::uint8_t { Free, Writing, Resident };
  struct Slot {
    State state = State::Free;
    std::uint32_t pins = 0;
    bool bad = false;  // a read of it did not verify: dropped when its last read ends
    g1::TieredBlock block;
    std::list<std::uint32_t>::iterator lru;  // valid while Resident and unpinned
  };
  enum class Phase : std::uint8_t { Payload, Header, Read };
  struct Operation {
    Phase phase = Phase::Payload;
    std::uint32_t slot = 0;
    std::uint32_t buffer = 0;
    std::uint64_t read = 0;     // the read it belongs to
    std::size_t position = 0;   // its block's position in that read
    std::byte* page = nullptr;  // where a read's payload goes
  };
  struct PendingRead {
    ReadDone done;
    std::size_t remaining = 0;
  };

  std::byte* buffer(std::uint32_t b) const noexcept { return buffers_.get() + std::size_t{b} * geometry_.slot_bytes; }
  void make_evictable(std::uint32_t slot);
  void free_slot(std::uint32_t slot);
  void finish(const IoQueue::Completion& completion, Progress& progress);

  struct AlignedFree {
    void operator()(std::byte* p) const noexcept;
  };

  DirectFile file_;
  SlotGeometry geometry_;
  std::uint64_t fingerprint_;
  IoQueue queue_;
  SlotScan recovered_;
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_;
  std::list<std::uint32_t> lru_;  // evictable resident slots, least recently used first
  std::unordered_map<PositionalLineageHash, std::uint32_t> index_;
  std::unique_ptr<std::byte[], AlignedFree> buffers_;  // one slot's bytes per operation in flight
  std::vector<std::uint32_t> free_buffers_;
  std::unordered_map<std::uint64_t, Operation> operations_;  // by tag
  std::unordered_map<std::uint64_t, PendingRead> reads_;
  std::uint64_t next_tag_ = 1;
  std::uint64_t next_read_ = 1;
  std::uint64_t next_generation_ = 1;
  DiskStoreStats stats_;
};

}  // namespace kvtier::tiers::disk
