#include "g1/native/groups/full_attention_rule.hpp"

namespace kvtier::g1 {

std::size_t FullAttentionRule::longest_hit(const CachedBlocks& blocks, std::size_t max_tokens) const {
  const std::size_t limit = max_tokens / block_size();
  std::size_t run = 0;
  while (run < limit && blocks.cached(run)) ++run;
  return align_down(run * block_size());
}

}  // namespace kvtier::g1
