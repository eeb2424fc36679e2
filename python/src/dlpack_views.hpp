#pragma once
// Zero-copy views for Python: the G1 pool's K and V of one layer as strided
// tensors over the real slab (DLPack: numpy on HostRuntime, torch on CUDA),
// and block tables as int32 tensors in the runtime's device memory. Every
// K/V view holds the PageMemory it reads, so the pages outlive the view even
// when the Manager is closed or collected first.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kvtier/core/strong_id.hpp"
#include "kvtier/memory/kv_pool.hpp"
#include "manager_session.hpp"

namespace kvtier::python {

using Tensor = nanobind::ndarray<nanobind::array_api>;

/// K or V of `layer`: shape [pages, tokens_per_block, kv_heads, head_dim] in
/// the layout's dtype (fp8 as uint8), strides from the page layout. With
/// `as_bytes`, uint8 with the last dimension in bytes (any dtype).
Tensor kv_view(const std::shared_ptr<session::PageMemory>& memory, std::uint32_t layer, KvPart part, bool as_bytes);

/// A padded [rows, max_blocks] int32 table (-1 past each row's end) in a fresh
/// allocation of the runtime's device memory, owned by the returned tensor.
Tensor block_table_tensor(memory::Runtime& runtime, std::span<const std::span<const PageId>> tables,
                          std::uint32_t max_blocks);

/// One table as a 1-D int32 numpy array (a copy: the table changes as the request grows).
nanobind::ndarray<nanobind::numpy, std::int32_t> host_block_table(std::span<const PageId> table);

}  // namespace kvtier::python
