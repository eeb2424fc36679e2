#pragma once
#include <cstddef>
#include <cstdint>

#include "kvtier/core/kv_layout.hpp"

namespace kvtier::kernels::reference {

/// CPU reference of vLLM's reshape_and_cache for one layer: the K and V of
/// `tokens` new tokens ([tokens, kv_heads, head_dim] floats) are converted to
/// the layout's dtype and written to slot_mapping[t] = page * block_size +
/// offset. A negative slot is padding and is skipped. Throws ContractError
/// for a layer or slot outside the layout.
void write_kv(std::byte* slab, const KvLayout& layout, std::uint32_t layer, const float* key, const float* value,
              std::size_t tokens, const std::int64_t* slot_mapping);

}  // namespace kvtier::kernels::reference
