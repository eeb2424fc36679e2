#pragma once
// One KV cache group's kind-specific rules (docs/spec/model-geometry.md
// sections 3 and 4; vLLM's single-type KV cache managers): which tokens the
// group no longer needs, at which lengths it can serve a prefix hit and which
// of its positions that hit fills with real pages, and which of its blocks
// enter the hash index. The coordinator (group_coordinator.hpp) owns the
// pool, the tables and the fixed point across groups; nothing here touches a page.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "kvtier/core/model_geometry.hpp"

namespace kvtier::g1 {

/// Which of a prompt's blocks this group has cached, as the coordinator sees
/// its pool (a Mamba state cached during the current step is not there yet).
class CachedBlocks {
 public:
  virtual ~CachedBlocks() = default;
  virtual bool cached(std::size_t block) const = 0;
};

class GroupRule {
 public:
  GroupRule(std::uint32_t block_size, std::uint32_t scheduler_block_size);
  virtual ~GroupRule() = default;

  std::uint32_t block_size() const noexcept { return block_size_; }
  /// Blocks the group no longer needs once `computed` tokens are computed
  /// (at most `held`: the positions its table has).
  std::size_t skipped_blocks(std::size_t computed, std::size_t held) const;
  /// The largest multiple of the scheduler unit, at most `max_tokens` (itself
  /// such a multiple), at which the group can serve a hit; 0 when none.
  virtual std::size_t longest_hit(const CachedBlocks& blocks, std::size_t max_tokens) const = 0;
  /// A hit of `tokens` holds real pages from this position on; earlier ones are null.
  virtual std::size_t first_hit_block(std::size_t tokens) const = 0;
  /// Whether full block `block` (ending at or before the last scheduler
  /// boundary inside `computed`) enters the hash index once `computed` tokens are computed.
  virtual bool caches(std::size_t block, std::size_t computed) const = 0;

 protected:
  /// Tokens the group no longer needs (spec §3).
  virtual std::size_t skipped_tokens(std::size_t computed) const = 0;
  /// The largest scheduler-unit multiple at most `tokens`.
  std::size_t align_down(std::size_t tokens) const noexcept { return tokens - tokens % scheduler_block_size_; }
  std::uint32_t scheduler_block_size() const noexcept { return scheduler_block_size_; }

 private:
  std::uint32_t block_size_;
  std::uint32_t scheduler_block_size_;
};

/// The rules of `group`'s kind at its resolved block size.
std::unique_ptr<GroupRule> make_group_rule(const ResolvedGroup& group, std::uint32_t scheduler_block_size);

}  // namespace kvtier::g1
