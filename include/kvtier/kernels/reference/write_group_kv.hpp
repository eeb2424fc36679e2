#pragma once
// CPU references of writing new tokens into one KV cache group's pages in
// the group's page format (vLLM's reshape_and_cache and, for MLA,
// concat_and_cache_mla), quantizing with the format's scales.
#include <cstddef>
#include <cstdint>

#include "kvtier/kernels/group_pages.hpp"
#include "kvtier/kernels/page_rows.hpp"

namespace kvtier::kernels::reference {

/// K and V of `tokens` tokens ([tokens, kv_heads, head_dim] and
/// [tokens, kv_heads, head_dim_v] floats) to slot_mapping[t] = page x
/// block_size + offset; a negative slot is padding. ContractError for a group
/// that is not K/V, a layer or slot outside the pages (nothing written then).
void write_group_kv(std::byte* slab, const GroupPages& pages, std::uint32_t layer, const float* key, const float* value,
                    std::size_t tokens, const std::int64_t* slot_mapping, LayerScales scales);

/// One MLA latent ([tokens, latent_dim]) and RoPE part ([tokens, rope_dim])
/// per token; `scales.key` is fp8's per-tensor scale.
void write_mla(std::byte* slab, const GroupPages& pages, std::uint32_t layer, const float* latent, const float* rope,
               std::size_t tokens, const std::int64_t* slot_mapping, LayerScales scales);

}  // namespace kvtier::kernels::reference
