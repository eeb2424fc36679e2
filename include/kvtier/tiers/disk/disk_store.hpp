#pragma once
// G3's store: blocks in the fixed-size slots of one file, written and read
// through io_uring, indexed by positional lineage hash and evicted in LRU
// order. A slot is visible only once its write completed; a read serves a
// block only when its header and payload checksums (and, with a tier key,
// its MAC) verify; the index is rebuilt from the slots' headers when the
// store is opened again.
//   Free -> Writing (a write in flight: found by contains(), never read)
//   Writing -> Resident (the write completed) | Free (it failed)
//   Resident -> Invalidating (a read did not verify: its header is zeroed,
//     so a restart cannot find it again) -> Free
// A write is one I/O of the whole slot: the record's header, which holds the
// payload's XXH3 (and, with a key, its MAC), then the payload. A record counts
// only when its payload matches the header, and every read checks that before
// a byte is copied out: a write torn anywhere (a process killed mid-write, a
// power loss) leaves a slot that is either its old record whole, its new one
// whole, or one whose check fails at its first read, which drops it and
// zeroes its header. The restart's scan reads headers only; the payload
// behind each is checked when it is first read, as every read is.
// Under DiskSync::Batch a completed write waits (still Writing) for the next
// fdatasync, issued whenever writes are waiting and none is in flight.
//   Resident -> pinned while reads use it; evictable (LRU) when not
// An engine's rows (DiskStore's RowShape, an engine adapter's G3): records
// named by the engine's keys, moved in place between the file and pages the
// caller owns (one readv / writev of [header, page], no copy); a read writes
// the caller's page before it verified, and reports whether it did.
// Memory grows with the slots used, not with the capacity; a full file
// system (ENOSPC) turns into eviction: slots that never held a block are
// parked, and one is tried again only every kProbeEvery writes (or when
// nothing else is left) until a write to one succeeds.
#include <sys/uio.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <list>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kvtier/core/aligned_bytes.hpp"
#include "kvtier/core/kv_layout.hpp"
#include "kvtier/g1/offload_tier.hpp"
#include "kvtier/tiers/disk/direct_file.hpp"
#include "kvtier/tiers/disk/io_queue.hpp"
#include "kvtier/tiers/disk/slot_scan.hpp"
#include "kvtier/tiers/disk/tier_directory.hpp"
#include "kvtier/tiers/lower_tier.hpp"
#include "kvtier/tiers/tier_key.hpp"

namespace kvtier::tiers::disk {

/// When a written block counts as stored. None: once its write completed (it
/// is in the page cache or the device's cache: a process crash keeps it, a
/// power loss may not). Batch: once an fdatasync issued after its write
/// completed has completed; one fdatasync covers every write that completed
/// while the previous one ran (a group commit), so the cost is per batch,
/// not per block.
enum class DiskSync : std::uint8_t { None, Batch };

struct DiskStoreConfig {
  /// Created (0600, its directory 0700) when missing; refused when it is a
  /// link, another user's, not a kvtier tier file (left untouched), or in a
  /// directory others could write (tier_directory.hpp).
  std::filesystem::path file;
  std::uint32_t slots = 0;    // the tier's capacity in blocks
  unsigned queue_depth = 32;  // I/O operations in flight
  /// Blocks whose I/O may wait for room in the queue, beyond the queue depth
  /// (each holds one slot's aligned buffer): a burst of demotions is queued,
  /// not refused. A quarter of the buffers is kept for reads.
  unsigned backlog = 32;
  /// Discard what the file holds when it is another layout's, format
  /// version's or tier key's (otherwise a ConfigError). Never a file that is
  /// not a kvtier tier.
  bool reformat = false;
  /// With a key, every record is written with its MAC and only records with
  /// a valid one are served; a tier file written under another key (or
  /// none) is refused unless reformat.
  std::optional<TierKey> key{};
  /// A manager with KV cache groups: each group's block fingerprint
  /// (ModelGeometry::block_fingerprint), so a record serves only its group
  /// and format (BlockFormats). Empty: one layout.
  std::vector<std::uint64_t> group_formats{};
  DiskSync sync = DiskSync::None;
};

/// Faults a test or the script injects: the Nth operation of a kind that
/// completes from now (1 = the next; 0 = none) reports the given failure
/// instead of its real result, as the kernel would.
struct DiskFaults {
  std::uint64_t fail_write = 0;  // a block's write fails with write_errno
  int write_errno = ENOSPC;      // a full disk
  std::uint64_t fail_read = 0;   // a block read fails with EIO
  std::uint64_t short_read = 0;  // a block read comes back with half its bytes
  std::uint64_t fail_sync = 0;   // an fdatasync fails with EIO: the writes it covered are not stored
  /// A file system about to fill: this many more slots that never held a
  /// block can be written, then such writes fail with ENOSPC (a sparse file
  /// on a full disk); slots written before still take writes.
  std::optional<std::uint32_t> room_for_new_slots{};
};

class DiskStore final : public LowerTier {
 public:
  /// Opens the store and recovers what its file holds: the most recent
  /// blocks that fit when the file held more than `slots` (the rest are
  /// dropped and counted in recovered().dropped_on_shrink). ConfigError: the
  /// directory or file is refused (see DiskStoreConfig::file), the file
  /// system has no room for `slots` blocks, io_uring is unavailable, a queue
  /// depth and backlog that leave no buffer for writes, or the file holds
  /// another layout's, version's or key's blocks and `reformat` is off.
  /// AllocationError: the buffers or the index at full capacity would not
  /// fit the memory available.
  DiskStore(const DiskStoreConfig& config, const KvLayout& layout);
  /// A store of an engine's rows: only write_in_place and read_in_place,
  /// its I/O buffers a header each; blocks carry engine keys
  /// (engine_key_plh). ConfigError as above, and for a row size that is not
  /// a positive multiple of kRecordAlignment.
  DiskStore(const DiskStoreConfig& config, const RowShape& rows);
  DiskStore(const DiskStore&) = delete;
  DiskStore& operator=(const DiskStore&) = delete;
  /// Waits for the I/O in flight (its buffers are the store's).
  ~DiskStore() override;

  StorageTier medium() const noexcept override { return StorageTier::Disk; }
  std::size_t page_bytes() const noexcept override { return geometry_.payload_bytes; }
  std::uint32_t capacity() const noexcept override { return capacity_; }
  /// Writing or resident slots.
  std::size_t used() const noexcept override { return blocks_.size(); }
  bool direct_io() const noexcept { return file_.direct(); }
  const SlotGeometry& geometry() const noexcept { return geometry_; }
  /// What the file held when the store was opened.
  const SlotScan& recovered() const noexcept { return recovered_; }
  LowerTierStats stats() const override;
  /// Writes between two tries of a parked slot while the file system is full.
  static constexpr std::uint32_t kProbeEvery = 1024;
  /// The file system said ENOSPC: from then on the tier evicts to make room
  /// and leaves the slots that never held a block (parked) alone.
  bool disk_full() const noexcept { return disk_full_; }
  /// Slots the tier does not write while the file system is full.
  std::size_t parked_slots() const noexcept { return parked_.size() + (disk_full_ ? capacity_ - slots_.size() : 0); }

  bool contains(const PositionalLineageHash& plh) const override { return index_.contains(plh); }
  std::optional<g1::TieredBlock> find(const PositionalLineageHash& plh) const override;
  /// The length of the longest run of `plhs`, from the first, resident here.
  std::size_t resident_prefix(std::span<const PositionalLineageHash> plhs) const;
  std::vector<g1::TieredBlock> resident_blocks() const override;

  /// Starts writing `block` into a free slot, or the LRU victim's. NoRoom:
  /// every slot is being written or read, or every write buffer is taken.
  /// Queued writes are submitted together by the next poll or read.
  WriteStart write(const g1::TieredBlock& block, std::span<const std::byte> payload,
                   std::vector<g1::TieredBlock>& evicted) override;
  /// As write, the payload `page` written in place (kRecordAlignment-aligned,
  /// one page): it must stay unchanged until the write is reported stored or
  /// unstored by a poll.
  WriteStart write_in_place(const g1::TieredBlock& block, std::span<const std::byte> page,
                            std::vector<g1::TieredBlock>& evicted) override;
  std::size_t read_room() const noexcept override { return free_buffers_.size(); }
  /// Operations issued and not yet completed (queued, submitted or backlogged).
  std::size_t in_flight() const noexcept { return operations_.size(); }
  /// Reads every slot whole into an aligned buffer and copies the payload to
  /// its page only once the header and payload checksums verified.
  std::optional<std::uint64_t> read(std::span<const PositionalLineageHash> plhs,
                                    std::span<std::byte* const> pages) override;
  /// As read, into `pages` in place (kRecordAlignment-aligned): a page holds
  /// the block's bytes once its read is reported ok, and anything before.
  std::optional<std::uint64_t> read_in_place(std::span<const PositionalLineageHash> plhs,
                                             std::span<std::byte* const> pages) override;
  /// A use of a resident block: it becomes the most recently used.
  void touch(const PositionalLineageHash& plh) override;
  /// A resident block nobody can use any more: it becomes the least recently used.
  void demote(const PositionalLineageHash& plh) override;
  LowerTierProgress poll(bool wait) override;
  /// Waits until at least one operation in flight ended (none in flight:
  /// returns at once), and collects what ended.
  LowerTierProgress wait_some() override;
  void inject_faults(const DiskFaults& faults);

 private:
  enum class State : std::uint8_t { Free, Writing, Resident, Invalidating };
  /// Small on purpose: one per slot used (the block itself is in blocks_).
  struct Slot {
    State state = State::Free;
    bool bad = false;           // a read of it did not verify: dropped when its last read ends
    bool write_failed = false;  // its write failed or was short
    bool no_space = false;      // ... with ENOSPC
    bool backed = false;        // it held a block once: the file system has its bytes
    std::uint32_t pins = 0;
    std::list<std::uint32_t>::iterator lru;  // valid while Resident and unpinned
  };
  enum class Phase : std::uint8_t { Write, Read, Invalidate, Sync };
  struct Operation {
    Phase phase = Phase::Write;
    std::uint32_t slot = 0;
    std::uint32_t buffer = 0;
    std::uint64_t read = 0;     // the read it belongs to
    std::size_t position = 0;   // its block's position in that read
    std::byte* page = nullptr;  // where a read's payload goes
    bool in_place = false;      // the payload is the caller's page (`page`, or `source` for a write)
    const std::byte* source = nullptr;
    std::array<iovec, 2> parts{};  // an in-place I/O's header and page, valid until it completes
  };
  struct PendingRead {
    LowerRead done;
    std::size_t remaining = 0;
  };
  /// Wall time with at least one operation of a kind in flight.
  struct BusyClock {
    std::size_t in_flight = 0;
    std::chrono::steady_clock::time_point since{};
    double seconds = 0.0;
    void start();
    void stop();
  };

  /// A buffer: one slot's bytes, as written or read (a row store's: a header's).
  std::byte* buffer(std::uint32_t b) const noexcept { return buffers_.get() + std::size_t{b} * buffer_bytes_; }
  /// Both public constructors: the slots, the records' fingerprint and the
  /// index's bytes per block at full capacity.
  DiskStore(const DiskStoreConfig& config, const SlotGeometry& geometry, std::uint64_t fingerprint,
            std::size_t index_bytes_per_block, bool rows);
  /// Recovers what the file holds (disk_store_open.cpp).
  void open_file(const DiskStoreConfig& config);
  WriteStart start_write(const g1::TieredBlock& block, std::span<const std::byte> payload,
                         std::vector<g1::TieredBlock>& evicted, bool in_place);
  std::optional<std::uint64_t> start_read(std::span<const PositionalLineageHash> plhs,
                                          std::span<std::byte* const> pages, bool in_place);
  void make_evictable(std::uint32_t slot);
  void free_slot(std::uint32_t slot);
  /// A slot for a new write: a free one, one never used, or none; `probe`:
  /// a parked or never used one first (the file system may have room again).
  std::optional<std::uint32_t> take_slot(bool probe);
  /// Zeroes the header of a slot whose block did not verify, then frees it.
  void invalidate(std::uint32_t slot);
  /// The first ENOSPC: the tier stops taking slots that never held a block.
  void note_disk_full();
  /// Hands the operation to the I/O queue, or to the backlog when it is full.
  void issue(std::uint64_t tag);
  /// Moves backlogged operations into the queue while it has room (reads first).
  void pump();
  void finish(const IoQueue::Completion& real, LowerTierProgress& progress);
  /// A slot whose write completed (and, under a sync policy, was synced) holds its block now.
  void make_resident(std::uint32_t slot, LowerTierProgress& progress);
  /// A write that did not reach the disk whole (or was not synced): the slot is free again.
  void fail_write(std::uint32_t slot, LowerTierProgress& progress);
  /// Under DiskSync::Batch: the fdatasync of what waits for one, unless one is in flight.
  void start_sync();
  void finish_sync(std::int64_t result, LowerTierProgress& progress);
  /// The result an injected fault turns `result` into.
  std::int64_t faulted(Phase phase, const Slot& slot, std::int64_t result);

  std::optional<TierKey> key_;
  const TierKey* key() const noexcept { return key_ ? &*key_ : nullptr; }
  std::optional<TierDirectory> directory_;
  DirectFile file_;
  SlotGeometry geometry_;
  bool rows_ = false;             // a row store: I/O in place only
  std::size_t buffer_bytes_ = 0;  // a slot's, or a row store's header's
  std::uint64_t fingerprint_;     // the layout's: the file's identity
  BlockFormats formats_;          // each record's
  std::uint32_t capacity_;
  IoQueue queue_;
  SlotScan recovered_;
  std::vector<Slot> slots_;                                    // the slots used so far: grows up to capacity_
  std::unordered_map<std::uint32_t, g1::TieredBlock> blocks_;  // of Writing and Resident slots
  std::vector<std::uint32_t> free_;
  std::list<std::uint32_t> lru_;  // evictable resident slots, least recently used first
  std::unordered_map<PositionalLineageHash, std::uint32_t> index_;
  AlignedBytes buffers_;        // one slot's bytes per operation in flight or backlogged
  AlignedBytes zeroed_header_;  // what an invalidation writes
  std::vector<std::uint32_t> free_buffers_;
  std::size_t read_reserve_ = 1;                             // buffers a write leaves for reads
  std::unordered_map<std::uint64_t, Operation> operations_;  // by tag
  std::deque<std::uint64_t> waiting_reads_;                  // tags the queue had no room for
  std::deque<std::uint64_t> waiting_writes_;
  std::unordered_map<std::uint64_t, PendingRead> reads_;
  std::uint64_t next_tag_ = 1;
  std::uint64_t next_read_ = 1;
  std::uint64_t next_generation_ = 1;
  LowerTierStats stats_;
  bool disk_full_ = false;
  std::vector<std::uint32_t> parked_;  // free slots that never held a block, while the file system is full
  DiskSync sync_ = DiskSync::None;
  std::vector<std::uint32_t> unsynced_;  // written, waiting for the next fdatasync
  std::vector<std::uint32_t> syncing_;   // written, covered by the fdatasync in flight
  bool sync_in_flight_ = false;
  std::uint64_t writes_while_full_ = 0;
  DiskFaults faults_;  // counted down as operations complete
  BusyClock write_clock_;
  BusyClock read_clock_;
};

}  // namespace kvtier::tiers::disk
