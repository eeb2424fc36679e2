#include "dlpack_views.hpp"

#include <algorithm>
#include <memory>
#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace nb = nanobind;

namespace kvtier::python {
namespace {

nb::dlpack::dtype element_type(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::Bf16:
      return nb::dlpack::dtype{static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bfloat), 16, 1};
    case KvDtype::Fp16:
      return nb::dlpack::dtype{static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
    case KvDtype::Fp32:
      return nb::dtype<float>();
    case KvDtype::Fp8:
      return nb::dtype<std::uint8_t>();
  }
  return nb::dtype<std::uint8_t>();
}

int device_type(const memory::Runtime& runtime) {
  return runtime.kind() == memory::RuntimeKind::Cuda ? nb::device::cuda::value : nb::device::cpu::value;
}

int device_id(const memory::Runtime& runtime) {
  return runtime.kind() == memory::RuntimeKind::Cuda ? runtime.device_info().ordinal : 0;
}

}  // namespace

Tensor kv_view(const std::shared_ptr<session::PageMemory>& memory, std::uint32_t layer, KvPart part, bool as_bytes) {
  memory::KvPool& pool = memory->pool();
  const KvLayout& layout = pool.layout();
  const KvGeometry& g = layout.geometry();
  KVTIER_EXPECTS(layer < g.layers,
                 "layer " + std::to_string(layer) + " is outside the layout's " + std::to_string(g.layers) + " layers");
  const std::size_t element = as_bytes ? 1 : dtype_bytes(g.dtype);
  const std::size_t page_stride_bytes =
      layout.layout() == PageLayout::PageMajor ? layout.page_bytes() : layout.layer_page_bytes();
  const std::size_t row = std::size_t{g.head_dim} * dtype_bytes(g.dtype) / element;  // last dim, in elements
  const std::size_t shape[4] = {layout.capacity(), g.tokens_per_block, g.kv_heads, row};
  const std::int64_t strides[4] = {static_cast<std::int64_t>(page_stride_bytes / element),
                                   static_cast<std::int64_t>(layout.token_bytes() / element),
                                   static_cast<std::int64_t>(row), 1};
  std::byte* data = pool.slab() + layout.offset(0, layer, part, 0, 0);
  const memory::Runtime& runtime = pool.runtime();
  // The capsule shares the pages: they live as long as the longest-lived of the manager and its views.
  nb::capsule owner(new std::shared_ptr<session::PageMemory>(memory),
                    [](void* p) noexcept { delete static_cast<std::shared_ptr<session::PageMemory>*>(p); });
  return Tensor(data, 4, shape, owner, strides, as_bytes ? nb::dtype<std::uint8_t>() : element_type(g.dtype),
                device_type(runtime), device_id(runtime));
}

Tensor block_table_tensor(memory::Runtime& runtime, std::span<const std::span<const PageId>> tables,
                          std::uint32_t max_blocks) {
  std::size_t longest = 0;
  for (const auto table : tables) longest = std::max(longest, table.size());
  KVTIER_EXPECTS(longest <= max_blocks, "a block table of " + std::to_string(longest) +
                                            " blocks does not fit max_blocks " + std::to_string(max_blocks));
  const std::size_t rows = tables.size();
  const std::size_t bytes = std::max<std::size_t>(1, rows * max_blocks) * sizeof(std::int32_t);
  memory::PinnedBuffer staging = runtime.allocate_pinned(bytes);
  auto* host = static_cast<std::int32_t*>(staging.data());
  std::fill(host, host + rows * max_blocks, -1);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t b = 0; b < tables[r].size(); ++b)
      host[r * max_blocks + b] = static_cast<std::int32_t>(tables[r][b].value());
  }
  auto device = std::make_unique<memory::DeviceBuffer>(runtime.allocate_device(bytes));
  memory::Stream stream = runtime.create_stream();
  stream.copy_async(CopyDescriptor{.src = staging.data(), .dst = device->data(), .bytes = bytes});
  stream.synchronize();  // the staging buffer dies with this call
  void* data = device->data();
  // The capsule owns the allocation; the tensor (and whoever imports it) keeps the capsule.
  nb::capsule owner(device.release(), [](void* p) noexcept { delete static_cast<memory::DeviceBuffer*>(p); });
  const std::size_t shape[2] = {rows, max_blocks};
  return Tensor(data, 2, shape, owner, nullptr, nb::dtype<std::int32_t>(), device_type(runtime), device_id(runtime));
}

nb::ndarray<nb::numpy, std::int32_t> host_block_table(std::span<const PageId> table) {
  auto values = std::make_unique<std::vector<std::int32_t>>(table.size());
  for (std::size_t i = 0; i < table.size(); ++i) (*values)[i] = static_cast<std::int32_t>(table[i].value());
  std::int32_t* data = values->data();
  nb::capsule owner(values.release(), [](void* p) noexcept { delete static_cast<std::vector<std::int32_t>*>(p); });
  const std::size_t shape[1] = {table.size()};
  return nb::ndarray<nb::numpy, std::int32_t>(data, 1, shape, owner);
}

}  // namespace kvtier::python
