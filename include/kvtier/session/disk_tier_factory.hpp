#pragma once
// Opens the G3 disk tier a session asks for: the one place that knows
// whether kvtier was built with liburing.
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "kvtier/core/kv_layout.hpp"
#include "kvtier/session/session_config.hpp"
#include "kvtier/tiers/lower_tier.hpp"

namespace kvtier::session {

/// True when this build has the io_uring disk tier.
bool disk_tier_available() noexcept;

/// The disk tier in `settings.path` for G2 pages of `g2_layout`'s geometry:
/// the directory is created when missing; the file's blocks are recovered.
/// ConfigError: a build without liburing, a directory that cannot be made,
/// a file in use by another process, another layout's blocks (without
/// reformat). When the file system refuses O_DIRECT the tier uses buffered
/// I/O and says so once on stderr.
std::unique_ptr<tiers::LowerTier> open_disk_tier(const DiskTierSettings& settings, const KvLayout& g2_layout);

/// What `kvtier info` and the script's init tell of a disk tier.
struct DiskTierFacts {
  bool direct_io = false;        // false: the file system refused O_DIRECT (buffered I/O)
  std::uint64_t slot_bytes = 0;  // a block on disk: header region + page
  std::uint64_t file_bytes = 0;  // the slots' file at full capacity
};
/// Facts of a tier open_disk_tier made (all zero for another kind of tier).
DiskTierFacts disk_tier_facts(const tiers::LowerTier& tier) noexcept;

/// The disk tier's usage and counters under the names the script's `stats`
/// and Python's `metrics()` give them (disk_used, disk_capacity, ...).
std::vector<std::pair<const char*, std::uint64_t>> disk_tier_counters(const tiers::LowerTier& tier);

}  // namespace kvtier::session
