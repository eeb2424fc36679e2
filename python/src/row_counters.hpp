#pragma once
// A row tier's counters as the dict kvtier's engine adapters read (kvtier.vllm's
// tier metrics, kvtier.sglang's get_stats).
#include <nanobind/nanobind.h>

#include "kvtier/tiers/rows/row_jobs.hpp"

namespace kvtier::python {

inline nanobind::dict row_counters_dict(const tiers::rows::RowTierCounters& c) {
  nanobind::dict d;
  d["lookups"] = c.lookups;
  d["lookup_hits"] = c.lookup_hits;
  d["keys_stored"] = c.keys_stored;
  d["keys_already_held"] = c.keys_already_held;
  d["keys_store_failed"] = c.keys_store_failed;
  d["keys_loaded"] = c.keys_loaded;
  d["keys_load_failed"] = c.keys_load_failed;
  d["bytes_stored"] = c.bytes_stored;
  d["bytes_loaded"] = c.bytes_loaded;
  d["checksum_failures"] = c.checksum_failures;
  d["authentication_failures"] = c.authentication_failures;
  d["evictions"] = c.evictions;
  d["deadline_misses"] = c.deadline_misses;
  d["used"] = c.used;
  d["capacity"] = c.capacity;
  d["breaker_open"] = c.breaker_open;
  return d;
}

}  // namespace kvtier::python
