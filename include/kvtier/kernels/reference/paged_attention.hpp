#pragma once
#include <cstdint>

#include "kvtier/core/kv_layout.hpp"

namespace kvtier::kernels {

/// One decode step of paged attention: one query token per sequence,
/// grouped-query attention (q_heads a multiple of the layout's kv_heads),
/// K and V read through a padded int32 block table [seqs, max_blocks].
struct PagedAttentionArgs {
  const float* query = nullptr;                // [seqs, q_heads, head_dim]
  const std::int32_t* block_tables = nullptr;  // [seqs, max_blocks], page ids
  const std::int32_t* seq_lens = nullptr;      // [seqs], tokens to attend to; 0 gives zeros
  float* out = nullptr;                        // [seqs, q_heads, head_dim]
  std::uint32_t seqs = 0;
  std::uint32_t q_heads = 0;
  std::uint32_t max_blocks = 0;
  std::uint32_t layer = 0;
  float scale = 1.0f;  // softmax scale, usually 1/sqrt(head_dim)
};

/// Throws ContractError when the arguments do not fit the layout (GQA ratio,
/// layer, a sequence longer than its block table, a page outside the slab).
void check_paged_attention_args(const KvLayout& layout, const PagedAttentionArgs& args);

namespace reference {

/// CPU reference: softmax(scale * q K^T) V per sequence and query head, in
/// float, with the running-max subtraction a kernel uses.
void paged_attention_decode(const std::byte* slab, const KvLayout& layout, const PagedAttentionArgs& args);

}  // namespace reference
}  // namespace kvtier::kernels
