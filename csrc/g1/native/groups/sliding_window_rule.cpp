#include "g1/native/groups/sliding_window_rule.hpp"

#include <algorithm>

#include "kvtier/core/errors.hpp"

namespace kvtier::g1 {

SlidingWindowRule::SlidingWindowRule(std::uint32_t block_size, std::uint32_t scheduler_block_size, std::uint32_t window)
    : GroupRule(block_size, scheduler_block_size),
      window_(window),
      contiguous_blocks_((static_cast<std::size_t>(window) - 1 + block_size - 1) / block_size) {
  if (window == 0) throw ConfigError("a sliding_window group needs a window of at least 1 token");
}

std::size_t SlidingWindowRule::skipped_tokens(std::size_t computed) const {
  return computed + 1 > window_ ? computed + 1 - window_ : 0;
}

std::size_t SlidingWindowRule::first_hit_block(std::size_t tokens) const {
  const std::size_t blocks = tokens / block_size();
  return blocks > contiguous_blocks_ ? blocks - contiguous_blocks_ : 0;
}

std::size_t SlidingWindowRule::longest_hit(const CachedBlocks& blocks, std::size_t max_tokens) const {
  // Candidate ends from the longest down: the run behind an end must be
  // cached whole, so a miss at block b rules out every end whose run covers
  // b and the next candidate is the last aligned end at or before b.
  std::size_t end = align_down(max_tokens);
  while (end > 0) {
    const std::size_t last = end / block_size();
    std::size_t miss = last;
    for (std::size_t b = last; b-- > first_hit_block(end);) {
      if (!blocks.cached(b)) {
        miss = b;
        break;
      }
    }
    if (miss == last) return end;
    end = align_down(miss * block_size());
  }
  return 0;
}

bool SlidingWindowRule::caches(std::size_t block, std::size_t) const {
  // The last ceil((W - 1) / bs) blocks of each scheduler segment.
  const std::size_t step = scheduler_block_size();
  const std::size_t block_end = (block + 1) * block_size();
  const std::size_t segment_end = (block_end + step - 1) / step * step;
  return (segment_end - block_end) / block_size() < contiguous_blocks_;
}

}  // namespace kvtier::g1
