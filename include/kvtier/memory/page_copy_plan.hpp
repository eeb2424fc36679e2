#pragma once
// The copies that move whole pages between two pools of the same page size,
// whatever either's layout: a page's chunks in order are its logical bytes in
// every layout, so the plan walks those bytes and cuts them where either side's
// chunk ends. Copies contiguous on both sides coalesce into one, so a run of
// page-major pages to a contiguous run of G2 pages is one descriptor.
// It is what offload (G1 -> G2), swap-in (G2 -> G1) and tests use.
#include <span>
#include <vector>

#include "kvtier/core/copy_descriptor.hpp"
#include "kvtier/core/strong_id.hpp"
#include "kvtier/memory/kv_pool.hpp"

namespace kvtier::memory {

/// Copies page `from_pages[i]` of `from` to page `to_pages[i]` of `to`, for
/// every i, as one batch (the copies may run in any order: no target page may
/// also be a source). ContractError (nothing planned) when the pools' pages
/// differ in size, the lists differ in length, or a page is outside its pool.
std::vector<CopyDescriptor> page_copy_plan(const KvPool& from, std::span<const PageId> from_pages, const KvPool& to,
                                           std::span<const PageId> to_pages);

}  // namespace kvtier::memory
