#pragma once
// G4 over an engine's rows (row_service.hpp): a SharedStore (one Redis, or a
// Redis Cluster) of the engine's row size and namespace, shared by every
// instance under the same namespace; each call bounded by its deadline, a
// node that failed left alone for a back-off (the breaker).
#include <string>

#include "kvtier/tiers/rows/row_service.hpp"
#include "kvtier/tiers/shared/shared_store.hpp"

namespace kvtier::tiers::rows {

struct SharedRowsConfig {
  /// The nodes, key namespace, deadline (`timeout`), bounds and key (shared_store.hpp).
  shared::SharedStoreConfig store;
  /// What makes rows compatible (the engine's model, dtype, chunk size,
  /// parallel layout): values of another namespace or row size are never served.
  std::string namespace_text;
};

/// Connects on first use: a store that is down at start is a miss, not an error.
RowStore open_shared_rows(const SharedRowsConfig& config, const RowRegion& region);

}  // namespace kvtier::tiers::rows
