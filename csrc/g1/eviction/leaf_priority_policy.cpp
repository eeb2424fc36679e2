#include "g1/eviction/leaf_priority_policy.hpp"

#include <algorithm>
#include <string>

#include "kvtier/core/expects.hpp"

namespace kvtier::g1 {

static constexpr std::uint32_t kSketchSpan = 16;

LeafPriorityPolicy::LeafPriorityPolicy(std::uint32_t capacity)
    : pages_(capacity),
      parent_of_page_(capacity),
      sketch_(capacity * kSketchSpan),
      ghost_limit_(std::max<std::size_t>(std::size_t{capacity} * 2, 1)) {}

std::optional<LeafPriorityPolicy::NodeKey> LeafPriorityPolicy::parent_key_of(const NodeKey& key,
                                                                             const PositionalLineageHash& plh) {
  if (key.position == 0) return std::nullopt;
  return NodeKey{key.position - 1, plh.parent_fragment()};
}

std::optional<std::string> LeafPriorityPolicy::insert_refusal(std::span<const PositionalLineageHash> plhs) const {
  for (std::size_t i = 0; i < plhs.size(); ++i) {
    const NodeKey key = key_of(plhs[i]);
    bool twice = inactive_page_.contains(key);
    for (std::size_t j = 0; j < i && !twice; ++j) twice = key_of(plhs[j]) == key;
    if (twice) {
      return "block " + plhs[i].to_string() + " collides with an inactive block at position " +
             std::to_string(key.position);
    }
  }
  return std::nullopt;
}

std::uint32_t LeafPriorityPolicy::inactive_children(const NodeKey& key) const {
  const auto it = inactive_children_.find(key);
  return it == inactive_children_.end() ? 0 : it->second;
}

void LeafPriorityPolicy::make_leaf(std::uint32_t page) {
  PageState& p = pages_[page];
  p.is_leaf = true;
  leaves_.emplace(p.priority.first, p.priority.second, page);
}

void LeafPriorityPolicy::unmake_leaf(std::uint32_t page) {
  PageState& p = pages_[page];
  if (!p.is_leaf) return;
  leaves_.erase(LeafKey{p.priority.first, p.priority.second, page});
  p.is_leaf = false;
}

LeafPriorityPolicy::History LeafPriorityPolicy::recall(const NodeKey& key) {
  for (auto* generation : {&ghosts_, &old_ghosts_}) {
    if (const auto it = generation->find(key); it != generation->end()) {
      const History history = it->second;
      generation->erase(it);
      ghost_dropped(history);
      return history;
    }
  }
  return History{};
}

void LeafPriorityPolicy::remember(const NodeKey& key, const History& history) {
  if (ghosts_.size() >= ghost_limit_) {  // the older generation is forgotten whole
    for (const auto& [k, forgotten] : old_ghosts_) ghost_dropped(forgotten);
    old_ghosts_ = std::move(ghosts_);
    ghosts_.clear();
  }
  auto [it, fresh] = ghosts_.try_emplace(key, history);
  if (!fresh) {
    ghost_dropped(it->second);
    it->second = history;
  }
  ghost_added(history);
}

void LeafPriorityPolicy::insert(PageId page_id, const PositionalLineageHash& plh) {
  const std::uint32_t page = page_id.value();
  KVTIER_EXPECTS(page < pages_.size(), "page " + std::to_string(page) + " is outside the pool");
  KVTIER_EXPECTS(!contains(page_id), "page " + std::to_string(page) + " is already inactive");
  if (auto refusal = insert_refusal(std::span(&plh, 1))) throw ContractError(std::move(*refusal));
  PageState& p = pages_[page];
  const NodeKey key = key_of(plh);
  Access how = Access::Again;
  if (!p.holds_block || !(p.key == key)) {
    p.key = key;
    p.history = recall(key);
    p.holds_block = true;
    how = p.history.count == 0 ? Access::New : Access::Recalled;
  }
  p.history.second_last = p.history.last;
  p.history.last = ++clock_;
  ++p.history.count;
  sketch_.increment(plh);
  p.history.frequency = sketch_.estimate(plh);
  p.priority = accessed(p.history, how, p.priority, NodeKeyHash{}(key));
  entered(p.priority);
  p.inactive = true;
  ++inactive_;
  inactive_page_[key] = page;
  parent_of_page_[page] = parent_key_of(key, plh);
  if (inactive_children(key) == 0) make_leaf(page);
  if (const auto& parent = parent_of_page_[page]) {
    ++inactive_children_[*parent];
    if (const auto it = inactive_page_.find(*parent); it != inactive_page_.end()) unmake_leaf(it->second);
  }
}

void LeafPriorityPolicy::detach(std::uint32_t page) {
  PageState& p = pages_[page];
  unmake_leaf(page);
  left(p.priority);
  p.inactive = false;
  --inactive_;
  inactive_page_.erase(p.key);
  if (const auto& parent = parent_of_page_[page]) {
    const auto count = inactive_children_.find(*parent);
    if (--count->second == 0) {
      inactive_children_.erase(count);
      if (const auto it = inactive_page_.find(*parent); it != inactive_page_.end()) make_leaf(it->second);
    }
  }
}

void LeafPriorityPolicy::remove(PageId page) {
  KVTIER_EXPECTS(page.value() < pages_.size() && contains(page),
                 "page " + std::to_string(page.value()) + " is not inactive");
  detach(page.value());
}

std::uint32_t LeafPriorityPolicy::choose_victim() {
  for (;;) {
    auto it = leaves_.begin();
    if (const auto preferred = preferred_class()) {
      const auto first = leaves_.lower_bound(LeafKey{*preferred, 0, 0});
      if (first != leaves_.end() && std::get<0>(*first) == *preferred) it = first;
    }
    const std::uint32_t page = std::get<2>(*it);
    PageState& p = pages_[page];
    Priority spared = p.priority;
    if (!second_chance(p.history, spared)) return page;
    leaves_.erase(it);  // re-queued under its new priority
    left(p.priority);
    p.priority = spared;
    entered(p.priority);
    leaves_.emplace(p.priority.first, p.priority.second, page);
  }
}

std::optional<PageId> LeafPriorityPolicy::evict() {
  if (leaves_.empty()) return std::nullopt;
  const std::uint32_t page = choose_victim();
  detach(page);
  PageState& p = pages_[page];
  evicted(p.history, p.priority);
  remember(p.key, p.history);
  p.holds_block = false;
  return PageId(page);
}

std::size_t LeafPriorityPolicy::metadata_bytes() const {
  constexpr std::size_t kMapNode = 48;  // a hash-map node with its key and bucket share, about
  return pages_.capacity() * (sizeof(PageState) + sizeof(std::optional<NodeKey>)) +
         (inactive_page_.size() + inactive_children_.size()) * kMapNode +
         (ghosts_.size() + old_ghosts_.size()) * (kMapNode + sizeof(History)) + leaves_.size() * kMapNode +
         sketch_.memory_bytes();
}

}  // namespace kvtier::g1
