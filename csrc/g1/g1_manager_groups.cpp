// G1Manager's calls for KV cache groups (docs/spec/model-geometry.md):
// per-group tables and usage on every manager, requests' slots on a manager
// with groups (GroupedBackend).
#include <string>

#include "g1/native/groups/grouped_backend.hpp"
#include "kvtier/core/expects.hpp"
#include "kvtier/g1/g1_manager.hpp"

namespace kvtier::g1 {
namespace {

void require_groups(const GroupedBackend* grouped, const char* call) {
  KVTIER_EXPECTS(grouped != nullptr, call,
                 " is for a manager with KV cache groups; this one takes MoveBlock signals (process_for_request)");
}

}  // namespace

std::span<const PageId> G1Manager::block_table(OwnerId owner, std::size_t group) const {
  if (grouped_ != nullptr) return grouped_->coordinator().table(owner, group);
  KVTIER_EXPECTS(group == 0, "group ", group, " is not one of the manager's 1 groups");
  return block_table(owner);
}

std::vector<GroupUsage> G1Manager::group_usage() const {
  if (grouped_ != nullptr) return grouped_->coordinator().usage();
  const G1Metrics m = metrics();
  return {GroupUsage{.active = m.active_blocks, .inactive = m.inactive_blocks}};
}

std::vector<std::uint64_t> G1Manager::group_hit_pages() const {
  if (grouped_ == nullptr) return {};
  return grouped_->coordinator().hit_pages();
}

std::vector<std::uint64_t> G1Manager::group_fresh_pages() const {
  if (grouped_ == nullptr) return {};
  return grouped_->coordinator().fresh_pages();
}

std::optional<PageId> G1Manager::null_page() const {
  return grouped_ != nullptr ? grouped_->coordinator().null_page() : std::nullopt;
}

G1Acquire G1Manager::allocate_slots(OwnerId owner, const ActiveSequence& sequence, std::size_t tokens,
                                    std::size_t reuse_tokens) {
  require_groups(grouped_, "allocate_slots");
  return grouped_->allocate(owner, sequence, tokens, reuse_tokens);
}

void G1Manager::free_slots(OwnerId owner) {
  require_groups(grouped_, "free_slots");
  grouped_->free(owner);
}

GroupPatterns G1Manager::group_patterns(OwnerId owner, const ActiveSequence& sequence, std::size_t group,
                                        std::size_t first_block, std::size_t end_block) const {
  require_groups(grouped_, "group_patterns");
  return grouped_->patterns(owner, sequence, group, first_block, end_block);
}

void G1Manager::begin_step() {
  if (grouped_ != nullptr) grouped_->begin_step();
}

std::vector<PageId> G1Manager::take_pages_to_zero() {
  return grouped_ != nullptr ? grouped_->take_pages_to_zero() : std::vector<PageId>{};
}

}  // namespace kvtier::g1
