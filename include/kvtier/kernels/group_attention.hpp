#pragma once
// Decode attention over one KV cache group's pages, for every group kind and
// page format: K/V rows (plain or quantized, dequantized as read) over the
// full sequence, the last `window` tokens (sliding window) or the query's
// chunk (chunked local attention); or an MLA latent (absorbed query: scores
// from the latent and the RoPE part, the output in latent space). Tokens
// before the first attended one are never read, so their table entries may
// be the null page.
#include <cstdint>

#include "kvtier/core/host_device.hpp"
#include "kvtier/core/model_geometry.hpp"
#include "kvtier/kernels/group_pages.hpp"
#include "kvtier/kernels/page_rows.hpp"

namespace kvtier::kernels {

enum class AttentionSpan : std::uint8_t { Full, SlidingWindow, ChunkedLocal };

/// The span a group of `kind` attends over (MLA kinds as their K/V twins; a Mamba group has none).
constexpr AttentionSpan attention_span_of(GroupKind kind) noexcept {
  if (is_windowed(kind)) return AttentionSpan::SlidingWindow;
  if (kind == GroupKind::ChunkedLocalAttention) return AttentionSpan::ChunkedLocal;
  return AttentionSpan::Full;
}

/// The first token a decode query at position length - 1 attends to: the
/// last `window` tokens (vLLM's sliding window, the query included), or the
/// start of the query's chunk of `window` tokens.
KVTIER_HOST_DEVICE constexpr std::uint32_t first_attended_token(AttentionSpan span, std::uint32_t window,
                                                                std::uint32_t length) {
  if (length == 0) return 0;
  switch (span) {
    case AttentionSpan::SlidingWindow:
      return length > window ? length - window : 0;
    case AttentionSpan::ChunkedLocal:
      return (length - 1) / window * window;
    case AttentionSpan::Full:
      return 0;
  }
  return 0;
}

struct GroupAttentionArgs {
  /// K/V: [seqs, q_heads, head_dim]. MLA: [seqs, q_heads, latent_dim + rope_dim],
  /// the query already absorbed into latent space, then its RoPE part.
  const float* query = nullptr;
  const std::int32_t* block_tables = nullptr;  // [seqs, max_blocks], page ids
  const std::int32_t* seq_lens = nullptr;      // [seqs]; 0 gives zeros
  /// K/V: [seqs, q_heads, head_dim_v]. MLA: [seqs, q_heads, latent_dim].
  float* out = nullptr;
  std::uint32_t seqs = 0;
  std::uint32_t q_heads = 0;
  std::uint32_t max_blocks = 0;
  std::uint32_t layer = 0;
  float scale = 1.0f;
  AttentionSpan span = AttentionSpan::Full;
  std::uint32_t window = 0;  // tokens: the sliding window or the attention chunk
  LayerScales scales{};      // the layer's scales outside the page
  /// [q_heads] or null: a learned logit per query head that joins the softmax's
  /// denominator and attends to nothing (gpt-oss's attention sinks).
  const float* sinks = nullptr;
};

/// Query width (K/V: head_dim; MLA: latent + RoPE) and output width (K/V:
/// head_dim_v; MLA: latent) of one head.
KVTIER_HOST_DEVICE constexpr std::uint32_t query_width(const PageFormat& f) {
  return f.content == PageContent::MlaLatent ? f.latent_dim + f.rope_dim : f.head_dim;
}
KVTIER_HOST_DEVICE constexpr std::uint32_t output_width(const PageFormat& f) {
  return f.content == PageContent::MlaLatent ? f.latent_dim : f.head_dim_of(KvPart::Value);
}

/// The block of token `t` of a sequence whose table is `table`.
KVTIER_HOST_DEVICE inline const std::byte* token_block(const std::byte* slab, const GroupPages& p,
                                                       const std::int32_t* table, std::uint32_t layer,
                                                       std::uint32_t t) {
  return slab + p.layer_block_offset(static_cast<std::uint32_t>(table[t / p.format.block_size]), layer);
}

/// q . K[t] (K/V, head `kv_head`) or q_latent . c[t] + q_rope . k_pe[t] (MLA), unscaled.
KVTIER_HOST_DEVICE inline float attention_dot(const std::byte* slab, const GroupPages& p, const GroupAttentionArgs& a,
                                              const std::int32_t* table, const float* q, std::uint32_t kv_head,
                                              std::uint32_t t) {
  const PageFormat& f = p.format;
  const std::byte* block = token_block(slab, p, table, a.layer, t);
  const std::uint32_t in_block = t % f.block_size;
  float dot = 0.0f;
  if (f.content == PageContent::MlaLatent) {
    for (std::uint32_t i = 0; i < f.latent_dim; ++i) dot += q[i] * load_mla_latent(block, f, in_block, i, a.scales.key);
    for (std::uint32_t i = 0; i < f.rope_dim; ++i) {
      dot += q[f.latent_dim + i] * load_mla_rope(block, f, in_block, i, a.scales.key);
    }
    return dot;
  }
  for (std::uint32_t d = 0; d < f.head_dim; ++d) {
    dot += q[d] * load_kv_value(block, f, KvPart::Key, in_block, kv_head, d, a.scales.key);
  }
  return dot;
}

/// Output value `d` of token `t`: V[t][kv_head][d], or the latent c[t][d] (MLA).
KVTIER_HOST_DEVICE inline float attention_value(const std::byte* slab, const GroupPages& p, const GroupAttentionArgs& a,
                                                const std::int32_t* table, std::uint32_t kv_head, std::uint32_t t,
                                                std::uint32_t d) {
  const PageFormat& f = p.format;
  const std::byte* block = token_block(slab, p, table, a.layer, t);
  if (f.content == PageContent::MlaLatent) return load_mla_latent(block, f, t % f.block_size, d, a.scales.key);
  return load_kv_value(block, f, KvPart::Value, t % f.block_size, kv_head, d, a.scales.value);
}

/// K/V heads the query heads share (MLA: one latent for all).
KVTIER_HOST_DEVICE constexpr std::uint32_t shared_kv_heads(const PageFormat& f) {
  return f.content == PageContent::MlaLatent ? 1U : f.kv_heads;
}

/// ContractError when the arguments do not fit the pages: a Mamba group,
/// query heads not a multiple of K/V heads, a layer outside the group, a
/// span without its window, a sequence longer than its table, or an
/// attended block on a page outside the pool.
void check_group_attention_args(const GroupPages& pages, const GroupAttentionArgs& args);

namespace reference {

/// CPU reference: softmax(scale x scores) over the attended tokens, in float.
void group_attention_decode(const std::byte* slab, const GroupPages& pages, const GroupAttentionArgs& args);

}  // namespace reference
}  // namespace kvtier::kernels
