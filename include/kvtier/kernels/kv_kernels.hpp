#pragma once
// CUDA launchers of the KV kernels. Each takes raw device pointers and a
// stream and returns the launch status; arguments that cannot be right are
// cudaErrorInvalidValue, and nothing is launched then. CPU references with the
// same semantics: kvtier/kernels/reference/*.hpp.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kvtier/core/kv_layout.hpp"
#include "kvtier/kernels/reference/copy_pages.hpp"
#include "kvtier/kernels/reference/paged_attention.hpp"

namespace kvtier::kernels {

/// vLLM's reshape_and_cache for one layer: key/value [tokens, kv_heads,
/// head_dim] floats (device) to slot_mapping[t] (device int64; < 0 = padding).
/// The slots live on the device, so the kernel bounds them: a slot at or past
/// capacity x block_size is never written (the reference refuses it).
cudaError_t launch_write_kv(std::byte* slab, const KvLayout& layout, std::uint32_t layer, const float* key,
                            const float* value, std::uint32_t tokens, const std::int64_t* slot_mapping,
                            cudaStream_t stream);

/// Decode attention; every pointer in `args` is device memory. One CUDA block
/// per (sequence, query head); scores live in shared memory, so the longest
/// sequence (max_blocks x block_size tokens, max_blocks >= 1) must fit the
/// device's opt-in shared memory. Device inputs are bounded in the kernel: a
/// length past the block table is clamped to it, tokens on pages outside the
/// pool are skipped, and a sequence of length 0 gives zeros.
cudaError_t launch_paged_attention_decode(const std::byte* slab, const KvLayout& layout, const PagedAttentionArgs& args,
                                          cudaStream_t stream);

/// Copies `count` chunks (device array of CopyDescriptor) in one launch, device
/// to device or to and from mapped pinned host memory, with 16-byte accesses
/// where a chunk is 16-byte aligned, several loads in flight per thread.
/// Launches at most `max_sms` blocks (one SM each), so compute keeps the rest.
cudaError_t launch_copy_pages(const CopyDescriptor* chunks, std::uint32_t count, std::uint32_t max_sms,
                              cudaStream_t stream);

}  // namespace kvtier::kernels
