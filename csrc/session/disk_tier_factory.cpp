#include "kvtier/session/disk_tier_factory.hpp"

#include <atomic>
#include <cstdio>
#include <system_error>

#include "kvtier/core/errors.hpp"

#if KVTIER_WITH_URING
#include "kvtier/tiers/disk/disk_store.hpp"
#endif

namespace kvtier::session {

bool disk_tier_available() noexcept { return KVTIER_WITH_URING != 0; }

std::vector<std::pair<const char*, std::uint64_t>> disk_tier_counters(const tiers::LowerTier& tier) {
  const tiers::LowerTierStats io = tier.stats();
  return {{"disk_used", tier.used()},
          {"disk_capacity", tier.capacity()},
          {"disk_blocks_written", io.blocks_written},
          {"disk_blocks_read", io.blocks_read},
          {"disk_checksum_failures", io.checksum_failures},
          {"disk_io_failures", io.read_failures + io.write_failures}};
}

#if KVTIER_WITH_URING

std::unique_ptr<tiers::LowerTier> open_disk_tier(const DiskTierSettings& settings, const KvLayout& g2_layout) {
  std::error_code error;
  std::filesystem::create_directories(settings.path, error);
  if (error)
    throw ConfigError("cannot create the disk tier's directory " + settings.path.string() + ": " + error.message());
  auto store =
      std::make_unique<tiers::disk::DiskStore>(tiers::disk::DiskStoreConfig{.file = settings.path / kDiskTierFile,
                                                                            .slots = settings.blocks,
                                                                            .queue_depth = settings.queue_depth,
                                                                            .backlog = settings.backlog,
                                                                            .reformat = settings.reformat},
                                               g2_layout);
  static std::atomic<bool> said{false};
  if (!store->direct_io() && !said.exchange(true)) {
    std::fprintf(stderr, "kvtier: the file system of %s refuses O_DIRECT; the disk tier uses buffered I/O\n",
                 settings.path.c_str());
  }
  return store;
}

DiskTierFacts disk_tier_facts(const tiers::LowerTier& tier) noexcept {
  const auto* store = dynamic_cast<const tiers::disk::DiskStore*>(&tier);
  if (store == nullptr) return {};
  return DiskTierFacts{.direct_io = store->direct_io(),
                       .slot_bytes = store->geometry().slot_bytes,
                       .file_bytes = std::uint64_t{store->capacity()} * store->geometry().slot_bytes};
}

#else

std::unique_ptr<tiers::LowerTier> open_disk_tier(const DiskTierSettings&, const KvLayout&) {
  throw ConfigError("this kvtier was built without liburing: no disk tier (scripts/install-deps.sh, KVTIER_URING=ON)");
}

DiskTierFacts disk_tier_facts(const tiers::LowerTier&) noexcept { return {}; }

#endif

}  // namespace kvtier::session
