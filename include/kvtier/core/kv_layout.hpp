#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kvtier/core/host_device.hpp"

namespace kvtier {

/// Element type of the K and V tensors (fp8 = e4m3/e5m2, one byte).
enum class KvDtype : std::uint8_t { Bf16, Fp16, Fp32, Fp8 };

KVTIER_HOST_DEVICE constexpr std::size_t dtype_bytes(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::Fp32:
      return 4;
    case KvDtype::Fp8:
      return 1;
    default:
      return 2;
  }
}
const char* dtype_name(KvDtype dtype) noexcept;
/// "bf16", "fp16", "fp32" or "fp8"; throws ConfigError otherwise.
KvDtype parse_dtype(std::string_view name);

/// Where a page's bytes live in the G1 slab.
enum class PageLayout : std::uint8_t {
  /// One contiguous page holds every layer's K and V: [layer][K|V][token][head][dim].
  /// One copy moves a page, which is what offload wants.
  PageMajor,
  /// One tensor per layer, [page][K|V][token][head][dim] (FlashInfer's NHD paged
  /// layout; vLLM's per-layer cache). A page is `layers` chunks, one per tensor.
  LayerMajor,
};
const char* page_layout_name(PageLayout layout) noexcept;
/// "page-major" or "layer-major"; throws ConfigError otherwise.
PageLayout parse_page_layout(std::string_view name);

/// Model-side shape of the KV cache.
struct KvGeometry {
  std::uint32_t layers = 2;
  std::uint32_t kv_heads = 2;
  std::uint32_t head_dim = 64;
  KvDtype dtype = KvDtype::Bf16;
  std::uint32_t tokens_per_block = 16;
};

enum class KvPart : std::uint32_t { Key = 0, Value = 1 };

/// Byte geometry of `capacity` pages in one slab. All arithmetic is constexpr
/// and callable from device code, so CPU tests exercise the kernels' own math.
class KvLayout {
 public:
  /// Validates (non-zero dimensions, a slab size that fits in 64 bits);
  /// throws ConfigError.
  KvLayout(KvGeometry geometry, PageLayout layout, std::uint32_t capacity);

  KVTIER_HOST_DEVICE constexpr const KvGeometry& geometry() const { return geometry_; }
  KVTIER_HOST_DEVICE constexpr PageLayout layout() const { return layout_; }
  KVTIER_HOST_DEVICE constexpr std::uint32_t capacity() const { return capacity_; }

  /// Bytes of one token's K (or V) of one layer: heads x dim x element.
  KVTIER_HOST_DEVICE constexpr std::size_t token_bytes() const {
    return std::size_t{geometry_.kv_heads} * geometry_.head_dim * dtype_bytes(geometry_.dtype);
  }
  /// Bytes of one page's K and V of one layer.
  KVTIER_HOST_DEVICE constexpr std::size_t layer_page_bytes() const {
    return 2 * std::size_t{geometry_.tokens_per_block} * token_bytes();
  }
  /// Bytes of one page over all layers (the same in both layouts).
  KVTIER_HOST_DEVICE constexpr std::size_t page_bytes() const { return geometry_.layers * layer_page_bytes(); }
  KVTIER_HOST_DEVICE constexpr std::size_t slab_bytes() const { return capacity_ * page_bytes(); }

  /// A page is 1 contiguous chunk (page-major) or one chunk per layer (layer-major).
  KVTIER_HOST_DEVICE constexpr std::uint32_t chunks_per_page() const {
    return layout_ == PageLayout::PageMajor ? 1U : geometry_.layers;
  }
  KVTIER_HOST_DEVICE constexpr std::size_t chunk_bytes() const {
    return layout_ == PageLayout::PageMajor ? page_bytes() : layer_page_bytes();
  }
  /// Slab offset of chunk `chunk` of `page`; chunks in order form the page's
  /// logical bytes [layer][K|V][token][head][dim].
  KVTIER_HOST_DEVICE constexpr std::size_t chunk_offset(std::uint32_t page, std::uint32_t chunk) const {
    return layout_ == PageLayout::PageMajor ? std::size_t{page} * page_bytes()
                                            : layer_offset(chunk) + std::size_t{page} * layer_page_bytes();
  }
  /// Slab offset of the first byte of layer `layer`'s tensor (layer-major) or of
  /// nothing meaningful (page-major, returns 0).
  KVTIER_HOST_DEVICE constexpr std::size_t layer_offset(std::uint32_t layer) const {
    return layout_ == PageLayout::PageMajor ? 0 : std::size_t{layer} * capacity_ * layer_page_bytes();
  }
  /// Slab offset of element [dim 0] of (page, layer, K|V, token-in-block, head).
  KVTIER_HOST_DEVICE constexpr std::size_t offset(std::uint32_t page, std::uint32_t layer, KvPart part,
                                                  std::uint32_t token, std::uint32_t head) const {
    const std::size_t in_layer_page =
        (static_cast<std::size_t>(part) * geometry_.tokens_per_block + token) * token_bytes() +
        std::size_t{head} * geometry_.head_dim * dtype_bytes(geometry_.dtype);
    if (layout_ == PageLayout::PageMajor) {
      return std::size_t{page} * page_bytes() + std::size_t{layer} * layer_page_bytes() + in_layer_page;
    }
    return layer_offset(layer) + std::size_t{page} * layer_page_bytes() + in_layer_page;
  }

  std::string describe() const;

 private:
  KvGeometry geometry_;
  PageLayout layout_;
  std::uint32_t capacity_;
};

}  // namespace kvtier
