#include "kvtier/kernels/reference/paged_attention.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kvtier/core/errors.hpp"
#include "kvtier/kernels/paged_kv.hpp"

namespace kvtier::kernels {

void check_paged_attention_args(const KvLayout& layout, const PagedAttentionArgs& args) {
  const KvGeometry& g = layout.geometry();
  if (args.q_heads == 0 || args.q_heads % g.kv_heads != 0) {
    throw ContractError("paged attention: " + std::to_string(args.q_heads) + " query heads is not a multiple of " +
                        std::to_string(g.kv_heads) + " KV heads");
  }
  if (args.layer >= g.layers) throw ContractError("paged attention: layer is outside the layout");
  for (std::uint32_t s = 0; s < args.seqs; ++s) {
    const std::int32_t length = args.seq_lens[s];
    if (length < 0 || static_cast<std::uint64_t>(length) > std::uint64_t{args.max_blocks} * g.tokens_per_block) {
      throw ContractError("paged attention: sequence " + std::to_string(s) + " length " + std::to_string(length) +
                          " does not fit its block table");
    }
    const std::uint32_t used = (static_cast<std::uint32_t>(length) + g.tokens_per_block - 1) / g.tokens_per_block;
    for (std::uint32_t b = 0; b < used; ++b) {
      const std::int32_t page = args.block_tables[std::size_t{s} * args.max_blocks + b];
      if (page < 0 || static_cast<std::uint32_t>(page) >= layout.capacity()) {
        throw ContractError("paged attention: sequence " + std::to_string(s) + " names page " + std::to_string(page) +
                            " outside the pool");
      }
    }
  }
}

namespace reference {

void paged_attention_decode(const std::byte* slab, const KvLayout& layout, const PagedAttentionArgs& args) {
  check_paged_attention_args(layout, args);
  const KvGeometry& g = layout.geometry();
  const std::uint32_t group = args.q_heads / g.kv_heads;
  std::vector<float> scores;
  for (std::uint32_t s = 0; s < args.seqs; ++s) {
    const auto length = static_cast<std::uint32_t>(args.seq_lens[s]);
    const std::int32_t* table = args.block_tables + std::size_t{s} * args.max_blocks;
    scores.assign(length, 0.0f);
    for (std::uint32_t qh = 0; qh < args.q_heads; ++qh) {
      const std::uint32_t kvh = qh / group;
      const float* q = args.query + (std::size_t{s} * args.q_heads + qh) * g.head_dim;
      float max_score = -INFINITY;
      for (std::uint32_t t = 0; t < length; ++t) {
        float dot = 0.0f;
        for (std::uint32_t d = 0; d < g.head_dim; ++d) {
          dot += q[d] * load_paged(slab, layout, table, t, args.layer, KvPart::Key, kvh, d);
        }
        scores[t] = dot * args.scale;
        max_score = std::max(max_score, scores[t]);
      }
      float total = 0.0f;
      for (float& score : scores) {
        score = std::exp(score - max_score);
        total += score;
      }
      float* out = args.out + (std::size_t{s} * args.q_heads + qh) * g.head_dim;
      if (length == 0) {  // nothing to attend to: zeros, never NaN (the kernel agrees)
        std::fill(out, out + g.head_dim, 0.0f);
        continue;
      }
      for (std::uint32_t d = 0; d < g.head_dim; ++d) {
        float acc = 0.0f;
        for (std::uint32_t t = 0; t < length; ++t) {
          acc += scores[t] * load_paged(slab, layout, table, t, args.layer, KvPart::Value, kvh, d);
        }
        out[d] = acc / total;
      }
    }
  }
}

}  // namespace reference
}  // namespace kvtier::kernels
