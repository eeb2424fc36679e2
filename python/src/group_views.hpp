#pragma once
// Zero-copy views of one layer of a KV cache group in its page format, for
// Python (model-geometry.md §7): K and V, their inline scales, an MLA latent
// with its scales and RoPE part, or a Mamba state's conv and recurrent bytes,
// each a strided tensor over the real slab that keeps the pages alive.
#include <nanobind/nanobind.h>

#include <memory>

#include "kvtier/kernels/group_pages.hpp"
#include "kvtier/session/session.hpp"

namespace kvtier::python {

/// Named views of `layer` of a group's pages: "key"/"value" (+ "key_scale"/
/// "value_scale" for per-token-head and NVFP4), "latent" (+ "latent_scale"
/// for fp8_ds_mla) and "rope", or "conv" and "recurrent". Leading dimension
/// the pool's pages. Element dtypes where the format has one (bf16, fp16,
/// fp32, fp32 scales), uint8 for fp8, int8, packed e2m1 and e4m3 scales.
nanobind::dict group_views(const std::shared_ptr<session::PageMemory>& memory, const kernels::GroupPages& pages,
                           std::uint32_t layer);

}  // namespace kvtier::python
