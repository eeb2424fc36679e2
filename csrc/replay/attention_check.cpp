#include "kvtier/replay/attention_check.hpp"

#include <algorithm>
#include <cmath>

#include "kvtier/core/expects.hpp"
#include "kvtier/core/page_pattern.hpp"
#include "kvtier/replay/token_kv_writer.hpp"

namespace kvtier::replay {
namespace {

/// Small multiples of 1/8 in [-0.5, 0.375]: scores stay moderate over the
/// synthesized K ([-8, 7]), so the softmax spreads over many tokens.
void synthesize_query(std::uint64_t seed, std::span<float> out) {
  std::uint64_t word = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (i % 16 == 0) word = page_pattern_word(seed, i / 16);
    out[i] = static_cast<float>(static_cast<int>((word >> (4 * (i % 16))) & 7U) - 4) / 8.0f;
  }
}

bool close(float got, float want) { return std::abs(got - want) <= 2e-3f * (1.0f + std::abs(want)); }

}  // namespace

AttentionCheck::AttentionCheck(session::Session& session, std::uint32_t max_sequences)
    : session_(session),
      max_sequences_(max_sequences),
      query_heads_(2 * session.pool().layout().geometry().kv_heads),
      floats_(std::size_t{max_sequences} * query_heads_ * session.pool().layout().geometry().head_dim),
      query_host_(session.runtime().allocate_pinned(floats_ * sizeof(float))),
      out_host_(session.runtime().allocate_pinned(floats_ * sizeof(float))),
      query_(session.runtime().allocate_device(floats_ * sizeof(float))),
      out_(session.runtime().allocate_device(floats_ * sizeof(float))) {
  KVTIER_EXPECTS(max_sequences >= 1, "an attention check needs room for at least one sequence");
}

std::vector<std::size_t> AttentionCheck::run(std::span<const Sequence> sequences, std::uint32_t layer,
                                             std::uint64_t seed) {
  KVTIER_EXPECTS(sequences.size() <= max_sequences_, "attention check: ", sequences.size(), " sequences exceed the ",
                 max_sequences_, " it was made for");
  if (sequences.empty()) return {};
  const KvGeometry& g = session_.pool().layout().geometry();
  std::vector<g1::OwnerId> owners;
  std::vector<std::int32_t> lengths;
  for (const Sequence& s : sequences) {
    KVTIER_EXPECTS(!s.identities.empty() && s.identities.size() <= kMaxTokens, "attention check: a sequence of ",
                   s.identities.size(), " tokens (1 to ", kMaxTokens, ")");
    KVTIER_EXPECTS(session_.manager().has_owner(s.owner), "attention check: owner ", s.owner.value(),
                   " holds no blocks");
    const std::size_t width = session_.manager().block_table(s.owner).size() * g.tokens_per_block;
    KVTIER_EXPECTS(width >= s.identities.size() && width <= kMaxTokens, "attention check: owner ", s.owner.value(),
                   "'s table spans ", width, " tokens, not ", s.identities.size(), " to ", kMaxTokens);
    owners.push_back(s.owner);
    lengths.push_back(static_cast<std::int32_t>(s.identities.size()));
  }
  const std::size_t per_sequence = std::size_t{query_heads_} * g.head_dim;
  const std::size_t floats = sequences.size() * per_sequence;
  auto* query = static_cast<float*>(query_host_.data());
  synthesize_query(seed, std::span(query, floats));

  memory::Stream& stream = session_.compute_stream();
  stream.copy_async(CopyDescriptor{query, query_.data(), floats * sizeof(float)});
  const memory::DeviceBlockTables tables = session_.block_tables(owners, stream, lengths);
  const float scale = 1.0f / std::sqrt(static_cast<float>(g.head_dim));
  stream.paged_attention_async(memory::AttentionDecode{.slab = session_.pool().slab(),
                                                       .layout = &session_.pool().layout(),
                                                       .args = {.query = static_cast<const float*>(query_.data()),
                                                                .block_tables = tables.tables,
                                                                .seq_lens = tables.seq_lens,
                                                                .out = static_cast<float*>(out_.data()),
                                                                .seqs = tables.rows,
                                                                .q_heads = query_heads_,
                                                                .max_blocks = tables.columns,
                                                                .layer = layer,
                                                                .scale = scale}});
  stream.copy_async(CopyDescriptor{out_.data(), out_host_.data(), floats * sizeof(float)});
  stream.synchronize();

  const auto* got = static_cast<const float*>(out_host_.data());
  std::vector<std::size_t> bad;
  expected_.resize(per_sequence);
  for (std::size_t s = 0; s < sequences.size(); ++s) {
    dense_attention(sequences[s], layer, query + s * per_sequence, expected_.data());
    const float* out = got + s * per_sequence;
    for (std::size_t i = 0; i < per_sequence; ++i) {
      if (!close(out[i], expected_[i])) {
        bad.push_back(s);
        break;
      }
    }
  }
  return bad;
}

void AttentionCheck::dense_attention(const Sequence& sequence, std::uint32_t layer, const float* query, float* out) {
  const KvGeometry& g = session_.pool().layout().geometry();
  const std::size_t row = std::size_t{g.kv_heads} * g.head_dim;
  const std::size_t tokens = sequence.identities.size();
  keys_.resize(tokens * row);
  values_.resize(tokens * row);
  for (std::size_t t = 0; t < tokens; ++t) {
    synthesize_token_kv(sequence.identities[t], layer, std::span(keys_).subspan(t * row, row),
                        std::span(values_).subspan(t * row, row));
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(g.head_dim));
  const std::uint32_t group = query_heads_ / g.kv_heads;
  scores_.resize(tokens);
  for (std::uint32_t h = 0; h < query_heads_; ++h) {
    const std::size_t kv = h / group;
    const float* q = query + std::size_t{h} * g.head_dim;
    float top = -INFINITY;
    for (std::size_t t = 0; t < tokens; ++t) {
      const float* k = keys_.data() + t * row + kv * g.head_dim;
      float dot = 0.0f;
      for (std::uint32_t d = 0; d < g.head_dim; ++d) dot += q[d] * k[d];
      scores_[t] = dot * scale;
      top = std::max(top, scores_[t]);
    }
    float total = 0.0f;
    for (float& score : scores_) total += (score = std::exp(score - top));
    float* o = out + std::size_t{h} * g.head_dim;
    std::fill(o, o + g.head_dim, 0.0f);
    for (std::size_t t = 0; t < tokens; ++t) {
      const float* v = values_.data() + t * row + kv * g.head_dim;
      const float weight = scores_[t] / total;
      for (std::uint32_t d = 0; d < g.head_dim; ++d) o[d] += weight * v[d];
    }
  }
}

}  // namespace kvtier::replay
