#pragma once
// Full attention (and MLA): every token stays needed, every full block is
// cached, a hit is the leading run of cached blocks (vLLM's FullAttentionManager).
#include "g1/native/groups/group_rule.hpp"

namespace kvtier::g1 {

class FullAttentionRule final : public GroupRule {
 public:
  using GroupRule::GroupRule;
  std::size_t longest_hit(const CachedBlocks& blocks, std::size_t max_tokens) const override;
  std::size_t first_hit_block(std::size_t) const override { return 0; }
  bool caches(std::size_t, std::size_t) const override { return true; }

 private:
  std::size_t skipped_tokens(std::size_t) const override { return 0; }
};

}  // namespace kvtier::g1
