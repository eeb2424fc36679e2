#pragma once
// Quantizing one row into a page and reading one value back, for every page
// format (kvtier/core/page_format.hpp): the CPU references and the CUDA
// kernels call these same functions, so both sides agree on every byte.
//  - none: the dtype's element; fp8 (per tensor): e4m3 of x / scale, the
//    scale given per layer (outside the page);
//  - per-token-head: scale = amax / 448 (fp8) or amax / 127 (int8) of the
//    row, stored as fp32 right after it;
//  - nvfp4: per 16 values an e4m3 scale s = amax / (6 * global), values
//    e2m1 of x / (s * global), two a byte, low nibble first;
//  - fp8_ds_mla: per 128 latent values an fp32 scale amax / 448, the latent
//    in e4m3, the RoPE part in bf16.
// A row whose values are all zero stores a scale of 1 and zeros.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kvtier/core/host_device.hpp"
#include "kvtier/core/kv_element.hpp"
#include "kvtier/core/page_format.hpp"

namespace kvtier::kernels {

/// Scales that live beside the pool, one pair per layer: fp8 per-tensor's K
/// and V scales, NVFP4's K and V global scales, MLA fp8's latent scale (key).
struct LayerScales {
  float key = 1.0f;
  float value = 1.0f;
};

namespace detail {

KVTIER_HOST_DEVICE inline float load_f32(const std::byte* p) {
  float f;
  std::memcpy(&f, p, sizeof f);
  return f;
}
KVTIER_HOST_DEVICE inline void store_f32(std::byte* p, float f) { std::memcpy(p, &f, sizeof f); }
KVTIER_HOST_DEVICE inline float amax(const float* x, std::uint32_t n) {
  float m = 0.0f;
  for (std::uint32_t i = 0; i < n; ++i) m = fmaxf(m, fabsf(x[i]));
  return m;
}
KVTIER_HOST_DEVICE inline float scale_for(float amax, float top) { return amax > 0.0f ? amax / top : 1.0f; }

}  // namespace detail

/// Writes the K or V row of (token, head) — `x` holds head_dim_of(part)
/// floats — into `block`, one layer's block of the group.
KVTIER_HOST_DEVICE inline void store_kv_row(std::byte* block, const PageFormat& f, KvPart part, std::uint32_t token,
                                            std::uint32_t head, const float* x, float tensor_scale) {
  const std::uint32_t dim = f.head_dim_of(part);
  std::byte* row = block + f.row_offset(part, token, head);
  switch (f.quant) {
    case KvQuant::None:
      for (std::uint32_t d = 0; d < dim; ++d)
        store_kv_element(row + std::size_t{d} * dtype_bytes(f.dtype), f.dtype, x[d]);
      return;
    case KvQuant::Fp8PerTensor:
      for (std::uint32_t d = 0; d < dim; ++d) row[d] = static_cast<std::byte>(float_to_fp8_e4m3(x[d] / tensor_scale));
      return;
    case KvQuant::Fp8PerTokenHead:
    case KvQuant::Int8PerTokenHead: {
      const bool fp8 = f.quant == KvQuant::Fp8PerTokenHead;
      const float scale = detail::scale_for(detail::amax(x, dim), fp8 ? 448.0f : 127.0f);
      for (std::uint32_t d = 0; d < dim; ++d) {
        row[d] = fp8 ? static_cast<std::byte>(float_to_fp8_e4m3(x[d] / scale))
                     : static_cast<std::byte>(static_cast<std::uint8_t>(float_to_int8(x[d] / scale)));
      }
      detail::store_f32(block + f.row_scale_offset(part, token, head), scale);
      return;
    }
    case KvQuant::Nvfp4: {
      std::byte* scales = block + f.row_scale_offset(part, token, head);
      for (std::uint32_t b = 0; b < dim / kNvfp4Block; ++b) {
        const float* values = x + std::size_t{b} * kNvfp4Block;
        const std::uint8_t code = float_to_fp8_e4m3(detail::amax(values, kNvfp4Block) / (6.0f * tensor_scale));
        scales[b] = static_cast<std::byte>(code);
        const float step = fp8_e4m3_to_float(code) * tensor_scale;
        for (std::uint32_t i = 0; i < kNvfp4Block; i += 2) {
          const std::uint8_t lo = step > 0.0f ? float_to_fp4_e2m1(values[i] / step) : 0;
          const std::uint8_t hi = step > 0.0f ? float_to_fp4_e2m1(values[i + 1] / step) : 0;
          row[(std::size_t{b} * kNvfp4Block + i) / 2] = static_cast<std::byte>(lo | (hi << 4));
        }
      }
      return;
    }
    case KvQuant::Fp8DsMla:
      return;  // not a K/V format (validate_page_format refuses it)
  }
}

/// Value `dim` of the K or V row of (token, head), dequantized.
KVTIER_HOST_DEVICE inline float load_kv_value(const std::byte* block, const PageFormat& f, KvPart part,
                                              std::uint32_t token, std::uint32_t head, std::uint32_t dim,
                                              float tensor_scale) {
  const std::byte* row = block + f.row_offset(part, token, head);
  switch (f.quant) {
    case KvQuant::None:
      return load_kv_element(row + std::size_t{dim} * dtype_bytes(f.dtype), f.dtype);
    case KvQuant::Fp8PerTensor:
      return fp8_e4m3_to_float(static_cast<std::uint8_t>(row[dim])) * tensor_scale;
    case KvQuant::Fp8PerTokenHead:
      return fp8_e4m3_to_float(static_cast<std::uint8_t>(row[dim])) *
             detail::load_f32(block + f.row_scale_offset(part, token, head));
    case KvQuant::Int8PerTokenHead:
      return static_cast<float>(static_cast<std::int8_t>(row[dim])) *
             detail::load_f32(block + f.row_scale_offset(part, token, head));
    case KvQuant::Nvfp4: {
      const auto pair = static_cast<std::uint8_t>(row[dim / 2]);
      const auto nibble = static_cast<std::uint8_t>(dim % 2 == 0 ? pair & 0xFU : pair >> 4);
      const auto scale = static_cast<std::uint8_t>(block[f.row_scale_offset(part, token, head) + dim / kNvfp4Block]);
      return fp4_e2m1_to_float(nibble) * fp8_e4m3_to_float(scale) * tensor_scale;
    }
    case KvQuant::Fp8DsMla:
      return 0.0f;
  }
  return 0.0f;
}

/// Writes one token's MLA latent (latent_dim floats) and RoPE part (rope_dim floats).
KVTIER_HOST_DEVICE inline void store_mla_token(std::byte* block, const PageFormat& f, std::uint32_t token,
                                               const float* latent, const float* rope, float tensor_scale) {
  std::byte* at = block + f.latent_offset(token);
  std::byte* rope_at = block + f.rope_offset(token);
  switch (f.quant) {
    case KvQuant::Fp8DsMla:
      for (std::uint32_t tile = 0; tile < f.latent_dim / kDsMlaTile; ++tile) {
        const float* values = latent + std::size_t{tile} * kDsMlaTile;
        const float scale = detail::scale_for(detail::amax(values, kDsMlaTile), 448.0f);
        detail::store_f32(block + f.latent_scale_offset(token) + std::size_t{tile} * 4, scale);
        for (std::uint32_t i = 0; i < kDsMlaTile; ++i) {
          at[std::size_t{tile} * kDsMlaTile + i] = static_cast<std::byte>(float_to_fp8_e4m3(values[i] / scale));
        }
      }
      for (std::uint32_t i = 0; i < f.rope_dim; ++i)
        store_kv_element(rope_at + std::size_t{i} * 2, KvDtype::Bf16, rope[i]);
      return;
    case KvQuant::Fp8PerTensor:
      for (std::uint32_t i = 0; i < f.latent_dim; ++i)
        at[i] = static_cast<std::byte>(float_to_fp8_e4m3(latent[i] / tensor_scale));
      for (std::uint32_t i = 0; i < f.rope_dim; ++i)
        rope_at[i] = static_cast<std::byte>(float_to_fp8_e4m3(rope[i] / tensor_scale));
      return;
    default: {
      const std::size_t element = dtype_bytes(f.dtype);
      for (std::uint32_t i = 0; i < f.latent_dim; ++i) store_kv_element(at + i * element, f.dtype, latent[i]);
      for (std::uint32_t i = 0; i < f.rope_dim; ++i) store_kv_element(rope_at + i * element, f.dtype, rope[i]);
    }
  }
}

/// Latent value `i` of `token`, dequantized.
KVTIER_HOST_DEVICE inline float load_mla_latent(const std::byte* block, const PageFormat& f, std::uint32_t token,
                                                std::uint32_t i, float tensor_scale) {
  const std::byte* at = block + f.latent_offset(token);
  switch (f.quant) {
    case KvQuant::Fp8DsMla:
      return fp8_e4m3_to_float(static_cast<std::uint8_t>(at[i])) *
             detail::load_f32(block + f.latent_scale_offset(token) + std::size_t{i / kDsMlaTile} * 4);
    case KvQuant::Fp8PerTensor:
      return fp8_e4m3_to_float(static_cast<std::uint8_t>(at[i])) * tensor_scale;
    default:
      return load_kv_element(at + std::size_t{i} * dtype_bytes(f.dtype), f.dtype);
  }
}

/// RoPE value `i` of `token`, dequantized.
KVTIER_HOST_DEVICE inline float load_mla_rope(const std::byte* block, const PageFormat& f, std::uint32_t token,
                                              std::uint32_t i, float tensor_scale) {
  const std::byte* at = block + f.rope_offset(token);
  switch (f.quant) {
    case KvQuant::Fp8DsMla:
      return load_kv_element(at + std::size_t{i} * 2, KvDtype::Bf16);
    case KvQuant::Fp8PerTensor:
      return fp8_e4m3_to_float(static_cast<std::uint8_t>(at[i])) * tensor_scale;
    default:
      return load_kv_element(at + std::size_t{i} * dtype_bytes(f.dtype), f.dtype);
  }
}

/// The documented tolerance of a format (docs/page-formats.md): how far a
/// value read back may be from the value written, for a row whose largest
/// magnitude is `row_amax` (the latent for MLA) and the layer's scale
/// `tensor_scale` (fp8 per tensor: values up to 448 x scale; nvfp4: the global scale).
KVTIER_HOST_DEVICE inline float quantization_bound(const PageFormat& f, float row_amax, float tensor_scale) {
  constexpr float kE4m3Subnormal = 1.0f / 1024.0f;  // half of e4m3's smallest step, 2^-9
  switch (f.quant) {
    case KvQuant::None:
      switch (f.dtype) {
        case KvDtype::Fp32:
          return 0.0f;
        case KvDtype::Bf16:
          return row_amax / 256.0f;
        case KvDtype::Fp16:
          return row_amax / 2048.0f + 1.0f / 33554432.0f;
        case KvDtype::Fp8:
          return row_amax / 16.0f + kE4m3Subnormal;
      }
      return 0.0f;
    case KvQuant::Fp8PerTensor:
      return row_amax / 16.0f + kE4m3Subnormal * tensor_scale;
    case KvQuant::Fp8PerTokenHead:
    case KvQuant::Fp8DsMla:
      return row_amax / 16.0f + kE4m3Subnormal * row_amax / 448.0f;
    case KvQuant::Int8PerTokenHead:
      return row_amax / 254.0f * 1.0001f;
    case KvQuant::Nvfp4:
      // Half of e2m1's widest step (2) at a scale up to amax/6 x (1 + 2^-4),
      // and a block scale in e4m3's subnormal range loses up to 2^-10 x global per unit.
      return row_amax * 0.18f + 8.0f * kE4m3Subnormal * tensor_scale;
  }
  return 0.0f;
}

}  // namespace kvtier::kernels
