#include "kvtier/replay/tier_report.hpp"

#include <string_view>

#include "kvtier/session/disk_tier_factory.hpp"
#include "kvtier/session/shared_tier_factory.hpp"

namespace kvtier::replay {

void read_disk_tier(const offload::OffloadEngine& engine, const tiers::LowerTier& disk, ReplayReport& report) {
  const tiers::LowerTierStats io = disk.stats();
  report.g3_blocks_written = io.blocks_written;
  report.g3_blocks_read = io.blocks_read;
  report.g3_bytes_written = io.bytes_written;
  report.g3_bytes_read = io.bytes_read;
  const auto gbps = [](std::uint64_t bytes, double seconds) {
    return seconds > 0.0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0;
  };
  report.g3_write_gbps = gbps(io.bytes_written, io.write_busy_s);
  report.g3_read_gbps = gbps(io.bytes_read, io.read_busy_s);
  report.g3_checksum_failures = io.checksum_failures;
  report.g3_io_failures = io.read_failures + io.write_failures;
  report.g3_demotions_refused = engine.lower_usage(StorageTier::Disk).demotions_refused;
  report.g3_admission_declined = engine.lower_usage(StorageTier::Disk).declined;
  report.g3_authentication_failures = io.authentication_failures;
  for (const auto& [name, value] : session::disk_tier_recovery(disk)) {
    const std::string_view field(name);
    if (field == "disk_slots_torn") report.g3_slots_torn = value;
    if (field == "disk_slots_superseded") report.g3_slots_superseded = value;
    if (field == "disk_slots_unauthenticated") report.g3_slots_unauthenticated = value;
    if (field == "disk_dropped_on_shrink") report.g3_dropped_on_shrink = value;
    if (field == "disk_discarded_by_reformat") report.g3_discarded_by_reformat = value;
    if (field == "disk_parked_slots") report.g3_parked_slots = value;
  }
}

void read_shared_tier(const offload::OffloadEngine& engine, const tiers::LowerTier& shared, ReplayReport& report) {
  const tiers::LowerTierStats io = shared.stats();
  report.g4_blocks_published = io.blocks_written;
  report.g4_publishes_refused = engine.lower_usage(StorageTier::External).demotions_refused;
  report.g4_admission_declined = engine.lower_usage(StorageTier::External).declined;
  report.g4_blocks_fetched = io.blocks_read;
  report.g4_bytes_fetched = io.bytes_read;
  report.g4_fetch_gbps = io.read_busy_s > 0.0 ? static_cast<double>(io.bytes_read) / io.read_busy_s / 1e9 : 0.0;
  report.g4_checksum_failures = io.checksum_failures;
  report.g4_authentication_failures = io.authentication_failures;
  for (const auto& [name, value] : session::shared_tier_counters(shared)) {
    const std::string_view field(name);
    if (field == "shared_already_present") report.g4_already_present = value;
    if (field == "shared_lookups") report.g4_lookups = value;
    if (field == "shared_values_missing") report.g4_values_missing = value;
    if (field == "shared_errors") report.g4_errors = value;
    if (field == "shared_other_version") report.g4_other_version = value;
    if (field == "shared_oversized") report.g4_oversized = value;
    if (field == "shared_answered") report.g4_answered = value;
    if (field == "shared_read_only") report.g4_read_only = value;
  }
}

}  // namespace kvtier::replay
