#pragma once
// Mamba (and other recurrent states): only the state at the last computed
// token matters, so every earlier block is skipped (align keeps the previous
// step's state block too); a hit is the last cached state block whose end is
// aligned, every earlier position null. `all` (and `none` given a block size
// smaller than the model length) caches the state at every block boundary,
// `align` only the state the schedule landed on (vLLM's MambaManager).
#include "g1/native/groups/group_rule.hpp"

namespace kvtier::g1 {

class MambaRule final : public GroupRule {
 public:
  MambaRule(std::uint32_t block_size, std::uint32_t scheduler_block_size, MambaMode mode);
  std::size_t longest_hit(const CachedBlocks& blocks, std::size_t max_tokens) const override;
  std::size_t first_hit_block(std::size_t tokens) const override;
  bool caches(std::size_t block, std::size_t computed) const override;

 private:
  std::size_t skipped_tokens(std::size_t computed) const override;
  MambaMode mode_;
};

}  // namespace kvtier::g1
