#pragma once
// CUDA launchers of the KV cache group kernels (every page format and span;
// CPU references: kvtier/kernels/reference/write_group_kv.hpp and
// kvtier/kernels/group_attention.hpp). Each takes device pointers and a
// stream and returns the launch status: arguments that cannot be right are
// cudaErrorInvalidValue and nothing is launched. Slots, lengths and page ids
// live on the device, so the kernels bound them: a slot past the pool is
// never written, a length past the table is clamped, an attended page
// outside the pool is skipped.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kvtier/kernels/group_attention.hpp"
#include "kvtier/kernels/group_pages.hpp"

namespace kvtier::kernels {

/// K [tokens, kv_heads, head_dim] and V [tokens, kv_heads, head_dim_v] floats to slot_mapping[t].
cudaError_t launch_write_group_kv(std::byte* slab, const GroupPages& pages, std::uint32_t layer, const float* key,
                                  const float* value, std::uint32_t tokens, const std::int64_t* slot_mapping,
                                  LayerScales scales, cudaStream_t stream);

/// MLA latent [tokens, latent_dim] and RoPE part [tokens, rope_dim] to slot_mapping[t].
cudaError_t launch_write_mla(std::byte* slab, const GroupPages& pages, std::uint32_t layer, const float* latent,
                             const float* rope, std::uint32_t tokens, const std::int64_t* slot_mapping,
                             LayerScales scales, cudaStream_t stream);

/// One CUDA block per (sequence, query head); the attended tokens' scores
/// live in shared memory, so max_blocks x block_size floats must fit the
/// device's opt-in shared memory.
cudaError_t launch_group_attention_decode(const std::byte* slab, const GroupPages& pages,
                                          const GroupAttentionArgs& args, cudaStream_t stream);

}  // namespace kvtier::kernels
