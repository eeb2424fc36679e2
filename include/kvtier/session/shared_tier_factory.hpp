#pragma once
// Opens the G4 shared tier a session asks for: the one place that knows
// whether kvtier was built with hiredis.
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "kvtier/core/kv_layout.hpp"
#include "kvtier/session/session_config.hpp"
#include "kvtier/tiers/lower_tier.hpp"
#include "kvtier/tiers/tier_key.hpp"

namespace kvtier::session {

/// True when this build has the Redis shared tier.
bool shared_tier_available() noexcept;

/// The shared tier for G2 pages of `g2_layout`'s geometry, its values
/// authenticated with `key` when given (without one it says once on stderr
/// that whoever can write the store can inject K/V). Nothing is connected
/// yet: a store that is down is a miss, not an error. ConfigError: a build
/// without hiredis, a malformed URL, a namespace with a hash tag.
/// `group_formats` as open_disk_tier's.
std::unique_ptr<tiers::LowerTier> open_shared_tier(const SharedTierSettings& settings, const KvLayout& g2_layout,
                                                   const tiers::TierKey* key = nullptr,
                                                   std::vector<std::uint64_t> group_formats = {});

/// The shared tier's counters under the names the replay's report, the
/// script's `stats` and Python's `metrics()` give them (shared_*; empty for
/// another kind of tier).
std::vector<std::pair<const char*, std::uint64_t>> shared_tier_counters(const tiers::LowerTier& tier);

}  // namespace kvtier::session
