#pragma once
// What kvtier tells operators, as plain numbers: each tier's usage now, and
// counters since the start (hits, misses, evictions, blocks and bytes moved
// each way, failures, events). The tiers' part is read from the manager and
// the offload engine; the request-level part (queries, hits, verification)
// comes from the front door that admits requests (the replay, Python).
// PrometheusMetrics exposes it; docs/metrics.md names every series.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvtier/g1/g1_manager.hpp"
#include "kvtier/offload/offload_engine.hpp"

namespace kvtier::metrics {

enum class Tier : std::uint8_t { G1, G2, G3, G4 };
inline constexpr std::array<Tier, 4> kTiers{Tier::G1, Tier::G2, Tier::G3, Tier::G4};
/// "G1" .. "G4": the `tier` label.
const char* tier_label(Tier tier) noexcept;

struct TierMetrics {
  bool present = false;  // G2 only when an offload tier is attached, G3 (G4) when a disk (shared) tier is under it
  std::size_t capacity_blocks = 0;
  std::size_t used_blocks = 0;          // G1: held by requests; G2: resident or landing
  std::size_t cached_blocks = 0;        // G1: inactive (reusable, evictable); G2: resident or landing
  std::uint64_t hit_blocks = 0;         // prompt blocks found here after missing every tier above
  std::uint64_t stored_blocks = 0;      // Stored events
  std::uint64_t evicted_blocks = 0;     // Removed events: the tier's last copy left
  std::uint64_t checksum_failures = 0;  // G2: a block whose XXH3 no longer matched (verify_swaps); G3: every read
};

/// Completed copies of one direction (the offload engine's count).
struct TransferMetrics {
  std::uint64_t transfers = 0;
  std::uint64_t blocks = 0;
  std::uint64_t bytes = 0;
};

/// One KV cache group of a manager with groups, in G1.
struct GroupMetrics {
  std::size_t index = 0;
  std::string kind;               // vLLM's KVCacheSpecKind
  std::size_t used_blocks = 0;    // pages requests hold
  std::size_t cached_blocks = 0;  // inactive pages
  std::uint64_t hit_blocks = 0;   // cached pages requests took as prefix hits
};

struct KvMetrics {
  std::array<TierMetrics, kTiers.size()> tiers{};
  std::uint64_t query_blocks = 0;  // full prompt blocks asked for at a request's first admission
  TransferMetrics g1_to_g2;
  TransferMetrics g2_to_g1;
  TransferMetrics g2_to_g3;            // blocks written into G3 (demoted from G2)
  TransferMetrics g3_to_g2;            // blocks read from G3, verified
  TransferMetrics g2_to_g4;            // blocks published to G4 (by this instance's SET)
  TransferMetrics g4_to_g2;            // blocks fetched from G4, verified
  std::uint64_t failed_transfers = 0;  // copies that failed: their blocks were dropped, not served
  // Counted by the front doors that do it (the replay), absent elsewhere.
  std::optional<std::uint64_t> allocator_operations;
  std::optional<std::uint64_t> pages_verified;  // reused pages checked against their tokens' K/V
  std::optional<std::uint64_t> verify_mismatches;
  std::uint64_t events_published = 0;  // KV events handed to the wire (or to Python)
  std::uint64_t events_dropped = 0;    // lost to a full queue
  std::vector<GroupMetrics> groups;    // a manager with KV cache groups: one each

  TierMetrics& tier(Tier t) noexcept { return tiers[static_cast<std::size_t>(t)]; }
  const TierMetrics& tier(Tier t) const noexcept { return tiers[static_cast<std::size_t>(t)]; }
  /// Queried blocks that missed this tier and every tier above it.
  std::uint64_t miss_blocks(Tier t) const noexcept;
};

/// Fills the tiers' gauges, the G2 checksum failures, failed transfers and
/// the copies each way from the manager and its offload engine (nullptr:
/// no G2). Request-level counters and events are left as they are.
void read_tiers(const g1::G1Manager& manager, const offload::OffloadEngine* engine, KvMetrics& out);

}  // namespace kvtier::metrics
