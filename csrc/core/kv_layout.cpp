#include "kvtier/core/kv_layout.hpp"

#include <limits>
#include <sstream>

#include "kvtier/core/errors.hpp"

namespace kvtier {

const char* dtype_name(KvDtype dtype) noexcept {
  switch (dtype) {
    case KvDtype::Bf16:
      return "bf16";
    case KvDtype::Fp16:
      return "fp16";
    case KvDtype::Fp32:
      return "fp32";
    case KvDtype::Fp8:
      return "fp8";
  }
  return "?";
}

KvDtype parse_dtype(std::string_view name) {
  for (KvDtype dtype : {KvDtype::Bf16, KvDtype::Fp16, KvDtype::Fp32, KvDtype::Fp8}) {
    if (name == dtype_name(dtype)) return dtype;
  }
  throw ConfigError("unknown dtype '" + std::string(name) + "' (expected bf16, fp16, fp32 or fp8)");
}

const char* page_layout_name(PageLayout layout) noexcept {
  return layout == PageLayout::PageMajor ? "page-major" : "layer-major";
}

PageLayout parse_page_layout(std::string_view name) {
  if (name == "page-major") return PageLayout::PageMajor;
  if (name == "layer-major") return PageLayout::LayerMajor;
  throw ConfigError("unknown page layout '" + std::string(name) + "' (expected page-major or layer-major)");
}

KvLayout::KvLayout(KvGeometry geometry, PageLayout layout, std::uint32_t capacity)
    : geometry_(geometry), layout_(layout), capacity_(capacity) {
  if (geometry.layers == 0 || geometry.kv_heads == 0 || geometry.head_dim == 0 || geometry.tokens_per_block == 0) {
    throw ConfigError("KV layout dimensions must be non-zero: " + describe());
  }
  if (geometry.tokens_per_block < 2) throw ConfigError("tokens per block must be at least 2: " + describe());
  // Every product below fits: each factor is < 2^32 and we check the running total.
  constexpr auto limit = std::numeric_limits<std::size_t>::max();
  std::size_t total = dtype_bytes(geometry.dtype);
  for (std::size_t factor :
       {std::size_t{geometry.kv_heads}, std::size_t{geometry.head_dim}, std::size_t{geometry.tokens_per_block},
        std::size_t{2}, std::size_t{geometry.layers}, std::size_t{capacity == 0 ? 1 : capacity}}) {
    if (total > limit / factor) throw ConfigError("KV layout is too large to address: " + describe());
    total *= factor;
  }
}

std::string KvLayout::describe() const {
  std::ostringstream out;
  out << page_layout_name(layout_) << " layers=" << geometry_.layers << " kv_heads=" << geometry_.kv_heads
      << " head_dim=" << geometry_.head_dim << " dtype=" << dtype_name(geometry_.dtype)
      << " tokens_per_block=" << geometry_.tokens_per_block << " capacity=" << capacity_;
  return out.str();
}

}  // namespace kvtier
