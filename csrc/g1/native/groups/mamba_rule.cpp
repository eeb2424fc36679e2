#include "g1/native/groups/mamba_rule.hpp"

namespace kvtier::g1 {

MambaRule::MambaRule(std::uint32_t block_size, std::uint32_t scheduler_block_size, MambaMode mode)
    : GroupRule(block_size, scheduler_block_size), mode_(mode) {}

std::size_t MambaRule::skipped_tokens(std::size_t computed) const {
  if (computed == 0) return 0;
  const std::size_t before_last = computed - 1;
  if (mode_ != MambaMode::Align) return before_last;
  // align: the state block of the previous step stays alive beside the current one.
  return before_last > block_size() ? before_last - block_size() : 0;
}

std::size_t MambaRule::first_hit_block(std::size_t tokens) const {
  const std::size_t blocks = tokens / block_size();
  return blocks > 0 ? blocks - 1 : 0;
}

std::size_t MambaRule::longest_hit(const CachedBlocks& blocks, std::size_t max_tokens) const {
  for (std::size_t end = align_down(max_tokens); end > 0; end -= scheduler_block_size()) {
    if (blocks.cached(end / block_size() - 1)) return end;
  }
  return 0;
}

bool MambaRule::caches(std::size_t block, std::size_t computed) const {
  if (mode_ != MambaMode::Align) return true;
  return (block + 1) * block_size() == computed;
}

}  // namespace kvtier::g1
