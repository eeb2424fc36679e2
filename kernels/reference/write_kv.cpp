#include "kvtier/kernels/reference/write_kv.hpp"

#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/kernels/paged_kv.hpp"

namespace kvtier::kernels::reference {

void write_kv(std::byte* slab, const KvLayout& layout, std::uint32_t layer, const float* key, const float* value,
              std::size_t tokens, const std::int64_t* slot_mapping) {
  const KvGeometry& g = layout.geometry();
  if (layer >= g.layers) throw ContractError("write_kv: layer " + std::to_string(layer) + " is outside the layout");
  const auto slots = static_cast<std::int64_t>(layout.capacity()) * g.tokens_per_block;
  for (std::size_t t = 0; t < tokens; ++t) {
    if (slot_mapping[t] >= slots)
      throw ContractError("write_kv: slot " + std::to_string(slot_mapping[t]) + " is outside the pool");
  }
  const std::size_t row = std::size_t{g.kv_heads} * g.head_dim;
  const std::size_t element = dtype_bytes(g.dtype);
  for (std::size_t t = 0; t < tokens; ++t) {
    const std::int64_t slot = slot_mapping[t];
    if (slot < 0) continue;  // padding
    for (std::uint32_t h = 0; h < g.kv_heads; ++h) {
      // A head's dims are contiguous in both layouts: address its first element once.
      std::byte* k = slab + slot_element_offset(layout, slot, layer, KvPart::Key, h, 0);
      std::byte* v = slab + slot_element_offset(layout, slot, layer, KvPart::Value, h, 0);
      const std::size_t first = t * row + std::size_t{h} * g.head_dim;
      for (std::uint32_t d = 0; d < g.head_dim; ++d) {
        store_kv_element(k + std::size_t{d} * element, g.dtype, key[first + d]);
        store_kv_element(v + std::size_t{d} * element, g.dtype, value[first + d]);
      }
    }
  }
}

}  // namespace kvtier::kernels::reference
