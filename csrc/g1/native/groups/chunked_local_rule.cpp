#include "g1/native/groups/chunked_local_rule.hpp"

#include "kvtier/core/errors.hpp"

namespace kvtier::g1 {

ChunkedLocalRule::ChunkedLocalRule(std::uint32_t block_size, std::uint32_t scheduler_block_size, std::uint32_t chunk)
    : GroupRule(block_size, scheduler_block_size), chunk_(chunk) {
  if (chunk == 0) throw ConfigError("a chunked_local_attention group needs a chunk of at least 1 token");
}

std::size_t ChunkedLocalRule::first_hit_block(std::size_t tokens) const {
  return tokens / chunk_ * chunk_ / block_size();
}

std::size_t ChunkedLocalRule::longest_hit(const CachedBlocks& blocks, std::size_t max_tokens) const {
  // Within the chunk of the candidate, the longest cached run from its start;
  // rounded down to the unit, a shorter end may fall in an earlier chunk, so
  // it is checked again from that chunk's start.
  std::size_t end = align_down(max_tokens);
  while (end > 0) {
    const std::size_t limit = end / block_size();
    std::size_t run = first_hit_block(end);
    while (run < limit && blocks.cached(run)) ++run;
    const std::size_t found = align_down(run * block_size());
    if (found == end) return end;
    end = found;
  }
  return 0;
}

}  // namespace kvtier::g1
