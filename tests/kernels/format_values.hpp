#pragma once
// Test values a page format stores without loss (so a kernel's result can be
// compared with plain float math on the values themselves) and random values
// (to check the formats' documented tolerances).
#include <algorithm>
#include <cstdint>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "kvtier/core/kv_element.hpp"
#include "kvtier/core/page_format.hpp"

namespace kvtier::kernels::testing {

/// Tokens a block of the test formats holds.
inline constexpr std::uint32_t kFormatBlock = 4;

struct Format {
  const char* name;
  PageFormat format;
};
inline void PrintTo(const Format& f, std::ostream* out) { *out << f.name; }

/// Every page format at small sizes: K/V (K and V of different head sizes) in
/// every dtype and quantization, and the MLA latent formats.
inline std::vector<Format> page_format_cases() {
  const auto kv = [](KvQuant quant, KvDtype dtype = KvDtype::Bf16) {
    return PageFormat{
        .block_size = kFormatBlock, .kv_heads = 2, .head_dim = 32, .head_dim_v = 16, .dtype = dtype, .quant = quant};
  };
  const auto mla = [](KvQuant quant) {
    return PageFormat{.content = PageContent::MlaLatent,
                      .block_size = kFormatBlock,
                      .latent_dim = 256,
                      .rope_dim = 32,
                      .quant = quant};
  };
  return {{"bf16", kv(KvQuant::None)},
          {"fp16", kv(KvQuant::None, KvDtype::Fp16)},
          {"fp32", kv(KvQuant::None, KvDtype::Fp32)},
          {"fp8_unscaled", kv(KvQuant::None, KvDtype::Fp8)},
          {"fp8", kv(KvQuant::Fp8PerTensor)},
          {"fp8_per_token_head", kv(KvQuant::Fp8PerTokenHead)},
          {"int8_per_token_head", kv(KvQuant::Int8PerTokenHead)},
          {"nvfp4", kv(KvQuant::Nvfp4)},
          {"mla_bf16", mla(KvQuant::None)},
          {"mla_fp8", mla(KvQuant::Fp8PerTensor)},
          {"mla_fp8_ds_mla", mla(KvQuant::Fp8DsMla)}};
}

inline PageFormat format_named(std::string_view name) {
  for (const Format& f : page_format_cases()) {
    if (name == f.name) return f.format;
  }
  throw std::invalid_argument("no test format " + std::string(name));
}

/// The unit a format's scale covers (the values a test's largest one is drawn per).
inline std::size_t scale_unit(const PageFormat& f, std::uint32_t dim) {
  if (f.quant == KvQuant::Nvfp4) return kNvfp4Block;
  if (f.quant == KvQuant::Fp8DsMla) return kDsMlaTile;
  return dim;
}

/// `n` values, in units of `unit` (a row, an NVFP4 block, a ds_mla tile),
/// each unit's largest magnitude the one its scale is computed from, every
/// value exactly representable once divided by its scale. `tensor_scale` is
/// the layer's scale for fp8 per tensor and nvfp4 (a power of two).
inline std::vector<float> lossless_values(KvQuant quant, KvDtype dtype, std::size_t n, std::size_t unit,
                                          std::mt19937& rng, float tensor_scale) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> out(n);
  for (std::size_t first = 0; first < n; first += unit) {
    const float unit_scale = 1.0f / static_cast<float>(1U << (rng() % 6));  // a power of two per unit
    for (std::size_t i = first; i < first + unit && i < n; ++i) {
      switch (quant) {
        case KvQuant::None:
          out[i] = round_to_kv_dtype(uniform(rng) * 3.0f, dtype);
          break;
        case KvQuant::Fp8PerTensor:
          out[i] = round_to_kv_dtype(uniform(rng) * 440.0f, KvDtype::Fp8) * tensor_scale;
          break;
        case KvQuant::Fp8PerTokenHead:
        case KvQuant::Fp8DsMla:
          out[i] = round_to_kv_dtype(uniform(rng) * 440.0f, KvDtype::Fp8) * unit_scale;
          break;
        case KvQuant::Int8PerTokenHead:
          out[i] = static_cast<float>(static_cast<int>(rng() % 255) - 127) * unit_scale;
          break;
        case KvQuant::Nvfp4:
          out[i] = fp4_e2m1_to_float(static_cast<std::uint8_t>(rng() % 16)) * unit_scale * tensor_scale;
          break;
      }
    }
    // The unit's largest magnitude is exactly the top of its scale.
    const float sign = rng() % 2 ? 1.0f : -1.0f;
    const std::size_t at = first + rng() % std::min(unit, n - first);
    if (quant == KvQuant::Fp8PerTokenHead || quant == KvQuant::Fp8DsMla) out[at] = sign * 448.0f * unit_scale;
    if (quant == KvQuant::Int8PerTokenHead) out[at] = sign * 127.0f * unit_scale;
    // NVFP4: the block scale (a power of two, exact in e4m3) times 6 is the block's top.
    if (quant == KvQuant::Nvfp4) out[at] = sign * 6.0f * unit_scale * tensor_scale;
  }
  return out;
}

inline std::vector<float> random_values(std::size_t n, std::mt19937& rng, float magnitude) {
  std::normal_distribution<float> normal(0.0f, magnitude);
  std::vector<float> out(n);
  for (float& x : out) x = normal(rng);
  return out;
}

}  // namespace kvtier::kernels::testing
