#include "kvtier/memory/runtime.hpp"

#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::memory {

const char* runtime_kind_name(RuntimeKind kind) noexcept { return kind == RuntimeKind::Host ? "host" : "cuda"; }

void check_kv_write(const KvWrite& write) {
  if (write.tokens == 0) return;
  if (write.layout == nullptr || write.slab == nullptr || write.key == nullptr || write.value == nullptr ||
      write.slots == nullptr) {
    throw ContractError("write_kv with a null pointer");
  }
  KVTIER_EXPECTS(write.layer < write.layout->geometry().layers,
                 "write_kv: layer " + std::to_string(write.layer) + " is outside the layout");
}

void check_attention_decode(const AttentionDecode& step) {
  const kernels::PagedAttentionArgs& a = step.args;
  if (a.seqs == 0) return;
  if (step.layout == nullptr || step.slab == nullptr || a.query == nullptr || a.block_tables == nullptr ||
      a.seq_lens == nullptr || a.out == nullptr) {
    throw ContractError("paged attention with a null pointer");
  }
  const KvGeometry& g = step.layout->geometry();
  KVTIER_EXPECTS(a.q_heads != 0 && a.q_heads % g.kv_heads == 0, "paged attention: ", a.q_heads,
                 " query heads is not a multiple of ", g.kv_heads, " KV heads");
  KVTIER_EXPECTS(a.layer < g.layers, "paged attention: layer ", a.layer, " is outside the layout");
  KVTIER_EXPECTS(a.max_blocks >= 1, "paged attention: a block table needs at least one column");
}

Stream Runtime::borrow_stream(void* /*native*/) {
  throw ContractError(std::string("the ") + runtime_kind_name(kind()) + " runtime has no native streams to borrow");
}

}  // namespace kvtier::memory
