#include "kvtier/kernels/group_attention.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kvtier/core/errors.hpp"

namespace kvtier::kernels {

void check_group_attention_args(const GroupPages& pages, const GroupAttentionArgs& args) {
  check_group_pages(pages);
  const PageFormat& f = pages.format;
  if (f.content == PageContent::MambaState) throw ContractError("group attention: a Mamba state is not attended");
  const std::uint32_t kv_heads = shared_kv_heads(f);
  if (args.q_heads == 0 || args.q_heads % kv_heads != 0) {
    throw ContractError("group attention: " + std::to_string(args.q_heads) + " query heads is not a multiple of " +
                        std::to_string(kv_heads) + " KV heads");
  }
  if (args.layer >= pages.layers) throw ContractError("group attention: layer is outside the group");
  if (args.span != AttentionSpan::Full && args.window == 0) {
    throw ContractError("group attention: a sliding window or a chunk needs its size");
  }
  for (std::uint32_t s = 0; s < args.seqs; ++s) {
    const std::int32_t length = args.seq_lens[s];
    if (length < 0 || static_cast<std::uint64_t>(length) > std::uint64_t{args.max_blocks} * f.block_size) {
      throw ContractError("group attention: sequence " + std::to_string(s) + " length " + std::to_string(length) +
                          " does not fit its block table");
    }
    const auto n = static_cast<std::uint32_t>(length);
    const std::uint32_t first = first_attended_token(args.span, args.window, n) / f.block_size;
    const std::uint32_t used = (n + f.block_size - 1) / f.block_size;
    for (std::uint32_t b = first; b < used; ++b) {
      const std::int32_t page = args.block_tables[std::size_t{s} * args.max_blocks + b];
      if (page < 0 || static_cast<std::uint32_t>(page) >= pages.capacity) {
        throw ContractError("group attention: sequence " + std::to_string(s) + " names page " + std::to_string(page) +
                            " outside the pool");
      }
    }
  }
}

namespace reference {

void group_attention_decode(const std::byte* slab, const GroupPages& pages, const GroupAttentionArgs& args) {
  check_group_attention_args(pages, args);
  const PageFormat& f = pages.format;
  const std::uint32_t per_kv_head = args.q_heads / shared_kv_heads(f);
  const std::uint32_t in_width = query_width(f);
  const std::uint32_t out_width = output_width(f);
  std::vector<float> weights;
  for (std::uint32_t s = 0; s < args.seqs; ++s) {
    const auto length = static_cast<std::uint32_t>(args.seq_lens[s]);
    const std::uint32_t first = first_attended_token(args.span, args.window, length);
    const std::int32_t* table = args.block_tables + std::size_t{s} * args.max_blocks;
    for (std::uint32_t qh = 0; qh < args.q_heads; ++qh) {
      const std::uint32_t kv_head = qh / per_kv_head;
      const float* q = args.query + (std::size_t{s} * args.q_heads + qh) * in_width;
      float* out = args.out + (std::size_t{s} * args.q_heads + qh) * out_width;
      if (length == 0) {  // nothing to attend to: zeros, never NaN (the kernel agrees)
        std::fill(out, out + out_width, 0.0f);
        continue;
      }
      weights.assign(length - first, 0.0f);
      const float sink = args.sinks != nullptr ? args.sinks[qh] : -INFINITY;
      float max_score = sink;
      for (std::uint32_t t = first; t < length; ++t) {
        weights[t - first] = attention_dot(slab, pages, args, table, q, kv_head, t) * args.scale;
        max_score = std::max(max_score, weights[t - first]);
      }
      float total = args.sinks != nullptr ? std::exp(sink - max_score) : 0.0f;
      for (float& w : weights) {
        w = std::exp(w - max_score);
        total += w;
      }
      for (std::uint32_t d = 0; d < out_width; ++d) {
        float acc = 0.0f;
        for (std::uint32_t t = first; t < length; ++t) {
          acc += weights[t - first] * attention_value(slab, pages, args, table, kv_head, t, d);
        }
        out[d] = acc / total;
      }
    }
  }
}

}  // namespace reference
}  // namespace kvtier::kernels
