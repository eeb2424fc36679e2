#include "g1/native/groups/group_rule.hpp"

#include <algorithm>

#include "g1/native/groups/chunked_local_rule.hpp"
#include "g1/native/groups/full_attention_rule.hpp"
#include "g1/native/groups/mamba_rule.hpp"
#include "g1/native/groups/sliding_window_rule.hpp"
#include "kvtier/core/errors.hpp"

namespace kvtier::g1 {

GroupRule::GroupRule(std::uint32_t block_size, std::uint32_t scheduler_block_size)
    : block_size_(block_size), scheduler_block_size_(scheduler_block_size) {
  if (block_size == 0 || scheduler_block_size == 0 || scheduler_block_size % block_size != 0) {
    throw ConfigError("a group's block size must divide the scheduler block size");
  }
}

std::size_t GroupRule::skipped_blocks(std::size_t computed, std::size_t held) const {
  return std::min(skipped_tokens(computed) / block_size_, held);
}

std::unique_ptr<GroupRule> make_group_rule(const ResolvedGroup& group, std::uint32_t scheduler_block_size) {
  const GroupSpec& spec = group.spec;
  switch (spec.kind) {
    case GroupKind::FullAttention:
    case GroupKind::MlaAttention:
      return std::make_unique<FullAttentionRule>(spec.block_size, scheduler_block_size);
    case GroupKind::SlidingWindow:
    case GroupKind::SlidingWindowMla:
      return std::make_unique<SlidingWindowRule>(spec.block_size, scheduler_block_size, spec.sliding_window);
    case GroupKind::ChunkedLocalAttention:
      return std::make_unique<ChunkedLocalRule>(spec.block_size, scheduler_block_size, spec.attention_chunk_size);
    case GroupKind::Mamba:
      return std::make_unique<MambaRule>(spec.block_size, scheduler_block_size, spec.mamba_mode);
  }
  throw ConfigError("unknown KV cache group kind");
}

}  // namespace kvtier::g1
