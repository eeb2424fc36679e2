// Manager.write_kv and Manager.group_attention: kvtier's group kernels (their
// CPU references on the host runtime) over one KV cache group's pages, for a
// framework's own tensors — a model writes each new token's K/V (or MLA
// latent) into its slot in the group's page format, and attends through the
// group's block tables, so every value a layer reads came out of kvtier's
// pages (python/kvtier/hf: transformers models on kvtier).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>

#include <cmath>
#include <optional>
#include <string>

#include "kernel_call.hpp"
#include "kvtier/core/expects.hpp"
#include "kvtier/kernels/group_attention.hpp"
#include "kvtier/memory/group_work.hpp"
#include "py_manager.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace kvtier::python {
namespace {

using Slots = nb::ndarray<std::int64_t, nb::c_contig>;

struct Group {
  const ResolvedGroup& resolved;
  kernels::GroupPages pages;
};

Group group_of(PyManager& m, std::uint32_t group, std::uint32_t layer, const char* call) {
  const ModelGeometry* geometry = m.manager().geometry();
  KVTIER_EXPECTS(geometry != nullptr, call,
                 " is for a manager with KV cache groups (groups=, model= or model_config=)");
  KVTIER_EXPECTS(group < geometry->group_count(), call, ": group ", group, " is not one of the manager's ",
                 geometry->group_count());
  Group g{geometry->groups()[group], m.session().stack().group_pages(group)};
  KVTIER_EXPECTS(g.pages.format.content != PageContent::MambaState, call, ": group ", group,
                 " keeps a recurrent state, not tokens");
  KVTIER_EXPECTS(layer < g.pages.layers, call, ": layer ", layer, " is outside group ", group, "'s ", g.pages.layers,
                 " layers");
  return g;
}

void require_device(PyManager& m, int type, const char* call) {
  const bool cuda = on_cuda(m);
  KVTIER_EXPECTS(type == (cuda ? nb::device::cuda::value : nb::device::cpu::value), call,
                 ": every tensor must live on the manager's device (", cuda ? "cuda" : "cpu", ")");
}

bool has_shape(const Floats& a, std::initializer_list<std::size_t> shape) {
  if (a.ndim() != shape.size()) return false;
  std::size_t i = 0;
  for (const std::size_t n : shape) {
    if (a.shape(i++) != n) return false;
  }
  return true;
}

void write_kv(PyManager& m, std::uint32_t group, std::uint32_t layer, Floats first, std::optional<Floats> second,
              Slots slots, float key_scale, float value_scale, std::uintptr_t stream) {
  const Group g = group_of(m, group, layer, "write_kv");
  const PageFormat& f = g.pages.format;
  const bool mla = f.content == PageContent::MlaLatent;
  KVTIER_EXPECTS(slots.ndim() == 1, "write_kv: slots must be int64 [tokens]");
  const std::size_t tokens = slots.shape(0);
  require_device(m, slots.device_type(), "write_kv");
  require_device(m, first.device_type(), "write_kv");
  if (mla) {
    KVTIER_EXPECTS(has_shape(first, {tokens, f.latent_dim}), "write_kv: an MLA latent must be [tokens, ", f.latent_dim,
                   "]");
    KVTIER_EXPECTS(f.rope_dim == 0 ? !second : second && has_shape(*second, {tokens, f.rope_dim}),
                   "write_kv: the RoPE part must be [tokens, ", f.rope_dim, "]");
  } else {
    KVTIER_EXPECTS(has_shape(first, {tokens, f.kv_heads, f.head_dim}), "write_kv: key must be [tokens, ", f.kv_heads,
                   ", ", f.head_dim, "]");
    KVTIER_EXPECTS(second && has_shape(*second, {tokens, f.kv_heads, f.head_dim_of(KvPart::Value)}),
                   "write_kv: value must be [tokens, ", f.kv_heads, ", ", f.head_dim_of(KvPart::Value), "]");
  }
  if (second) require_device(m, second->device_type(), "write_kv");
  KVTIER_EXPECTS(std::isfinite(key_scale) && key_scale > 0 && std::isfinite(value_scale) && value_scale > 0,
                 "write_kv: scales must be positive");
  if (tokens == 0) return;
  const memory::GroupKvWrite write{.slab = m.session().pool().slab(),
                                   .pages = g.pages,
                                   .layer = layer,
                                   .first = first.data(),
                                   .second = second ? second->data() : nullptr,
                                   .tokens = static_cast<std::uint32_t>(tokens),
                                   .slots = slots.data(),
                                   .scales = {.key = key_scale, .value = value_scale},
                                   .inputs_on_device = on_cuda(m)};
  run_on_stream(m, stream, [&](memory::Stream& on) { on.write_group_kv_async(write); });
}

void group_attention(PyManager& m, std::uint32_t group, std::uint32_t layer, Floats query, Ints block_tables,
                     Ints seq_lens, nb::handle out_array, std::optional<float> scale, std::optional<Floats> sinks,
                     float key_scale, float value_scale, std::uintptr_t stream) {
  Floats out;
  if (!nb::try_cast(out_array, out, false)) {
    throw nb::type_error(
        "group_attention: out must be a writable, C-contiguous float32 array (it is written in place)");
  }
  const Group g = group_of(m, group, layer, "group_attention");
  const PageFormat& f = g.pages.format;
  for (const int type : {query.device_type(), block_tables.device_type(), seq_lens.device_type(), out.device_type()}) {
    require_device(m, type, "group_attention");
  }
  KVTIER_EXPECTS(query.ndim() == 3 && query.shape(2) == kernels::query_width(f),
                 "group_attention: query must be [rows, q_heads, ", kernels::query_width(f), "]");
  const std::size_t rows = query.shape(0);
  const std::size_t heads = query.shape(1);
  KVTIER_EXPECTS(has_shape(out, {rows, heads, kernels::output_width(f)}), "group_attention: out must be [rows, ", heads,
                 ", ", kernels::output_width(f), "]");
  KVTIER_EXPECTS(block_tables.ndim() == 2 && block_tables.shape(0) == rows && block_tables.shape(1) >= 1,
                 "group_attention: block_tables must be int32 [rows, max_blocks]");
  KVTIER_EXPECTS(seq_lens.ndim() == 1 && seq_lens.shape(0) == rows, "group_attention: seq_lens must be int32 [rows]");
  if (sinks) {
    require_device(m, sinks->device_type(), "group_attention");
    KVTIER_EXPECTS(has_shape(*sinks, {heads}), "group_attention: sinks must be float32 [q_heads]");
  }
  const GroupSpec& spec = g.resolved.spec;
  const kernels::AttentionSpan span = kernels::attention_span_of(spec.kind);
  const memory::GroupAttentionDecode step{
      .slab = m.session().pool().slab(),
      .pages = g.pages,
      .args = {.query = query.data(),
               .block_tables = block_tables.data(),
               .seq_lens = seq_lens.data(),
               .out = out.data(),
               .seqs = static_cast<std::uint32_t>(rows),
               .q_heads = static_cast<std::uint32_t>(heads),
               .max_blocks = static_cast<std::uint32_t>(block_tables.shape(1)),
               .layer = layer,
               .scale = scale.value_or(1.0f / std::sqrt(static_cast<float>(f.head_dim != 0 ? f.head_dim : 1))),
               .span = span,
               .window = span == kernels::AttentionSpan::ChunkedLocal ? spec.attention_chunk_size : spec.sliding_window,
               .scales = {.key = key_scale, .value = value_scale},
               .sinks = sinks ? sinks->data() : nullptr}};
  // Host tables are the caller's arrays, readable now: a bad one is the caller's error, said at once.
  if (!on_cuda(m)) kernels::check_group_attention_args(step.pages, step.args);
  if (rows == 0) return;
  run_on_stream(m, stream, [&](memory::Stream& on) { on.group_attention_async(step); });
}

}  // namespace

void bind_group_kernels(nb::class_<PyManager>& c) {
  c.def("write_kv", &write_kv, "group"_a, "layer"_a, "first"_a, "second"_a.none(), "slots"_a, "key_scale"_a = 1.0f,
        "value_scale"_a = 1.0f, "stream"_a = 0,
        "Writes `tokens` new tokens into layer `layer` of a KV cache group's pages, in the group's page format "
        "(quantized as the format says): K float32 [tokens, kv_heads, head_dim] and V [tokens, kv_heads, "
        "head_dim_v], or an MLA latent [tokens, latent_dim] and its RoPE part [tokens, rope_dim] (None without "
        "one); slots int64 [tokens] = page x block_size + offset (< 0: padding, skipped). On CUDA the tensors are "
        "device tensors and the write is enqueued on `stream`; on the host runtime it has run when the call returns.")
      .def("group_attention", &group_attention, "group"_a, "layer"_a, "query"_a, "block_tables"_a, "seq_lens"_a,
           "out"_a, "scale"_a = nb::none(), "sinks"_a = nb::none(), "key_scale"_a = 1.0f, "value_scale"_a = 1.0f,
           "stream"_a = 0,
           "Attention of one query token a row over a KV cache group's pages of `layer`, through int32 block "
           "tables [rows, max_blocks] and lengths [rows] (the query's position + 1), over the group's span (the "
           "whole sequence, its sliding window or its chunk); float32 query [rows, q_heads, width] and out. "
           "`sinks` float32 [q_heads]: gpt-oss's attention sinks. A prompt's tokens are rows of the same table "
           "with growing lengths: causal attention.");
}

}  // namespace kvtier::python
