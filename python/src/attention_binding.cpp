// Manager.paged_attention: kvtier's decode paged-attention kernel (its CPU
// reference on the host runtime) over the manager's own pages, on tensors
// from numpy or torch — so Python can check the pages against another
// attention implementation.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>

#include <cmath>
#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"
#include "kvtier/kernels/reference/paged_attention.hpp"
#include "py_manager.hpp"

#if KVTIER_WITH_CUDA
#include "kvtier/kernels/kv_kernels.hpp"
#endif

namespace nb = nanobind;
using namespace nb::literals;

namespace kvtier::python {
namespace {

using Floats = nb::ndarray<float, nb::c_contig>;
using Ints = nb::ndarray<std::int32_t, nb::c_contig>;

void require(bool ok, const std::string& what) { KVTIER_EXPECTS(ok, "paged_attention: " + what); }

}  // namespace

void bind_attention(nb::class_<PyManager>& c) {
  c.def(
      "paged_attention",
      [](PyManager& m, Floats query, Ints block_tables, Ints seq_lens, nb::handle out_array, std::uint32_t layer,
         std::optional<float> scale, std::uintptr_t stream) {
        // `out` is written in place: a converted copy (another dtype, strided, read-only) would
        // take the result and leave the caller's array as it was.
        Floats out;
        if (!nb::try_cast(out_array, out, false)) {
          throw nb::type_error(
              "paged_attention: out must be a writable, C-contiguous float32 array (it is written in place)");
        }
        const KvLayout& layout = m.session().pool().layout();
        const bool cuda = m.session().runtime().kind() == memory::RuntimeKind::Cuda;
        const int device = cuda ? nb::device::cuda::value : nb::device::cpu::value;
        for (int type : {query.device_type(), block_tables.device_type(), seq_lens.device_type(), out.device_type()}) {
          require(type == device,
                  std::string("every tensor must live on the manager's device (") + (cuda ? "cuda" : "cpu") + ")");
        }
        require(query.ndim() == 3 && query.shape(2) == layout.geometry().head_dim,
                "query must be [seqs, q_heads, head_dim]");
        const std::uint32_t seqs = static_cast<std::uint32_t>(query.shape(0));
        require(out.ndim() == 3 && out.shape(0) == query.shape(0) && out.shape(1) == query.shape(1) &&
                    out.shape(2) == query.shape(2),
                "out must have the query's shape");
        require(block_tables.ndim() == 2 && block_tables.shape(0) == seqs && block_tables.shape(1) >= 1,
                "block_tables must be [seqs, max_blocks]");
        require(seq_lens.ndim() == 1 && seq_lens.shape(0) == seqs, "seq_lens must be [seqs]");
        const kernels::PagedAttentionArgs args{
            .query = query.data(),
            .block_tables = block_tables.data(),
            .seq_lens = seq_lens.data(),
            .out = out.data(),
            .seqs = seqs,
            .q_heads = static_cast<std::uint32_t>(query.shape(1)),
            .max_blocks = static_cast<std::uint32_t>(block_tables.shape(1)),
            .layer = layer,
            .scale = scale.value_or(1.0f / std::sqrt(static_cast<float>(layout.geometry().head_dim)))};
        if (!cuda) {
          kernels::reference::paged_attention_decode(m.session().pool().slab(), layout, args);
          return;
        }
#if KVTIER_WITH_CUDA
        require(args.q_heads != 0 && args.q_heads % layout.geometry().kv_heads == 0,
                "query heads must be a multiple of the KV heads");
        require(layer < layout.geometry().layers, "layer is outside the layout");
        const cudaError_t status = kernels::launch_paged_attention_decode(m.session().pool().slab(), layout, args,
                                                                          reinterpret_cast<cudaStream_t>(stream));
        if (status != cudaSuccess) {
          throw CudaError(static_cast<int>(status), cudaGetErrorName(status), "launch_paged_attention_decode", __FILE__,
                          __LINE__);
        }
#else
        (void)stream;
#endif
      },
      "query"_a, "block_tables"_a, "seq_lens"_a, "out"_a, "layer"_a, "scale"_a = nb::none(), "stream"_a = 0,
      "Decode attention of one query token per sequence over the pool's pages of `layer`, read through the "
      "int32 block tables; float32 query/out [seqs, q_heads, head_dim] (GQA: q_heads a multiple of kv_heads). "
      "On CUDA it is enqueued on `stream` (a cudaStream_t as int, e.g. torch.cuda.current_stream().cuda_stream).");
}

}  // namespace kvtier::python
