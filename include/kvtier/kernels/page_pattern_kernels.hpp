#pragma once
// Device-side fill and check of the deterministic page pattern
// (kvtier/core/page_pattern.hpp), straight in the slab: no staging copies.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kvtier/core/kv_layout.hpp"

namespace kvtier::kernels {

/// Writes the pattern of identities[i] into page pages[i] of the slab at
/// `slab` (laid out by `layout`). `pages` and `identities` are device arrays.
cudaError_t launch_fill_page_pattern(std::byte* slab, const KvLayout& layout, const std::uint32_t* pages,
                                     const std::uint64_t* identities, std::uint32_t count, cudaStream_t stream);

/// mismatched[i] = 1 when page pages[i] differs from the pattern of
/// identities[i], else 0. All arrays are device memory.
cudaError_t launch_check_page_pattern(const std::byte* slab, const KvLayout& layout, const std::uint32_t* pages,
                                      const std::uint64_t* identities, std::uint32_t count, std::uint32_t* mismatched,
                                      cudaStream_t stream);

}  // namespace kvtier::kernels
