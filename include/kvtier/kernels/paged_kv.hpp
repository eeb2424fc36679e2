#pragma once
// Paged-KV arithmetic shared by the CPU references and the CUDA kernels: the
// same code computes where a token's K or V lives, on both sides.
#include <cstddef>
#include <cstdint>

#include "kvtier/core/host_device.hpp"
#include "kvtier/core/kv_element.hpp"
#include "kvtier/core/kv_layout.hpp"

namespace kvtier::kernels {

/// Slab byte offset of element `dim` of (slot, layer, K|V, head), where
/// slot = page * tokens_per_block + offset (vLLM's slot mapping).
KVTIER_HOST_DEVICE inline std::size_t slot_element_offset(const KvLayout& layout, std::int64_t slot,
                                                          std::uint32_t layer, KvPart part, std::uint32_t head,
                                                          std::uint32_t dim) {
  const auto block = static_cast<std::uint64_t>(layout.geometry().tokens_per_block);
  const auto page = static_cast<std::uint32_t>(static_cast<std::uint64_t>(slot) / block);
  const auto offset = static_cast<std::uint32_t>(static_cast<std::uint64_t>(slot) % block);
  return layout.offset(page, layer, part, offset, head) + std::size_t{dim} * dtype_bytes(layout.geometry().dtype);
}

/// The K or V element of token `token` of a sequence whose pages are `block_table`.
KVTIER_HOST_DEVICE inline float load_paged(const std::byte* slab, const KvLayout& layout,
                                           const std::int32_t* block_table, std::uint32_t token, std::uint32_t layer,
                                           KvPart part, std::uint32_t head, std::uint32_t dim) {
  const std::uint32_t block = layout.geometry().tokens_per_block;
  const std::int64_t slot = std::int64_t{block_table[token / block]} * block + token % block;
  return load_kv_element(slab + slot_element_offset(layout, slot, layer, part, head, dim), layout.geometry().dtype);
}

}  // namespace kvtier::kernels
