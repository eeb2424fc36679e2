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
    const auto pages = check_pages(group, pool.layout().page_bytes(), pool.capacity());
    kv_fills_.push_back(pages ? std::make_unique<GroupKvFill>(pool, *pages) : nullptr);
    if (pages) counts_.back().check = "kv";
  }
}

void GroupPageCheck::count_attention(std::size_t group, std::size_t sequences, std::size_t mismatches) {
  counts_.at(group).attention_sequences += sequences;
  counts_.at(group).attention_mismatches += mismatches;
}

std::size_t GroupPageCheck::write(g1::OwnerId owner, const ActiveSequence& sequence, std::size_t from, std::size_t to) {
  if (from >= to) return 0;
  std::size_t written = 0;
  for (std::size_t g = 0; g < counts_.size(); ++g) {
    const std::size_t bs = counts_[g].block_size;
    const g1::GroupPatterns patterns = manager_->group_patterns(owner, sequence, g, from / bs, (to + bs - 1) / bs);
    if (kv_fills_[g]) {
      fill_kv(*kv_fills_[g], owner, sequence, g, from, to);
    } else {
      pool_->fill_pattern(patterns.pages, patterns.identities);
    }
    counts_[g].pages_written += patterns.pages.size();
    written += patterns.pages.size();
  }
  return written;
}

void GroupPageCheck::fill_kv(GroupKvFill& fill, g1::OwnerId owner, const ActiveSequence& sequence, std::size_t group,
                             std::size_t from, std::size_t to) {
  // A block completed by `to` takes its hash's identity: all its slots are
  // rewritten at once. A block still partial keeps its owner's identity, so
  // only its new slots need their K/V (the rest were written with it).
  const std::size_t bs = counts_[group].block_size;
  const std::size_t first_block = from / bs;
  const std::size_t end_block = (to + bs - 1) / bs;
  const std::size_t complete_end = std::max(first_block, to / bs);
  const g1::GroupPatterns complete = manager_->group_patterns(owner, sequence, group, first_block, complete_end);
  fill.fill(complete.pages, complete.identities);
  if (complete_end < end_block) {
    const g1::GroupPatterns partial = manager_->group_patterns(owner, sequence, group, complete_end, end_block);
    const std::size_t start = std::max(from, complete_end * bs) - complete_end * bs;
    fill.fill(partial.pages, partial.identities, static_cast<std::uint32_t>(start),
              static_cast<std::uint32_t>(to - complete_end * bs));
  }
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
    const std::vector<PageId> mismatched = kv_fills_[g]
                                               ? kv_fills_[g]->mismatches(checked.pages, checked.identities)
                                               : pool_->find_pattern_mismatches(checked.pages, checked.identities);
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
  const std::vector<std::uint64_t> fresh = manager_->group_fresh_pages();
  for (std::size_t g = 0; g < out.size(); ++g) {
    out[g].hit_pages = g < hits.size() ? hits[g] : 0;
    out[g].fresh_pages = g < fresh.size() ? fresh[g] : 0;
    out[g].stored_blocks = events_->stored(g);
    out[g].removed_blocks = events_->removed(g);
  }
  return out;
}

}  // namespace kvtier::replay
