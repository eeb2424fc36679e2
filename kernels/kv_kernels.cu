#include <algorithm>
#include <cmath>

#include "block_reduce.cuh"
#include "kvtier/kernels/kv_kernels.hpp"
#include "kvtier/kernels/paged_kv.hpp"
#include "launch.cuh"
#include "shared_memory.cuh"

namespace kvtier::kernels {
namespace {

constexpr unsigned kThreads = 128;

__global__ void write_kv_kernel(std::byte* slab, KvLayout layout, std::uint32_t layer, const float* key,
                                const float* value, const std::int64_t* slot_mapping) {
  const std::int64_t slot = slot_mapping[blockIdx.x];
  const auto slots = static_cast<std::int64_t>(layout.capacity()) * layout.geometry().tokens_per_block;
  if (slot < 0 || slot >= slots) return;  // padding; a slot outside the pool is never written
  const KvGeometry& g = layout.geometry();
  const std::uint32_t row = g.kv_heads * g.head_dim;
  for (std::uint32_t i = threadIdx.x; i < row; i += blockDim.x) {
    const std::uint32_t head = i / g.head_dim;
    const std::uint32_t dim = i % g.head_dim;
    const std::size_t at = std::size_t{blockIdx.x} * row + i;
    store_kv_element(slab + slot_element_offset(layout, slot, layer, KvPart::Key, head, dim), g.dtype, key[at]);
    store_kv_element(slab + slot_element_offset(layout, slot, layer, KvPart::Value, head, dim), g.dtype, value[at]);
  }
}

// One block per (sequence, query head): scores in shared memory, then a
// max-subtracted softmax, then each thread owns output dimensions. Device
// inputs are bounded here: a length beyond the block table is clamped to it,
// a token on a page outside the pool is skipped, and a sequence with nothing
// to attend to gets zeros (as the reference defines).
__global__ void paged_attention_decode_kernel(const std::byte* slab, KvLayout layout, PagedAttentionArgs args) {
  extern __shared__ float scores[];
  __shared__ float scratch[kThreads / 32];
  const std::uint32_t seq = blockIdx.x;
  const std::uint32_t q_head = blockIdx.y;
  const KvGeometry& g = layout.geometry();
  const std::uint32_t kv_head = q_head / (args.q_heads / g.kv_heads);
  const std::int32_t given = args.seq_lens[seq];
  const std::uint32_t length =
      given <= 0 ? 0U : min(static_cast<std::uint32_t>(given), args.max_blocks * g.tokens_per_block);
  const std::int32_t* table = args.block_tables + std::size_t{seq} * args.max_blocks;
  const float* q = args.query + (std::size_t{seq} * args.q_heads + q_head) * g.head_dim;
  const auto in_pool = [&](std::uint32_t t) {
    const std::int32_t page = table[t / g.tokens_per_block];
    return page >= 0 && static_cast<std::uint32_t>(page) < layout.capacity();
  };

  float local_max = -INFINITY;
  for (std::uint32_t t = threadIdx.x; t < length; t += blockDim.x) {
    float score = -INFINITY;
    if (in_pool(t)) {
      float dot = 0.0f;
      for (std::uint32_t d = 0; d < g.head_dim; ++d) {
        dot += q[d] * load_paged(slab, layout, table, t, args.layer, KvPart::Key, kv_head, d);
      }
      score = dot * args.scale;
    }
    scores[t] = score;
    local_max = fmaxf(local_max, score);
  }
  const float max_score = block_reduce(local_max, scratch, true);
  float* out = args.out + (std::size_t{seq} * args.q_heads + q_head) * g.head_dim;
  if (max_score == -INFINITY) {  // nothing to attend to: zeros, never NaN
    for (std::uint32_t d = threadIdx.x; d < g.head_dim; d += blockDim.x) out[d] = 0.0f;
    return;
  }
  float local_sum = 0.0f;
  for (std::uint32_t t = threadIdx.x; t < length; t += blockDim.x) {
    scores[t] = expf(scores[t] - max_score);
    local_sum += scores[t];
  }
  const float total = block_reduce(local_sum, scratch, false);  // its barriers also publish scores[]
  for (std::uint32_t d = threadIdx.x; d < g.head_dim; d += blockDim.x) {
    float acc = 0.0f;
    for (std::uint32_t t = 0; t < length; ++t) {
      if (scores[t] != 0.0f)
        acc += scores[t] * load_paged(slab, layout, table, t, args.layer, KvPart::Value, kv_head, d);
    }
    out[d] = acc / total;
  }
}

constexpr unsigned kCopyThreads = 512;
constexpr unsigned kLoadsInFlight = 4;  // 16-byte loads each thread issues before it stores

// One block per chunk at a time (grid-stride over chunks). Each thread keeps
// kLoadsInFlight 16-byte loads in flight, so a few SMs saturate memory.
__global__ void copy_pages_kernel(const CopyDescriptor* chunks, std::uint32_t count) {
  for (std::uint32_t c = blockIdx.x; c < count; c += gridDim.x) {
    const CopyDescriptor chunk = chunks[c];
    const auto src = reinterpret_cast<std::uintptr_t>(chunk.src);
    const auto dst = reinterpret_cast<std::uintptr_t>(chunk.dst);
    if (((src | dst | chunk.bytes) & 15U) == 0) {
      const auto* from = static_cast<const uint4*>(chunk.src);
      auto* to = static_cast<uint4*>(chunk.dst);
      const std::size_t vectors = chunk.bytes / 16;
      constexpr std::size_t kStride = std::size_t{kCopyThreads} * kLoadsInFlight;
      std::size_t base = 0;
      for (; base + kStride <= vectors; base += kStride) {
        uint4 staged[kLoadsInFlight];
#pragma unroll
        for (unsigned k = 0; k < kLoadsInFlight; ++k) staged[k] = from[base + k * blockDim.x + threadIdx.x];
#pragma unroll
        for (unsigned k = 0; k < kLoadsInFlight; ++k) to[base + k * blockDim.x + threadIdx.x] = staged[k];
      }
      for (std::size_t i = base + threadIdx.x; i < vectors; i += blockDim.x) to[i] = from[i];
    } else {
      const auto* from = static_cast<const unsigned char*>(chunk.src);
      auto* to = static_cast<unsigned char*>(chunk.dst);
      for (std::size_t i = threadIdx.x; i < chunk.bytes; i += blockDim.x) to[i] = from[i];
    }
  }
}

}  // namespace

cudaError_t launch_write_kv(std::byte* slab, const KvLayout& layout, std::uint32_t layer, const float* key,
                            const float* value, std::uint32_t tokens, const std::int64_t* slot_mapping,
                            cudaStream_t stream) {
  if (tokens == 0) return cudaSuccess;
  if (slab == nullptr || key == nullptr || value == nullptr || slot_mapping == nullptr ||
      layer >= layout.geometry().layers) {
    return cudaErrorInvalidValue;
  }
  return launch(write_kv_kernel, dim3(tokens), dim3(kThreads), 0, stream, slab, layout, layer, key, value,
                slot_mapping);
}

cudaError_t launch_paged_attention_decode(const std::byte* slab, const KvLayout& layout, const PagedAttentionArgs& args,
                                          cudaStream_t stream) {
  if (args.seqs == 0) return cudaSuccess;
  const KvGeometry& g = layout.geometry();
  if (slab == nullptr || args.query == nullptr || args.block_tables == nullptr || args.seq_lens == nullptr ||
      args.out == nullptr || args.q_heads == 0 || args.q_heads % g.kv_heads != 0 || args.layer >= g.layers ||
      args.q_heads > 65535 || args.max_blocks == 0) {
    return cudaErrorInvalidValue;
  }
  const std::size_t shared = std::size_t{args.max_blocks} * g.tokens_per_block * sizeof(float);
  if (const cudaError_t status =
          allow_dynamic_shared_memory(paged_attention_decode_kernel, shared, sizeof(float) * (kThreads / 32));
      status != cudaSuccess) {
    return status;
  }
  return launch(paged_attention_decode_kernel, dim3(args.seqs, args.q_heads), dim3(kThreads), shared, stream, slab,
                layout, args);
}

cudaError_t launch_copy_pages(const CopyDescriptor* chunks, std::uint32_t count, std::uint32_t max_sms,
                              cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (chunks == nullptr || max_sms == 0) return cudaErrorInvalidValue;
  // One block per SM it may use: a block runs on one SM, so at most max_sms
  // SMs are ever busy copying (the rest stay free for compute).
  const std::uint32_t blocks = std::min(count, max_sms);
  return launch(copy_pages_kernel, dim3(blocks), dim3(kCopyThreads), 0, stream, chunks, count);
}

}  // namespace kvtier::kernels
