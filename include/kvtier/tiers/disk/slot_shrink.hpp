#pragma once
// Opening a G3 file with fewer slots than it has (docs/disk.md, "A smaller
// capacity"): the most recent blocks that fit move into the first slots, the
// rest are dropped and counted — never lost without a word.
#include <cstdint>

#include "kvtier/tiers/disk/direct_file.hpp"
#include "kvtier/tiers/disk/slot_scan.hpp"
#include "kvtier/tiers/tier_key.hpp"

namespace kvtier::tiers::disk {

/// Keeps the `capacity` newest blocks of `scan` (by generation), each in a
/// slot below `capacity`: a block beyond is read, verified (checksums and,
/// with `key`, MAC) and written into a free slot below — payload first, then
/// its header, so a kill leaves either copy whole. A dropped block below
/// `capacity` has its header zeroed. Updates `scan.resident` and returns the
/// blocks dropped (a block that failed to verify is counted corrupt instead).
/// The caller truncates the file after. TransferError when a read or write fails.
std::uint32_t shrink_slots(const DirectFile& file, const SlotGeometry& geometry, SlotScan& scan, std::uint32_t capacity,
                           const BlockFormats& formats, const TierKey* key);

}  // namespace kvtier::tiers::disk
