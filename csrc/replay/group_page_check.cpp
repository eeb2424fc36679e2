#include "kvtier/replay/group_page_check.hpp"

#include <algorithm>
#include <variant>

#include "kvtier/core/expects.hpp"

namespace kvtier::replay {

void GroupEventCounter::publish(const KvEvent& event) {
  if (!event.group || event.tier != StorageTier::Device || event.group->index >= stored_.size()) return;
  if (const auto* stored = std::get_if<KvStored>(&event.data)) stored_[event.group->index] += stored->blocks.size();
  if (const auto* removed = std::get_if<KvRemoved>(&event.data)) {
    removed_[event.group->index] += removed->hashes.size();
  }
}

GroupPageCheck::GroupPageCheck(const g1::G1Manager& manager, memory::KvPool& pool,
                               std::shared_ptr<GroupEventCounter> events)
    : manager_(&manager), pool_(&pool), events_(std::move(events)) {
  KVTIER_EXPECTS(manager.has_groups() && manager.geometry() != nullptr,
                 "a group page check needs a manager with groups");
  for (const ResolvedGroup& group : manager.geometry()->groups()) {
    counts_.push_back(GroupReplayCounts{.kind = group_kind_name(group.spec.kind), .block_size = group.spec.block_size});
  }
}

std::size_t GroupPageCheck::write(g1::OwnerId owner, const ActiveSequence& sequence, std::size_t from, std::size_t to) {
  if (from >= to) return 0;
  std::size_t written = 0;
  for (std::size_t g = 0; g < counts_.size(); ++g) {
    const std::size_t bs = counts_[g].block_size;
    const g1::GroupPatterns patterns = manager_->group_patterns(owner, sequence, g, from / bs, (to + bs - 1) / bs);
    pool_->fill_pattern(patterns.pages, patterns.identities);
    counts_[g].pages_written += patterns.pages.size();
    written += patterns.pages.size();
  }
  return written;
}

std::vector<PageId> GroupPageCheck::verify(g1::OwnerId owner, const ActiveSequence& sequence, std::size_t hit_tokens,
                                           std::size_t sample_every) {
  std::vector<PageId> bad;
  sample_every = std::max<std::size_t>(sample_every, 1);
  for (std::size_t g = 0; g < counts_.size(); ++g) {
    const std::size_t blocks = hit_tokens / counts_[g].block_size;
    if (blocks == 0) continue;
    g1::GroupPatterns all = manager_->group_patterns(owner, sequence, g, 0, blocks);
    g1::GroupPatterns checked;
    for (std::size_t i = 0; i < all.pages.size(); ++i) {
      if (i % sample_every != 0 && i + 1 != all.pages.size()) continue;
      checked.pages.push_back(all.pages[i]);
      checked.identities.push_back(all.identities[i]);
    }
    const std::vector<PageId> mismatched = pool_->find_pattern_mismatches(checked.pages, checked.identities);
    counts_[g].pages_verified += checked.pages.size();
    counts_[g].mismatches += mismatched.size();
    bad.insert(bad.end(), mismatched.begin(), mismatched.end());
  }
  return bad;
}

std::size_t GroupPageCheck::pages_verified() const noexcept {
  std::size_t n = 0;
  for (const GroupReplayCounts& c : counts_) n += c.pages_verified;
  return n;
}

std::vector<GroupReplayCounts> GroupPageCheck::counts() const {
  std::vector<GroupReplayCounts> out = counts_;
  const std::vector<std::uint64_t> hits = manager_->group_hit_pages();
  for (std::size_t g = 0; g < out.size(); ++g) {
    out[g].hit_pages = g < hits.size() ? hits[g] : 0;
    out[g].stored_blocks = events_->stored(g);
    out[g].removed_blocks = events_->removed(g);
  }
  return out;
}

}  // namespace kvtier::replay
