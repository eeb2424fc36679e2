#pragma once
// One KV cache group's pages in the pool's slab, as kernels address them:
// page p holds the group's layers one after another ([layer][the format's
// layer block]), so each layer's scales stay inside its own bytes however
// many layers a page holds (vLLM #48412), and pages are `page_stride` apart
// (the pool's page, padding included).
#include <cstddef>
#include <cstdint>

#include "kvtier/core/host_device.hpp"
#include "kvtier/core/page_format.hpp"

namespace kvtier::kernels {

struct GroupPages {
  PageFormat format{};
  std::uint32_t layers = 1;
  std::uint64_t page_stride = 0;  // bytes from one page to the next (the pool's page)
  std::uint32_t capacity = 0;     // pages in the slab

  /// Slab offset of layer `layer`'s block in page `page`.
  KVTIER_HOST_DEVICE constexpr std::size_t layer_block_offset(std::uint32_t page, std::uint32_t layer) const {
    return std::size_t{page} * page_stride + std::size_t{layer} * format.layer_page_bytes();
  }
  /// The group's bytes of one page (every layer; the rest of the stride is padding).
  KVTIER_HOST_DEVICE constexpr std::size_t group_page_bytes() const {
    return std::size_t{layers} * format.layer_page_bytes();
  }
  KVTIER_HOST_DEVICE constexpr std::uint64_t slots() const { return std::uint64_t{capacity} * format.block_size; }
};

/// ContractError unless the group's layers fit the stride and the format is valid.
void check_group_pages(const GroupPages& pages);

}  // namespace kvtier::kernels
