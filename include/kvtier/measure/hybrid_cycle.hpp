#pragma once
// The request cycle of a manager with KV cache groups (a hybrid model) on the
// same streams as measure_allocator_cycle, next to the same floor: per
// request the prefix probe (the groups' fixed point), allocate_slots with
// that hit, finalize with the sequence, and — once `live` requests are held
// — free_slots of the oldest. The floor keeps one table per request, so the
// fraction shows what the groups cost beside a single-group allocator's.
#include <cstddef>
#include <vector>

#include "kvtier/core/model_geometry.hpp"
#include "kvtier/measure/allocator_cycle.hpp"
#include "kvtier/measure/request_streams.hpp"

namespace kvtier::measure {

/// gpt-oss's two groups at the stream's block size: full attention and a
/// 128-token sliding window, one layer each.
std::vector<GroupSpec> full_and_sliding_groups();

/// `rounds` alternated hybrid/floor rounds; allocator "native/hybrid".
/// ConfigError when the stream is empty or does not fit its pages.
AllocatorCycleResult measure_hybrid_cycle(const RequestStream& stream, const std::vector<GroupSpec>& groups,
                                          std::size_t rounds);

}  // namespace kvtier::measure
