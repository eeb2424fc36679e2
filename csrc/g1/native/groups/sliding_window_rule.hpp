#pragma once
// Sliding window (and windowed MLA): the next token attends to the last W
// tokens including itself, so a hit needs ceil((W - 1) / bs) contiguous
// cached blocks ending at the hit (fewer when they reach block 0), and only
// the last that many blocks of each scheduler segment are worth caching
// (vLLM's SlidingWindowManager).
#include "g1/native/groups/group_rule.hpp"

namespace kvtier::g1 {

class SlidingWindowRule final : public GroupRule {
 public:
  SlidingWindowRule(std::uint32_t block_size, std::uint32_t scheduler_block_size, std::uint32_t window);
  std::size_t longest_hit(const CachedBlocks& blocks, std::size_t max_tokens) const override;
  std::size_t first_hit_block(std::size_t tokens) const override;
  bool caches(std::size_t block, std::size_t computed) const override;

 private:
  std::size_t skipped_tokens(std::size_t computed) const override;
  std::uint32_t window_;
  std::size_t contiguous_blocks_;  // ceil((W - 1) / bs)
};

}  // namespace kvtier::g1
