#include "kvtier/tiers/rows/shared_rows.hpp"

#include <memory>

#include "kvtier/core/errors.hpp"
#include "kvtier/tiers/block_record.hpp"

namespace kvtier::tiers::rows {

RowStore open_shared_rows(const SharedRowsConfig& config, const RowRegion& region) {
  if (region.base == nullptr || region.count == 0 || region.row_bytes == 0) {
    throw ConfigError("the shared tier needs the engine's rows");
  }
  const RowShape shape{.row_bytes = region.row_bytes,
                       .fingerprint = row_namespace_fingerprint(config.namespace_text, region.row_bytes)};
  auto store = std::make_unique<shared::SharedStore>(config.store, shape);
  // The breaker and the deadline misses; the service fills its counters only while it holds the store.
  const shared::SharedStore* watched = store.get();
  RowStore opened{.health = [watched](RowTierCounters& counters) {
    const shared::SharedStoreStats stats = watched->shared_stats();
    counters.deadline_misses = stats.errors;
    counters.breaker_open = stats.degraded;
  }};
  opened.tier = std::move(store);
  return opened;
}

}  // namespace kvtier::tiers::rows
