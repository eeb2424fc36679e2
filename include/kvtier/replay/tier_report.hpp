#pragma once
// A replay report's G3 and G4 fields, read from the offload engine's lower
// tiers when the replay ends: their I/O counters, what opening G3 found, and
// the shared store's answers.
#include "kvtier/offload/offload_engine.hpp"
#include "kvtier/replay/replayer.hpp"
#include "kvtier/tiers/lower_tier.hpp"

namespace kvtier::replay {

void read_disk_tier(const offload::OffloadEngine& engine, const tiers::LowerTier& disk, ReplayReport& report);
void read_shared_tier(const offload::OffloadEngine& engine, const tiers::LowerTier& shared, ReplayReport& report);

}  // namespace kvtier::replay
