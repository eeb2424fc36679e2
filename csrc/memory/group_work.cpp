#include "kvtier/memory/group_work.hpp"

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::memory {

void check_group_kv_write(const GroupKvWrite& write) {
  if (write.tokens == 0) return;
  kernels::check_group_pages(write.pages);
  const PageFormat& f = write.pages.format;
  const bool needs_second = f.content == PageContent::KeyValue || f.rope_dim != 0;
  if (write.slab == nullptr || write.first == nullptr || write.slots == nullptr ||
      (needs_second && write.second == nullptr)) {
    throw ContractError("write_group_kv with a null pointer");
  }
  KVTIER_EXPECTS(f.content != PageContent::MambaState, "write_group_kv: a Mamba state is not written token by token");
  KVTIER_EXPECTS(write.layer < write.pages.layers, "write_group_kv: layer ", write.layer, " is outside the group's ",
                 write.pages.layers);
}

void check_group_attention_decode(const GroupAttentionDecode& step) {
  const kernels::GroupAttentionArgs& a = step.args;
  if (a.seqs == 0) return;
  kernels::check_group_pages(step.pages);
  if (step.slab == nullptr || a.query == nullptr || a.block_tables == nullptr || a.seq_lens == nullptr ||
      a.out == nullptr) {
    throw ContractError("group attention with a null pointer");
  }
  const PageFormat& f = step.pages.format;
  KVTIER_EXPECTS(f.content != PageContent::MambaState, "group attention: a Mamba state is not attended");
  const std::uint32_t kv_heads = kernels::shared_kv_heads(f);
  KVTIER_EXPECTS(a.q_heads != 0 && a.q_heads % kv_heads == 0, "group attention: ", a.q_heads,
                 " query heads is not a multiple of ", kv_heads, " KV heads");
  KVTIER_EXPECTS(a.layer < step.pages.layers, "group attention: layer ", a.layer, " is outside the group");
  KVTIER_EXPECTS(a.max_blocks >= 1, "group attention: a block table needs at least one column");
  KVTIER_EXPECTS(a.span == kernels::AttentionSpan::Full || a.window > 0,
                 "group attention: a sliding window or a chunk needs its size");
}

}  // namespace kvtier::memory
