// Manager.paged_attention and Manager.attend: kvtier's decode paged-attention
// kernel (its CPU reference on the host runtime) over the manager's own
// pages, enqueued through Stream::paged_attention_async on the caller's
// stream — so Python can check the pages against another attention
// implementation, and drive a decode step without building tables itself.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/vector.h>

#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kernel_call.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"
#include "kvtier/kernels/reference/paged_attention.hpp"
#include "py_manager.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace kvtier::python {
namespace {

void require(bool ok, const std::string& what) { KVTIER_EXPECTS(ok, "paged_attention: ", what); }

/// `out` is written in place: a converted copy (another dtype, strided,
/// read-only) would take the result and leave the caller's array as it was.
Floats writable_out(nb::handle out_array, const char* call) {
  Floats out;
  if (!nb::try_cast(out_array, out, false)) {
    throw nb::type_error(
        (std::string(call) + ": out must be a writable, C-contiguous float32 array (it is written in place)").c_str());
  }
  return out;
}

void require_on_device(PyManager& m, std::initializer_list<int> types) {
  const bool cuda = on_cuda(m);
  const int device = cuda ? nb::device::cuda::value : nb::device::cpu::value;
  for (const int type : types) {
    require(type == device,
            std::string("every tensor must live on the manager's device (") + (cuda ? "cuda" : "cpu") + ")");
  }
}

/// query [seqs, q_heads, head_dim] and out of the same shape.
void require_query_shape(const KvLayout& layout, const Floats& query, const Floats& out, std::size_t seqs) {
  require(query.ndim() == 3 && query.shape(0) == seqs && query.shape(2) == layout.geometry().head_dim,
          "query must be [seqs, q_heads, head_dim]");
  require(out.ndim() == 3 && out.shape(0) == query.shape(0) && out.shape(1) == query.shape(1) &&
              out.shape(2) == query.shape(2),
          "out must have the query's shape");
}

float scale_or_default(const KvLayout& layout, std::optional<float> scale) {
  return scale.value_or(1.0f / std::sqrt(static_cast<float>(layout.geometry().head_dim)));
}

void enqueue(PyManager& m, const memory::AttentionDecode& step, std::uintptr_t stream,
             const std::function<memory::DeviceBlockTables(memory::Stream&)>& tables = {}) {
  run_on_stream(m, stream, [&](memory::Stream& on) {
    memory::AttentionDecode work = step;
    if (tables) {
      const memory::DeviceBlockTables built = tables(on);
      work.args.block_tables = built.tables;
      work.args.seq_lens = built.seq_lens;
      work.args.max_blocks = built.columns;
    }
    on.paged_attention_async(work);
  });
}

}  // namespace

void bind_attention(nb::class_<PyManager>& c) {
  c.def(
       "paged_attention",
       [](PyManager& m, Floats query, Ints block_tables, Ints seq_lens, nb::handle out_array, std::uint32_t layer,
          std::optional<float> scale, std::uintptr_t stream) {
         Floats out = writable_out(out_array, "paged_attention");
         const KvLayout& layout = m.session().pool().layout();
         require_on_device(
             m, {query.device_type(), block_tables.device_type(), seq_lens.device_type(), out.device_type()});
         const auto seqs = static_cast<std::uint32_t>(query.ndim() == 3 ? query.shape(0) : 0);
         require_query_shape(layout, query, out, seqs);
         require(block_tables.ndim() == 2 && block_tables.shape(0) == seqs && block_tables.shape(1) >= 1,
                 "block_tables must be [seqs, max_blocks]");
         require(seq_lens.ndim() == 1 && seq_lens.shape(0) == seqs, "seq_lens must be [seqs]");
         const memory::AttentionDecode step{.slab = m.session().pool().slab(),
                                            .layout = &layout,
                                            .args = {.query = query.data(),
                                                     .block_tables = block_tables.data(),
                                                     .seq_lens = seq_lens.data(),
                                                     .out = out.data(),
                                                     .seqs = seqs,
                                                     .q_heads = static_cast<std::uint32_t>(query.shape(1)),
                                                     .max_blocks = static_cast<std::uint32_t>(block_tables.shape(1)),
                                                     .layer = layer,
                                                     .scale = scale_or_default(layout, scale)}};
         // Host tables are the caller's arrays, readable now: a bad one is the caller's error, said at once.
         if (!on_cuda(m)) kernels::check_paged_attention_args(layout, step.args);
         enqueue(m, step, stream);
       },
       "query"_a, "block_tables"_a, "seq_lens"_a, "out"_a, "layer"_a, "scale"_a = nb::none(), "stream"_a = 0,
       "Decode attention of one query token per sequence over the pool's pages of `layer`, read through the "
       "int32 block tables; float32 query/out [seqs, q_heads, head_dim] (GQA: q_heads a multiple of kv_heads). "
       "On CUDA it is enqueued on `stream` (a cudaStream_t as int, e.g. torch.cuda.current_stream().cuda_stream; "
       "0: the legacy default stream); on the host runtime it has run when the call returns.")
      .def(
          "attend",
          [](PyManager& m, Floats query, std::vector<RequestState*> requests, nb::handle out_array, std::uint32_t layer,
             std::optional<float> scale, std::uintptr_t stream) {
            Floats out = writable_out(out_array, "attend");
            const KvLayout& layout = m.session().pool().layout();
            require_on_device(m, {query.device_type(), out.device_type()});
            require(!requests.empty(), "attend needs at least one request");
            require_query_shape(layout, query, out, requests.size());
            std::vector<g1::OwnerId> owners;
            std::vector<std::int32_t> lengths;
            for (RequestState* r : requests) {
              KVTIER_EXPECTS(r != nullptr, "attend: a request is None");
              m.session().check_request(*r);
              KVTIER_EXPECTS(r->computed_tokens > 0 && m.manager().has_owner(r->owner), "attend: request ",
                             r->owner.value(), " has no computed tokens in G1 (finalize it first)");
              owners.push_back(r->owner);
              lengths.push_back(static_cast<std::int32_t>(r->computed_tokens));
            }
            const memory::AttentionDecode step{.slab = m.session().pool().slab(),
                                               .layout = &layout,
                                               .args = {.query = query.data(),
                                                        .block_tables = nullptr,  // built on the step's stream
                                                        .seq_lens = nullptr,
                                                        .out = out.data(),
                                                        .seqs = static_cast<std::uint32_t>(owners.size()),
                                                        .q_heads = static_cast<std::uint32_t>(query.shape(1)),
                                                        .max_blocks = 1,
                                                        .layer = layer,
                                                        .scale = scale_or_default(layout, scale)}};
            // Refused before the tables are built (no copy enqueued for a step that cannot run).
            memory::AttentionDecode probe = step;
            probe.args.block_tables = probe.args.seq_lens = lengths.data();
            memory::check_attention_decode(probe);
            enqueue(m, step, stream,
                    [&](memory::Stream& on) { return m.session().stack().block_tables(owners, on, lengths); });
          },
          "query"_a, "requests"_a, "out"_a, "layer"_a, "scale"_a = nb::none(), "stream"_a = 0,
          "One decode step of paged attention for `requests` over their first computed_tokens tokens: their "
          "block tables and lengths go to the device in one copy through the manager's persistent block-table "
          "buffer (no allocation, no host wait on CUDA), then the kernel runs, both on `stream` as in "
          "paged_attention. query/out float32 [len(requests), q_heads, head_dim].");
}

}  // namespace kvtier::python
