#pragma once
// Opens the G3 disk tier a session asks for, and inspects one without
// changing it: the one place that knows whether kvtier was built with liburing.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kvtier/core/kv_layout.hpp"
#include "kvtier/session/session_config.hpp"
#include "kvtier/tiers/lower_tier.hpp"
#include "kvtier/tiers/tier_key.hpp"

namespace kvtier::session {

/// True when this build has the io_uring disk tier.
bool disk_tier_available() noexcept;

/// The disk tier in `settings.path` for G2 pages of `g2_layout`'s geometry,
/// its records authenticated with `key` when given: the directory is created
/// (0700) when missing; the file's blocks are recovered. ConfigError: a build
/// without liburing, a directory or file refused (a link, another user's, not
/// a kvtier tier), a file in use by another process, another layout's, format's
/// or key's blocks (without reformat), no room on the file system.
/// Says on stderr, once each: buffered I/O where the file system refuses
/// O_DIRECT; blocks a smaller capacity dropped; a reformat.
/// `group_formats`: a manager with KV cache groups, each group's block
/// fingerprint (tiers::BlockFormats).
std::unique_ptr<tiers::LowerTier> open_disk_tier(const DiskTierSettings& settings, const KvLayout& g2_layout,
                                                 const tiers::TierKey* key = nullptr,
                                                 std::vector<std::uint64_t> group_formats = {});

/// What `kvtier info` and the script's init tell of a disk tier.
struct DiskTierFacts {
  bool direct_io = false;        // false: the file system refused O_DIRECT (buffered I/O)
  std::uint64_t slot_bytes = 0;  // a block on disk: header region + page
  std::uint64_t file_bytes = 0;  // the slots' file at full capacity
};
/// Facts of a tier open_disk_tier made (all zero for another kind of tier).
DiskTierFacts disk_tier_facts(const tiers::LowerTier& tier) noexcept;

/// What a directory's disk tier holds, read without changing anything.
struct DiskTierInspection {
  std::filesystem::path file;
  bool exists = false;           // the directory and its tier file are there
  std::string state = "absent";  // "ok", or why a session would refuse the file ("not a kvtier tier file", ...)
  std::uint64_t file_bytes = 0;
  std::uint64_t slot_bytes = 0;
  std::uint64_t slots = 0;            // slots the file has room for
  std::uint64_t blocks = 0;           // blocks it holds (newest copy of each)
  std::uint64_t torn = 0;             // slots with a torn or damaged header
  std::uint64_t superseded = 0;       // older copies of a block
  std::uint64_t other_layout = 0;     // records of another layout or version
  std::uint64_t unauthenticated = 0;  // records without the key's MAC id
  /// With a capacity given: the oldest blocks opening it with that capacity would drop.
  std::uint64_t would_drop = 0;
};
/// Reads the tier in `directory` for G2 pages of `g2_layout` (read-only: no
/// directory or file is made, sized, locked or written). ConfigError: a build
/// without liburing, a directory or file refused as open_disk_tier would.
DiskTierInspection inspect_disk_tier(const std::filesystem::path& directory, const KvLayout& g2_layout,
                                     std::optional<std::uint32_t> capacity, const tiers::TierKey* key = nullptr);

/// What opening the tier found and did: torn, superseded and unauthenticated
/// slots, blocks a smaller capacity dropped or a reformat discarded, and the
/// slots parked since the file system filled (disk_slots_torn, ...; empty
/// for another kind of tier).
std::vector<std::pair<const char*, std::uint64_t>> disk_tier_recovery(const tiers::LowerTier& tier);

/// The disk tier's usage and counters under the names the script's `stats`
/// and Python's `metrics()` give them (disk_used, disk_capacity, ...,
/// and disk_tier_recovery's).
std::vector<std::pair<const char*, std::uint64_t>> disk_tier_counters(const tiers::LowerTier& tier);

}  // namespace kvtier::session
