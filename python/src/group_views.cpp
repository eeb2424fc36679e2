#include "group_views.hpp"

#include <nanobind/ndarray.h>

#include <array>
#include <string>

#include "kvtier/core/expects.hpp"

namespace nb = nanobind;

namespace kvtier::python {
namespace {

using Tensor = nb::ndarray<nb::array_api>;

struct Element {
  nb::dlpack::dtype dtype;
  std::size_t bytes;
};

Element plain(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::Bf16:
      return {nb::dlpack::dtype{static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bfloat), 16, 1}, 2};
    case KvDtype::Fp16:
      return {nb::dlpack::dtype{static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float), 16, 1}, 2};
    case KvDtype::Fp32:
      return {nb::dtype<float>(), 4};
    case KvDtype::Fp8:
      return {nb::dtype<std::uint8_t>(), 1};
  }
  return {nb::dtype<std::uint8_t>(), 1};
}
const Element kBytes{nb::dlpack::dtype{static_cast<std::uint8_t>(nb::dlpack::dtype_code::UInt), 8, 1}, 1};
const Element kFloat{nb::dtype<float>(), 4};
const Element kInt8{nb::dtype<std::int8_t>(), 1};

/// The views of one layer: every tensor starts `offset` bytes into each page's layer block.
class LayerViews {
 public:
  LayerViews(const std::shared_ptr<session::PageMemory>& memory, const kernels::GroupPages& pages, std::uint32_t layer)
      : memory_(memory), pages_(pages), layer_(layer) {}

  /// A [pages, dims...] view: `byte_strides` of the dims after the page one, in bytes.
  template <std::size_t N>
  void add(const char* name, std::size_t offset, const std::array<std::size_t, N>& dims,
           const std::array<std::size_t, N>& byte_strides, Element element) {
    std::array<std::size_t, N + 1> shape{};
    std::array<std::int64_t, N + 1> strides{};
    shape[0] = pages_.capacity;
    strides[0] = static_cast<std::int64_t>(pages_.page_stride / element.bytes);
    KVTIER_EXPECTS(pages_.page_stride % element.bytes == 0 && offset % element.bytes == 0, "view ", name,
                   " is not aligned to its element");
    for (std::size_t i = 0; i < N; ++i) {
      KVTIER_EXPECTS(byte_strides[i] % element.bytes == 0, "view ", name, " is not aligned to its element");
      shape[i + 1] = dims[i];
      strides[i + 1] = static_cast<std::int64_t>(byte_strides[i] / element.bytes);
    }
    const memory::KvPool& pool = memory_->pool();
    std::byte* data = pool.slab() + pages_.layer_block_offset(0, layer_) + offset;
    nb::capsule owner(new std::shared_ptr<session::PageMemory>(memory_),
                      [](void* p) noexcept { delete static_cast<std::shared_ptr<session::PageMemory>*>(p); });
    const bool cuda = pool.runtime().kind() == memory::RuntimeKind::Cuda;
    out_[name] = Tensor(data, N + 1, shape.data(), owner, strides.data(), element.dtype,
                        cuda ? nb::device::cuda::value : nb::device::cpu::value,
                        cuda ? pool.runtime().device_info().ordinal : 0);
  }
  nb::dict take() { return std::move(out_); }

 private:
  std::shared_ptr<session::PageMemory> memory_;
  kernels::GroupPages pages_;
  std::uint32_t layer_;
  nb::dict out_;
};

void add_key_value(LayerViews& views, const PageFormat& f) {
  for (const KvPart part : {KvPart::Key, KvPart::Value}) {
    const bool key = part == KvPart::Key;
    const std::size_t dim = f.head_dim_of(part);
    const std::size_t row_stride = f.row_offset(part, 0, 1) - f.row_offset(part, 0, 0);
    const std::size_t token_stride = f.row_offset(part, 1, 0) - f.row_offset(part, 0, 0);
    Element element = kBytes;
    std::size_t width = f.row_data_bytes(part);
    if (f.quant == KvQuant::None) {
      element = plain(f.dtype);
      width = dim;
    } else if (f.quant == KvQuant::Int8PerTokenHead) {
      element = kInt8;
    }
    views.add<3>(key ? "key" : "value", f.row_offset(part, 0, 0), {f.block_size, f.kv_heads, width},
                 {token_stride, row_stride, element.bytes}, element);
    if (f.scales_inline_after_row()) {
      views.add<2>(key ? "key_scale" : "value_scale", f.row_scale_offset(part, 0, 0), {f.block_size, f.kv_heads},
                   {token_stride, row_stride}, kFloat);
    } else if (f.quant == KvQuant::Nvfp4) {
      const std::size_t scales = f.row_scale_bytes(part);
      views.add<3>(key ? "key_scale" : "value_scale", f.row_scale_offset(part, 0, 0),
                   {f.block_size, f.kv_heads, scales}, {f.kv_heads * scales, scales, 1}, kBytes);
    }
  }
}

void add_latent(LayerViews& views, const PageFormat& f) {
  const std::size_t token = f.token_bytes();
  const Element latent = f.quant == KvQuant::None ? plain(f.dtype) : kBytes;
  views.add<2>("latent", f.latent_offset(0), {f.block_size, f.latent_dim}, {token, latent.bytes}, latent);
  if (f.quant == KvQuant::Fp8DsMla) {
    views.add<2>("latent_scale", f.latent_scale_offset(0), {f.block_size, f.latent_dim / kDsMlaTile}, {token, 4},
                 kFloat);
  }
  if (f.rope_dim == 0) return;
  const Element rope = f.quant == KvQuant::Fp8DsMla ? plain(KvDtype::Bf16) : latent;
  views.add<2>("rope", f.rope_offset(0), {f.block_size, f.rope_dim}, {token, rope.bytes}, rope);
}

}  // namespace

nb::dict group_views(const std::shared_ptr<session::PageMemory>& memory, const kernels::GroupPages& pages,
                     std::uint32_t layer) {
  KVTIER_EXPECTS(layer < pages.layers, "layer ", layer, " is outside the group's ", pages.layers, " layers");
  LayerViews views(memory, pages, layer);
  const PageFormat& f = pages.format;
  switch (f.content) {
    case PageContent::KeyValue:
      add_key_value(views, f);
      break;
    case PageContent::MlaLatent:
      add_latent(views, f);
      break;
    case PageContent::MambaState:
      views.add<1>("conv", 0, {static_cast<std::size_t>(f.conv_state_bytes)}, {1}, kBytes);
      views.add<1>("recurrent", static_cast<std::size_t>(f.conv_state_bytes),
                   {static_cast<std::size_t>(f.state_bytes - f.conv_state_bytes)}, {1}, kBytes);
      break;
  }
  return views.take();
}

}  // namespace kvtier::python
