#pragma once
// G3 over an engine's rows (row_service.hpp): a DiskStore of the engine's row
// size and namespace whose records move in place between the file and the
// engine's rows (O_DIRECT where the file system takes it).
#include <string>

#include "kvtier/tiers/disk/disk_store.hpp"
#include "kvtier/tiers/rows/row_service.hpp"

namespace kvtier::tiers::rows {

struct DiskRowsConfig {
  /// The tier's file, capacity in rows (`slots`), queue depth, backlog,
  /// reformat, key and sync (disk_store.hpp).
  disk::DiskStoreConfig store;
  /// What makes rows compatible (the engine's model, dtype, chunk size,
  /// parallel layout): a tier file of another namespace or row size is
  /// refused, or started anew with `store.reformat`.
  std::string namespace_text;
};

/// Opens (or recovers) the tier file. ConfigError: see DiskStore, and rows
/// that are not aligned for O_DIRECT (start and size multiples of 4096).
/// opened(): resident, corrupt, unauthenticated, dropped_on_shrink,
/// discarded, reformatted, direct_io.
RowStore open_disk_rows(const DiskRowsConfig& config, const RowRegion& region);

}  // namespace kvtier::tiers::rows
