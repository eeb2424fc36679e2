#pragma once
// The byte format of one layer's block of a KV cache group
// (docs/spec/model-geometry.md §1 and §5): K and V rows (each side its
// own head size) in a plain dtype, FP8 with per-tensor scales outside the
// page, FP8 / INT8 with an fp32 scale inline after each (token, head) row,
// NVFP4 (each side's packed e2m1 data, then its fp8 block scales); one MLA
// latent vector a token (plain, or DeepSeek V3.2's 656-byte fp8_ds_mla); or a
// Mamba state (raw bytes, a conv view then a recurrent view). All arithmetic
// is `__host__ __device__`: the CPU references, the CUDA kernels, the byte
// checks and the page counts use this one place.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kvtier/core/host_device.hpp"
#include "kvtier/core/kv_layout.hpp"

namespace kvtier {

/// How K/V (or an MLA latent) is quantized, named as vLLM's --kv-cache-dtype names it.
enum class KvQuant : std::uint8_t {
  None,              // the group's dtype, no scales
  Fp8PerTensor,      // "fp8": e4m3, one K and one V scale per layer outside the page
  Fp8PerTokenHead,   // "fp8_per_token_head": e4m3, fp32 scale after each (token, head) row
  Int8PerTokenHead,  // "int8_per_token_head": int8, fp32 scale after each (token, head) row
  Nvfp4,             // "nvfp4": e2m1 pairs, an e4m3 scale per 16 values, a global scale per layer outside
  Fp8DsMla,          // "fp8_ds_mla": MLA only, 512 e4m3 + 4 fp32 tile scales + 64 bf16 RoPE values
};
/// "none", "fp8", "fp8_per_token_head", "int8_per_token_head", "nvfp4", "fp8_ds_mla".
const char* kv_quant_name(KvQuant quant) noexcept;
/// The quantization a name says; ConfigError listing the names otherwise.
KvQuant parse_kv_quant(std::string_view name);

/// What a group's page holds.
enum class PageContent : std::uint8_t { KeyValue, MlaLatent, MambaState };

/// Values a tile of fp8_ds_mla's latent shares one scale with.
inline constexpr std::uint32_t kDsMlaTile = 128;
/// Values an NVFP4 block scale covers.
inline constexpr std::uint32_t kNvfp4Block = 16;

struct PageFormat {
  PageContent content = PageContent::KeyValue;
  std::uint32_t block_size = 16;
  // K/V
  std::uint32_t kv_heads = 0;
  std::uint32_t head_dim = 0;
  std::uint32_t head_dim_v = 0;  // 0: head_dim
  // MLA
  std::uint32_t latent_dim = 0;
  std::uint32_t rope_dim = 0;
  // Mamba: the state, its first conv_state_bytes the conv state, the rest the recurrent state
  std::uint64_t state_bytes = 0;
  std::uint64_t conv_state_bytes = 0;
  KvDtype dtype = KvDtype::Bf16;  // the element when quant is None
  KvQuant quant = KvQuant::None;

  KVTIER_HOST_DEVICE constexpr std::uint32_t head_dim_of(KvPart part) const {
    return part == KvPart::Value && head_dim_v != 0 ? head_dim_v : head_dim;
  }
  /// Bytes of one (token, head) row's values of a K or V side.
  KVTIER_HOST_DEVICE constexpr std::size_t row_data_bytes(KvPart part) const {
    const std::size_t dim = head_dim_of(part);
    switch (quant) {
      case KvQuant::None:
        return dim * dtype_bytes(dtype);
      case KvQuant::Nvfp4:
        return dim / 2;
      default:
        return dim;  // one byte a value
    }
  }
  /// Bytes of one row's scales inside the page (0: none, or outside the page).
  KVTIER_HOST_DEVICE constexpr std::size_t row_scale_bytes(KvPart part) const {
    if (quant == KvQuant::Fp8PerTokenHead || quant == KvQuant::Int8PerTokenHead) return 4;
    if (quant == KvQuant::Nvfp4) return head_dim_of(part) / kNvfp4Block;
    return 0;
  }
  KVTIER_HOST_DEVICE constexpr bool scales_inline_after_row() const {
    return quant == KvQuant::Fp8PerTokenHead || quant == KvQuant::Int8PerTokenHead;
  }
  KVTIER_HOST_DEVICE constexpr std::size_t rows_per_side() const { return std::size_t{block_size} * kv_heads; }
  /// Bytes of one block's K (or V) side, scales included.
  KVTIER_HOST_DEVICE constexpr std::size_t side_bytes(KvPart part) const {
    return rows_per_side() * (row_data_bytes(part) + row_scale_bytes(part));
  }
  /// Bytes of one token of one layer (0 for a Mamba state, which does not scale with tokens).
  KVTIER_HOST_DEVICE constexpr std::size_t token_bytes() const {
    switch (content) {
      case PageContent::KeyValue:
        return std::size_t{kv_heads} * (row_data_bytes(KvPart::Key) + row_scale_bytes(KvPart::Key) +
                                        row_data_bytes(KvPart::Value) + row_scale_bytes(KvPart::Value));
      case PageContent::MlaLatent:
        if (quant == KvQuant::Fp8DsMla) return latent_dim + std::size_t{latent_dim / kDsMlaTile} * 4 + rope_dim * 2U;
        return std::size_t{latent_dim + rope_dim} * (quant == KvQuant::None ? dtype_bytes(dtype) : 1);
      case PageContent::MambaState:
        return 0;
    }
    return 0;
  }
  /// Bytes of one layer's block.
  KVTIER_HOST_DEVICE constexpr std::size_t layer_page_bytes() const {
    return content == PageContent::MambaState ? static_cast<std::size_t>(state_bytes) : block_size * token_bytes();
  }

  // K/V addressing, inside one layer's block: [K side][V side]; a side is its
  // rows [token][head] (each row's scale right after it, per-token-head), or
  // for NVFP4 all its rows' data, then all their block scales.
  KVTIER_HOST_DEVICE constexpr std::size_t side_offset(KvPart part) const {
    return part == KvPart::Key ? 0 : side_bytes(KvPart::Key);
  }
  KVTIER_HOST_DEVICE constexpr std::size_t row_index(std::uint32_t token, std::uint32_t head) const {
    return std::size_t{token} * kv_heads + head;
  }
  KVTIER_HOST_DEVICE constexpr std::size_t row_offset(KvPart part, std::uint32_t token, std::uint32_t head) const {
    const std::size_t stride =
        quant == KvQuant::Nvfp4 ? row_data_bytes(part) : row_data_bytes(part) + row_scale_bytes(part);
    return side_offset(part) + row_index(token, head) * stride;
  }
  /// Where a row's first scale lives (per-token-head: its fp32; NVFP4: its first e4m3).
  KVTIER_HOST_DEVICE constexpr std::size_t row_scale_offset(KvPart part, std::uint32_t token,
                                                            std::uint32_t head) const {
    if (quant == KvQuant::Nvfp4) {
      return side_offset(part) + rows_per_side() * row_data_bytes(part) +
             row_index(token, head) * row_scale_bytes(part);
    }
    return row_offset(part, token, head) + row_data_bytes(part);
  }

  // MLA addressing, inside one layer's block: [token][latent | (tile scales) | rope].
  KVTIER_HOST_DEVICE constexpr std::size_t latent_offset(std::uint32_t token) const {
    return std::size_t{token} * token_bytes();
  }
  KVTIER_HOST_DEVICE constexpr std::size_t latent_element_bytes() const {
    return quant == KvQuant::None ? dtype_bytes(dtype) : 1;
  }
  /// fp8_ds_mla: the token's first fp32 tile scale.
  KVTIER_HOST_DEVICE constexpr std::size_t latent_scale_offset(std::uint32_t token) const {
    return latent_offset(token) + latent_dim;
  }
  KVTIER_HOST_DEVICE constexpr std::size_t rope_offset(std::uint32_t token) const {
    if (quant == KvQuant::Fp8DsMla) return latent_scale_offset(token) + std::size_t{latent_dim / kDsMlaTile} * 4;
    return latent_offset(token) + std::size_t{latent_dim} * latent_element_bytes();
  }
  /// The element RoPE values are stored as: bf16 in fp8_ds_mla, else the latent's.
  KVTIER_HOST_DEVICE constexpr std::size_t rope_element_bytes() const {
    return quant == KvQuant::Fp8DsMla ? 2 : latent_element_bytes();
  }

  /// Two formats whose pages a writer of one may leave bytes the other would
  /// misread (vLLM #47574): the pool zeroes a page between them.
  KVTIER_HOST_DEVICE constexpr bool same_precision(const PageFormat& other) const {
    return content == other.content && quant == other.quant && (quant != KvQuant::None || dtype == other.dtype);
  }
  /// A small stable code of the format (content, quant, dtype, dimensions) for tier headers.
  std::uint64_t fingerprint() const noexcept;
  /// "K/V 8 heads x 128 (V 128) nvfp4", "MLA 512+64 fp8_ds_mla", "Mamba state 1024 B (conv 256 B)".
  std::string describe() const;
};

/// ConfigError naming `where` for a format that cannot be: a quantization
/// another content does not have, NVFP4 with a head size not a multiple of
/// 16, fp8_ds_mla with a latent not a multiple of 128, a conv state larger
/// than the state.
void validate_page_format(const PageFormat& format, const std::string& where);

}  // namespace kvtier
