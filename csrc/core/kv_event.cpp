#include "kvtier/core/kv_event.hpp"

namespace kvtier {

const char* tier_name(StorageTier tier) noexcept {
  switch (tier) {
    case StorageTier::Device:
      return "device";
    case StorageTier::HostPinned:
      return "host_pinned";
    case StorageTier::Disk:
      return "disk";
    case StorageTier::External:
      return "external";
  }
  return "?";
}

}  // namespace kvtier
