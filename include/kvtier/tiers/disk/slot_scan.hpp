#pragma once
// G3's file is its header (tier_file_header.hpp), then an array of
// fixed-size slots, each holding one block record (tiers/block_record.hpp).
// At open the tier rebuilds what it holds from the slots' headers: this scan.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvtier/core/kv_layout.hpp"
#include "kvtier/tiers/block_record.hpp"
#include "kvtier/tiers/disk/direct_file.hpp"
#include "kvtier/tiers/disk/io_queue.hpp"
#include "kvtier/tiers/disk/tier_file_header.hpp"
#include "kvtier/tiers/tier_key.hpp"

namespace kvtier::tiers::disk {

/// Where a slot's header and payload lie: the header region holds a record
/// header with a whole block's token ids, the payload (one page) follows it;
/// every part is a multiple of kRecordAlignment.
struct SlotGeometry {
  std::size_t header_bytes = 0;
  std::size_t payload_bytes = 0;
  std::size_t slot_bytes = 0;

  static SlotGeometry of(const KvLayout& layout) noexcept;
  /// Slots of an engine's rows (DiskStore's row shape): a header with room
  /// for the longest engine key and no token ids, then the row.
  static SlotGeometry of_rows(std::size_t row_bytes) noexcept;
  std::uint64_t offset(std::uint32_t slot) const noexcept {
    return kTierFileHeaderBytes + std::uint64_t{slot} * slot_bytes;
  }
  /// Bytes of a file of `slots` slots.
  std::uint64_t file_bytes(std::uint64_t slots) const noexcept { return kTierFileHeaderBytes + slots * slot_bytes; }
  /// Slots whose header lies (at least in part) in a file of `bytes` bytes.
  std::uint64_t slots_in(std::uint64_t bytes) const noexcept {
    return bytes <= kTierFileHeaderBytes ? 0 : (bytes - kTierFileHeaderBytes + slot_bytes - 1) / slot_bytes;
  }
};

struct ScannedSlot {
  std::uint32_t slot = 0;
  BlockRecordMeta meta;
};

/// What the headers of a file's slots say.
struct SlotScan {
  std::vector<ScannedSlot> resident;  // one per block: the newest generation, in slot order
  std::uint32_t empty = 0;            // no record: never written, or a write that did not complete its header
  std::uint32_t corrupt = 0;          // a torn or damaged header: the slot is free again
  std::uint32_t other_layout = 0;     // records of another layout fingerprint
  std::uint32_t other_version = 0;    // records of another record format version
  std::uint32_t unauthenticated = 0;  // records without this tier key's MAC id: never served, the slot is free again
  std::uint32_t superseded = 0;       // older copies of a block a newer generation holds
  std::uint64_t newest_generation = 0;
  /// Set by the store that opened the file (not by the scan):
  std::uint32_t dropped_on_shrink = 0;  // the oldest blocks a smaller capacity had no room for
  std::uint32_t discarded = 0;          // blocks a reformat threw away (of another layout, version or key)
  bool reformatted = false;             // the file was started anew (reformat)
};

/// Reads the header region of each of the first `slots` slots (a file shorter
/// than that counts the missing ones empty), `queue.depth()` reads in flight.
/// Payloads are checked when a block is read, not here: a restart reads
/// headers only. With `key`, a record of no key or another is not resident.
/// Throws TransferError when a read fails outright.
SlotScan scan_slots(const DirectFile& file, const SlotGeometry& geometry, std::uint64_t slots,
                    const BlockFormats& formats, IoQueue& queue, const TierKey* key = nullptr);

}  // namespace kvtier::tiers::disk
