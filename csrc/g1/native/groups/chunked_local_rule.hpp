#pragma once
// Chunked local attention: a token attends within its chunk of C tokens, so
// every block before the current chunk is skipped, and a hit is null up to
// its last chunk start and a leading run of cached blocks from there (vLLM's
// ChunkedLocalAttentionManager). Every full block is cached.
#include "g1/native/groups/group_rule.hpp"

namespace kvtier::g1 {

class ChunkedLocalRule final : public GroupRule {
 public:
  ChunkedLocalRule(std::uint32_t block_size, std::uint32_t scheduler_block_size, std::uint32_t chunk);
  std::size_t longest_hit(const CachedBlocks& blocks, std::size_t max_tokens) const override;
  std::size_t first_hit_block(std::size_t tokens) const override;
  bool caches(std::size_t, std::size_t) const override { return true; }

 private:
  std::size_t skipped_tokens(std::size_t computed) const override { return computed / chunk_ * chunk_; }
  std::size_t chunk_;
};

}  // namespace kvtier::g1
