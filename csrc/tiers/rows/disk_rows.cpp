#include "kvtier/tiers/rows/disk_rows.hpp"

#include <cstdint>
#include <memory>
#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/tiers/block_record.hpp"

namespace kvtier::tiers::rows {

RowStore open_disk_rows(const DiskRowsConfig& config, const RowRegion& region) {
  if (region.base == nullptr || region.count == 0) throw ConfigError("the disk tier needs the engine's rows");
  if (reinterpret_cast<std::uintptr_t>(region.base) % kRecordAlignment != 0 ||
      region.row_bytes % kRecordAlignment != 0 || region.row_bytes == 0) {
    throw ConfigError("the disk tier moves rows in place: their start and size must be multiples of " +
                      std::to_string(kRecordAlignment) + " bytes (rows of " + std::to_string(region.row_bytes) +
                      " bytes)");
  }
  const RowShape shape{.row_bytes = region.row_bytes,
                       .fingerprint = row_namespace_fingerprint(config.namespace_text, region.row_bytes)};
  auto store = std::make_unique<disk::DiskStore>(config.store, shape);
  const disk::SlotScan& scan = store->recovered();
  RowStore opened{.opened = {{"resident", scan.resident.size()},
                             {"corrupt", scan.corrupt},
                             {"unauthenticated", scan.unauthenticated},
                             {"dropped_on_shrink", scan.dropped_on_shrink},
                             {"discarded", scan.discarded},
                             {"reformatted", scan.reformatted ? 1 : 0},
                             {"direct_io", store->direct_io() ? 1 : 0}}};
  opened.tier = std::move(store);
  return opened;
}

}  // namespace kvtier::tiers::rows
