#pragma once
// Kernel work on one KV cache group's pages that a Runtime's stream runs
// (kernels/group_kernels.hpp on CUDA, the CPU references on HostRuntime):
// writing new tokens in the group's page format, and decode attention over
// the group's span. Pointers follow KvWrite's and AttentionDecode's rules.
#include <cstddef>
#include <cstdint>

#include "kvtier/kernels/group_attention.hpp"
#include "kvtier/kernels/group_pages.hpp"

namespace kvtier::memory {

/// `tokens` new tokens into a group's pages: K [tokens, kv_heads, head_dim]
/// and V [tokens, kv_heads, head_dim_v] floats, or for MLA the latent
/// [tokens, latent_dim] and the RoPE part [tokens, rope_dim]; slots[t] = page
/// x block_size + offset (< 0: padding). first, second and slots live in
/// pinned host memory and stay valid until the write completed.
struct GroupKvWrite {
  std::byte* slab = nullptr;
  kernels::GroupPages pages{};
  std::uint32_t layer = 0;
  const float* first = nullptr;   // K, or the MLA latent
  const float* second = nullptr;  // V, or the MLA RoPE part (may be null without one)
  std::uint32_t tokens = 0;
  const std::int64_t* slots = nullptr;
  kernels::LayerScales scales{};
  /// first, second and slots are already the runtime's device memory (a
  /// framework's tensors on the GPU), not pinned host memory.
  bool inputs_on_device = false;
};

/// ContractError for a write no runtime may enqueue: a null pointer, a Mamba
/// group, a layer outside the group, pages that do not fit their stride.
void check_group_kv_write(const GroupKvWrite& write);

/// One decode step over a group's pages (kernels/group_attention.hpp); every
/// pointer in `args` is the runtime's device memory (host memory on HostRuntime).
struct GroupAttentionDecode {
  const std::byte* slab = nullptr;
  kernels::GroupPages pages{};
  kernels::GroupAttentionArgs args{};
};

/// ContractError for a step no runtime may enqueue (null pointers, a Mamba
/// group, heads, layer, a span without its window); tables and lengths are
/// device data the runtime bounds when the step runs.
void check_group_attention_decode(const GroupAttentionDecode& step);

}  // namespace kvtier::memory
