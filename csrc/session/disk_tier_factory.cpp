#include "kvtier/session/disk_tier_factory.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>

#include "kvtier/core/errors.hpp"

#if KVTIER_WITH_URING
#include "kvtier/tiers/disk/disk_store.hpp"
#include "kvtier/tiers/disk/tier_file_header.hpp"
#endif

namespace kvtier::session {

bool disk_tier_available() noexcept { return KVTIER_WITH_URING != 0; }

std::vector<std::pair<const char*, std::uint64_t>> disk_tier_counters(const tiers::LowerTier& tier) {
  const tiers::LowerTierStats io = tier.stats();
  std::vector<std::pair<const char*, std::uint64_t>> counters{
      {"disk_used", tier.used()},
      {"disk_capacity", tier.capacity()},
      {"disk_blocks_written", io.blocks_written},
      {"disk_blocks_read", io.blocks_read},
      {"disk_checksum_failures", io.checksum_failures},
      {"disk_authentication_failures", io.authentication_failures},
      {"disk_io_failures", io.read_failures + io.write_failures},
      {"disk_syncs", io.syncs}};
  for (const auto& fact : disk_tier_recovery(tier)) counters.push_back(fact);
  return counters;
}

#if KVTIER_WITH_URING

std::unique_ptr<tiers::LowerTier> open_disk_tier(const DiskTierSettings& settings, const KvLayout& g2_layout,
                                                 const tiers::TierKey* key, std::vector<std::uint64_t> group_formats) {
  auto store = std::make_unique<tiers::disk::DiskStore>(
      tiers::disk::DiskStoreConfig{
          .file = settings.path / kDiskTierFile,
          .slots = settings.blocks,
          .queue_depth = settings.queue_depth,
          .backlog = settings.backlog,
          .reformat = settings.reformat,
          .key = key != nullptr ? std::optional<tiers::TierKey>(*key) : std::nullopt,
          .group_formats = std::move(group_formats),
          .sync = settings.sync_batch ? tiers::disk::DiskSync::Batch : tiers::disk::DiskSync::None},
      g2_layout);
  static std::atomic<bool> said{false};
  if (!store->direct_io() && !said.exchange(true)) {
    std::fprintf(stderr, "kvtier: the file system of %s refuses O_DIRECT; the disk tier uses buffered I/O\n",
                 settings.path.c_str());
  }
  const tiers::disk::SlotScan& found = store->recovered();
  if (found.reformatted) {
    std::fprintf(stderr, "kvtier: the disk tier in %s was reformatted: %u blocks discarded\n", settings.path.c_str(),
                 found.discarded);
  }
  if (found.dropped_on_shrink > 0) {
    std::fprintf(stderr,
                 "kvtier: the disk tier in %s held %zu blocks; with room for %u it kept the %zu most recent and "
                 "dropped %u\n",
                 settings.path.c_str(), found.resident.size() + found.dropped_on_shrink, settings.blocks,
                 found.resident.size(), found.dropped_on_shrink);
  }
  return store;
}

DiskTierInspection inspect_disk_tier(const std::filesystem::path& directory, const KvLayout& g2_layout,
                                     std::optional<std::uint32_t> capacity, const tiers::TierKey* key) {
  using namespace tiers::disk;
  DiskTierInspection out;
  out.file = directory / kDiskTierFile;
  const TierDirectory dir(directory, TierDirectory::Access::Inspect);
  if (!dir.exists()) return out;
  const DirectFile file(dir, kDiskTierFile, DirectFile::Mode::ReadOnly);
  if (!file.exists()) return out;
  out.exists = true;
  const SlotGeometry geometry = SlotGeometry::of(g2_layout);
  out.slot_bytes = geometry.slot_bytes;
  out.file_bytes = file.size();
  if (out.file_bytes == 0) {
    out.state = "empty";
    return out;
  }
  const std::uint64_t fingerprint = tiers::layout_fingerprint(g2_layout);
  TierFileIdentity found;
  const TierFileCheck check = read_tier_file_header(file,
                                                    TierFileIdentity{.layout_fingerprint = fingerprint,
                                                                     .slot_bytes = geometry.slot_bytes,
                                                                     .key_id = key != nullptr ? key->id() : 0},
                                                    found);
  out.state = tier_file_check_name(check);
  if (check != TierFileCheck::Ok) return out;
  out.slots = geometry.slots_in(out.file_bytes);
  IoQueue queue(32);
  const SlotScan scan =
      scan_slots(file, geometry, std::min<std::uint64_t>(out.slots, UINT32_MAX), fingerprint, queue, key);
  out.blocks = scan.resident.size();
  out.torn = scan.corrupt;
  out.superseded = scan.superseded;
  out.other_layout = scan.other_layout + scan.other_version;
  out.unauthenticated = scan.unauthenticated;
  if (capacity && out.blocks > *capacity) out.would_drop = out.blocks - *capacity;
  return out;
}

std::vector<std::pair<const char*, std::uint64_t>> disk_tier_recovery(const tiers::LowerTier& tier) {
  const auto* store = dynamic_cast<const tiers::disk::DiskStore*>(&tier);
  if (store == nullptr) return {};
  const tiers::disk::SlotScan& found = store->recovered();
  return {{"disk_slots_torn", found.corrupt},
          {"disk_slots_superseded", found.superseded},
          {"disk_slots_unauthenticated", found.unauthenticated},
          {"disk_dropped_on_shrink", found.dropped_on_shrink},
          {"disk_discarded_by_reformat", found.discarded},
          {"disk_parked_slots", store->parked_slots()}};
}

DiskTierFacts disk_tier_facts(const tiers::LowerTier& tier) noexcept {
  const auto* store = dynamic_cast<const tiers::disk::DiskStore*>(&tier);
  if (store == nullptr) return {};
  return DiskTierFacts{.direct_io = store->direct_io(),
                       .slot_bytes = store->geometry().slot_bytes,
                       .file_bytes = std::uint64_t{store->capacity()} * store->geometry().slot_bytes};
}

#else

std::unique_ptr<tiers::LowerTier> open_disk_tier(const DiskTierSettings&, const KvLayout&, const tiers::TierKey*,
                                                 std::vector<std::uint64_t>) {
  throw ConfigError("this kvtier was built without liburing: no disk tier (scripts/install-deps.sh, KVTIER_URING=ON)");
}

DiskTierInspection inspect_disk_tier(const std::filesystem::path&, const KvLayout&, std::optional<std::uint32_t>,
                                     const tiers::TierKey*) {
  throw ConfigError("this kvtier was built without liburing: no disk tier (scripts/install-deps.sh, KVTIER_URING=ON)");
}

DiskTierFacts disk_tier_facts(const tiers::LowerTier&) noexcept { return {}; }

std::vector<std::pair<const char*, std::uint64_t>> disk_tier_recovery(const tiers::LowerTier&) { return {}; }

#endif

}  // namespace kvtier::session
