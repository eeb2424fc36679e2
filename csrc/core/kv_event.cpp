#include "kvtier/core/kv_event.hpp"

namespace kvtier {

const char* tier_name(StorageTier tier) noexcept { return tier == StorageTier::Device ? "device" : "host_pinned"; }

}  // namespace kvtier
