#include "kvtier/metrics/kv_metrics.hpp"

namespace kvtier::metrics {

const char* tier_label(Tier tier) noexcept {
  switch (tier) {
    case Tier::G1:
      return "G1";
    case Tier::G2:
      return "G2";
    case Tier::G3:
      return "G3";
    case Tier::G4:
      break;
  }
  return "G4";
}

std::uint64_t KvMetrics::miss_blocks(Tier t) const noexcept {
  std::uint64_t found = 0;
  for (const Tier above : kTiers) {
    found += tier(above).hit_blocks;
    if (above == t) break;
  }
  return query_blocks > found ? query_blocks - found : 0;
}

void read_tiers(const g1::G1Manager& manager, const offload::OffloadEngine* engine, KvMetrics& out) {
  const g1::G1Metrics g1 = manager.metrics();
  TierMetrics& device = out.tier(Tier::G1);
  device.present = true;
  device.capacity_blocks = manager.max_capacity();
  device.used_blocks = g1.active_blocks;
  device.cached_blocks = g1.inactive_blocks;
  if (const ModelGeometry* geometry = manager.geometry(); geometry != nullptr && manager.has_groups()) {
    const std::vector<g1::GroupUsage> usage = manager.group_usage();
    const std::vector<std::uint64_t> hits = manager.group_hit_pages();
    out.groups.clear();
    for (std::size_t g = 0; g < usage.size(); ++g) {
      out.groups.push_back(GroupMetrics{.index = g,
                                        .kind = group_kind_name(geometry->groups()[g].spec.kind),
                                        .used_blocks = usage[g].active,
                                        .cached_blocks = usage[g].inactive,
                                        .hit_blocks = hits[g]});
    }
  }
  TierMetrics& host = out.tier(Tier::G2);
  host.present = engine != nullptr;
  if (engine == nullptr) return;
  const g1::TierStats stats = engine->stats();
  host.capacity_blocks = stats.capacity;
  host.used_blocks = stats.used;
  host.cached_blocks = stats.used;
  host.checksum_failures = stats.verify_failures;
  out.failed_transfers = stats.failed_transfers;
  const std::uint64_t page = engine->page_bytes();
  const auto copies = [page](const offload::CopyUsage& usage) {
    return TransferMetrics{.transfers = usage.transfers, .blocks = usage.bytes / page, .bytes = usage.bytes};
  };
  out.g1_to_g2 = copies(engine->swap_out_usage());
  out.g2_to_g1 = copies(engine->swap_in_usage());
  for (const StorageTier medium : {StorageTier::Disk, StorageTier::External}) {
    const tiers::LowerTier* lower = engine->lower_tier(medium);
    if (lower == nullptr) continue;
    const bool shared = medium == StorageTier::External;
    TierMetrics& tier = out.tier(shared ? Tier::G4 : Tier::G3);
    tier.present = true;
    const tiers::LowerTierStats io = lower->stats();
    tier.capacity_blocks = lower->capacity();
    tier.used_blocks = lower->used();
    tier.cached_blocks = lower->used();
    tier.checksum_failures = io.checksum_failures;
    // One block a write or read: the counts are the transfers too.
    (shared ? out.g2_to_g4 : out.g2_to_g3) =
        TransferMetrics{.transfers = io.blocks_written, .blocks = io.blocks_written, .bytes = io.bytes_written};
    (shared ? out.g4_to_g2 : out.g3_to_g2) =
        TransferMetrics{.transfers = io.blocks_read, .blocks = io.blocks_read, .bytes = io.bytes_read};
  }
}

}  // namespace kvtier::metrics
