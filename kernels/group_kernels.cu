#include <cmath>

#include "block_reduce.cuh"
#include "kvtier/kernels/group_kernels.hpp"
#include "launch.cuh"
#include "shared_memory.cuh"

namespace kvtier::kernels {
namespace {

constexpr unsigned kThreads = 128;

// One block per token, one thread per K or V row (head): the row's scales
// (per token-head, NVFP4 blocks) are the thread's own.
__global__ void write_group_kv_kernel(std::byte* slab, GroupPages pages, std::uint32_t layer, const float* key,
                                      const float* value, const std::int64_t* slot_mapping, LayerScales scales) {
  const std::int64_t slot = slot_mapping[blockIdx.x];
  if (slot < 0 || static_cast<std::uint64_t>(slot) >= pages.slots()) return;  // padding, or outside the pool
  const PageFormat& f = pages.format;
  const auto page = static_cast<std::uint32_t>(slot / f.block_size);
  const auto token = static_cast<std::uint32_t>(slot % f.block_size);
  std::byte* block = slab + pages.layer_block_offset(page, layer);
  for (std::uint32_t row = threadIdx.x; row < 2 * f.kv_heads; row += blockDim.x) {
    const KvPart part = row < f.kv_heads ? KvPart::Key : KvPart::Value;
    const std::uint32_t head = row % f.kv_heads;
    const std::uint32_t dim = f.head_dim_of(part);
    const float* x = (part == KvPart::Key ? key : value) + (std::size_t{blockIdx.x} * f.kv_heads + head) * dim;
    store_kv_row(block, f, part, token, head, x, part == KvPart::Key ? scales.key : scales.value);
  }
}

// One thread per token: a token's tile scales need its whole latent.
__global__ void write_mla_kernel(std::byte* slab, GroupPages pages, std::uint32_t layer, const float* latent,
                                 const float* rope, std::uint32_t tokens, const std::int64_t* slot_mapping,
                                 LayerScales scales) {
  const std::uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= tokens) return;
  const std::int64_t slot = slot_mapping[t];
  if (slot < 0 || static_cast<std::uint64_t>(slot) >= pages.slots()) return;
  const PageFormat& f = pages.format;
  store_mla_token(slab + pages.layer_block_offset(static_cast<std::uint32_t>(slot / f.block_size), layer), f,
                  static_cast<std::uint32_t>(slot % f.block_size), latent + std::size_t{t} * f.latent_dim,
                  rope + std::size_t{t} * f.rope_dim, scales.key);
}

// One block per (sequence, query head), as paged_attention_decode_kernel, over
// the attended tokens [first, length) only: what a window left behind (null
// page entries) is never read.
__global__ void group_attention_decode_kernel(const std::byte* slab, GroupPages pages, GroupAttentionArgs args) {
  extern __shared__ float scores[];
  __shared__ float scratch[kThreads / 32];
  const PageFormat& f = pages.format;
  const std::uint32_t seq = blockIdx.x;
  const std::uint32_t q_head = blockIdx.y;
  const std::uint32_t kv_head = q_head / (args.q_heads / shared_kv_heads(f));
  const std::int32_t given = args.seq_lens[seq];
  const std::uint32_t length = given <= 0 ? 0U : min(static_cast<std::uint32_t>(given), args.max_blocks * f.block_size);
  const std::uint32_t first = first_attended_token(args.span, args.window, length);
  const std::int32_t* table = args.block_tables + std::size_t{seq} * args.max_blocks;
  const float* q = args.query + (std::size_t{seq} * args.q_heads + q_head) * query_width(f);
  const auto in_pool = [&](std::uint32_t t) {
    const std::int32_t page = table[t / f.block_size];
    return page >= 0 && static_cast<std::uint32_t>(page) < pages.capacity;
  };

  float local_max = -INFINITY;
  for (std::uint32_t t = first + threadIdx.x; t < length; t += blockDim.x) {
    const float score = in_pool(t) ? attention_dot(slab, pages, args, table, q, kv_head, t) * args.scale : -INFINITY;
    scores[t - first] = score;
    local_max = fmaxf(local_max, score);
  }
  const float attended_max = block_reduce(local_max, scratch, true);
  const std::uint32_t width = output_width(f);
  float* out = args.out + (std::size_t{seq} * args.q_heads + q_head) * width;
  if (attended_max == -INFINITY) {  // nothing to attend to: zeros, never NaN
    for (std::uint32_t d = threadIdx.x; d < width; d += blockDim.x) out[d] = 0.0f;
    return;
  }
  // An attention sink joins the denominator only (gpt-oss).
  const float sink = args.sinks != nullptr ? args.sinks[q_head] : -INFINITY;
  const float max_score = fmaxf(attended_max, sink);
  float local_sum = 0.0f;
  for (std::uint32_t t = first + threadIdx.x; t < length; t += blockDim.x) {
    scores[t - first] = expf(scores[t - first] - max_score);
    local_sum += scores[t - first];
  }
  const float total = block_reduce(local_sum, scratch, false) +  // its barriers also publish scores[]
                      (args.sinks != nullptr ? expf(sink - max_score) : 0.0f);
  for (std::uint32_t d = threadIdx.x; d < width; d += blockDim.x) {
    float acc = 0.0f;
    for (std::uint32_t t = first; t < length; ++t) {
      if (scores[t - first] != 0.0f)
        acc += scores[t - first] * attention_value(slab, pages, args, table, kv_head, t, d);
    }
    out[d] = acc / total;
  }
}

bool pages_usable(const GroupPages& pages, std::uint32_t layer) {
  return layer < pages.layers && pages.format.block_size != 0 && pages.group_page_bytes() <= pages.page_stride;
}

}  // namespace

cudaError_t launch_write_group_kv(std::byte* slab, const GroupPages& pages, std::uint32_t layer, const float* key,
                                  const float* value, std::uint32_t tokens, const std::int64_t* slot_mapping,
                                  LayerScales scales, cudaStream_t stream) {
  if (tokens == 0) return cudaSuccess;
  if (slab == nullptr || key == nullptr || value == nullptr || slot_mapping == nullptr ||
      pages.format.content != PageContent::KeyValue || pages.format.kv_heads == 0 || !pages_usable(pages, layer)) {
    return cudaErrorInvalidValue;
  }
  return launch(write_group_kv_kernel, dim3(tokens), dim3(kThreads), 0, stream, slab, pages, layer, key, value,
                slot_mapping, scales);
}

cudaError_t launch_write_mla(std::byte* slab, const GroupPages& pages, std::uint32_t layer, const float* latent,
                             const float* rope, std::uint32_t tokens, const std::int64_t* slot_mapping,
                             LayerScales scales, cudaStream_t stream) {
  if (tokens == 0) return cudaSuccess;
  if (slab == nullptr || latent == nullptr || (rope == nullptr && pages.format.rope_dim != 0) ||
      slot_mapping == nullptr || pages.format.content != PageContent::MlaLatent || !pages_usable(pages, layer)) {
    return cudaErrorInvalidValue;
  }
  return launch(write_mla_kernel, dim3((tokens + kThreads - 1) / kThreads), dim3(kThreads), 0, stream, slab, pages,
                layer, latent, rope, tokens, slot_mapping, scales);
}

cudaError_t launch_group_attention_decode(const std::byte* slab, const GroupPages& pages,
                                          const GroupAttentionArgs& args, cudaStream_t stream) {
  if (args.seqs == 0) return cudaSuccess;
  const PageFormat& f = pages.format;
  if (slab == nullptr || args.query == nullptr || args.block_tables == nullptr || args.seq_lens == nullptr ||
      args.out == nullptr || f.content == PageContent::MambaState || args.q_heads == 0 ||
      args.q_heads % shared_kv_heads(f) != 0 || args.q_heads > 65535 || args.max_blocks == 0 ||
      (args.span != AttentionSpan::Full && args.window == 0) || !pages_usable(pages, args.layer)) {
    return cudaErrorInvalidValue;
  }
  const std::size_t shared = std::size_t{args.max_blocks} * f.block_size * sizeof(float);
  if (const cudaError_t status =
          allow_dynamic_shared_memory(group_attention_decode_kernel, shared, sizeof(float) * (kThreads / 32));
      status != cudaSuccess) {
    return status;
  }
  return launch(group_attention_decode_kernel, dim3(args.seqs, args.q_heads), dim3(kThreads), shared, stream, slab,
                pages, args);
}

}  // namespace kvtier::kernels
