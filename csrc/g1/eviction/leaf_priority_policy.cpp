#include "g1/eviction/leaf_priority_policy.hpp"

#include <algorithm>
#include <string>

#include "kvtier/core/expects.hpp"

namespace kvtier::g1 {

static constexpr std::uint32_t kSketchSpan = 16;

LeafPriorityPolicy::LeafPriorityPolicy(std::uint32_t capacity, std::uint32_t history_capacities)
    : pages_(capacity),
      parent_of_page_(capacity),
      sketch_(capacity * kSketchSpan),
      ghost_limit_(std::max<std::size_t>(std::size_t{capacity} * history_capacities, 1)) {}

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
  record_use(page, key_of(plh), parent_key_of(key_of(plh), plh), plh);
  enter_pool(page);
}

bool LeafPriorityPolicy::unqueue(std::uint32_t page) {
  PageState& p = pages_[page];
  const bool was_leaf = p.is_leaf;
  unmake_leaf(page);
  left(p.priority);
  return was_leaf;
}

void LeafPriorityPolicy::requeue(std::uint32_t page, bool was_leaf) {
  entered(pages_[page].priority);
  if (was_leaf) make_leaf(page);
}

void LeafPriorityPolicy::record_use(std::uint32_t page, const NodeKey& key, const std::optional<NodeKey>& parent,
                                    const PositionalLineageHash& sketch_key) {
  KVTIER_EXPECTS(page < pages_.size(), "page " + std::to_string(page) + " is outside the pool");
  PageState& p = pages_[page];
  const bool pooled = p.inactive;
  KVTIER_EXPECTS(!pooled || p.key == key, "page " + std::to_string(page) + " is in the pool with another block");
  Access how = Access::Again;
  if (!p.holds_block || !(p.key == key)) {
    p.key = key;
    p.history = recall(key);
    p.holds_block = true;
    how = p.history.count == 0 ? Access::New : Access::Recalled;
  }
  if (!pooled) parent_of_page_[page] = parent;  // a pooled node keeps its place in the tree
  const bool was_leaf = pooled && unqueue(page);
  p.history.second_last = p.history.last;
  p.history.last = ++clock_;
  ++p.history.count;
  sketch_.increment(sketch_key);
  p.history.frequency = sketch_.estimate(sketch_key);
  p.priority = accessed(p.history, how, p.priority, NodeKeyHash{}(key));
  if (pooled) requeue(page, was_leaf);
}

void LeafPriorityPolicy::record_use_again(std::uint32_t page) {
  KVTIER_EXPECTS(holds(page), "page " + std::to_string(page) + " holds no block");
  const NodeKey key = pages_[page].key;
  record_use(page, key, parent_of_page_[page], PositionalLineageHash::from_raw(key.position, key.fragment));
}

void LeafPriorityPolicy::record_recency(std::uint32_t page) {
  KVTIER_EXPECTS(holds(page), "page " + std::to_string(page) + " holds no block");
  PageState& p = pages_[page];
  const bool pooled = p.inactive;
  const bool was_leaf = pooled && unqueue(page);
  p.history.last = ++clock_;
  p.priority = refreshed(p.history, p.priority);
  if (pooled) requeue(page, was_leaf);
}

void LeafPriorityPolicy::enter_pool(std::uint32_t page) {
  KVTIER_EXPECTS(holds(page) && !in_pool(page), "page " + std::to_string(page) + " cannot join the pool");
  PageState& p = pages_[page];
  KVTIER_EXPECTS(!inactive_page_.contains(p.key), "page " + std::to_string(page) + " holds a block already pooled");
  entered(p.priority);
  p.inactive = true;
  ++inactive_;
  inactive_page_[p.key] = page;
  if (inactive_children(p.key) == 0) make_leaf(page);
  if (const auto& parent = parent_of_page_[page]) {
    ++inactive_children_[*parent];
    if (const auto it = inactive_page_.find(*parent); it != inactive_page_.end()) unmake_leaf(it->second);
  }
}

void LeafPriorityPolicy::forget(std::uint32_t page) {
  KVTIER_EXPECTS(page < pages_.size(), "page " + std::to_string(page) + " is outside the pool");
  if (pages_[page].inactive) detach(page);
  pages_[page].holds_block = false;
  pages_[page].history = History{};
}

std::optional<std::vector<std::uint32_t>> LeafPriorityPolicy::evict_exactly(std::size_t n,
                                                                            std::span<const std::uint32_t> spared) {
  // The spared leave the pool for the choice (their parents may become
  // leaves) and come back with the priorities they had.
  std::vector<std::uint32_t> set_aside;
  for (const std::uint32_t page : spared) {
    if (in_pool(page)) {
      detach(page);
      set_aside.push_back(page);
    }
  }
  std::optional<std::vector<std::uint32_t>> victims;
  if (inactive_ >= n) {
    victims.emplace();
    victims->reserve(n);
    while (victims->size() < n) victims->push_back(evict()->value());
  }
  for (const std::uint32_t page : set_aside) enter_pool(page);
  return victims;
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

std::uint32_t LeafPriorityPolicy::least_in_cycle() const {
  std::optional<std::uint32_t> least;
  for (std::uint32_t page = 0; page < pages_.size(); ++page) {
    if (pages_[page].inactive && (!least || pages_[page].priority < pages_[*least].priority)) least = page;
  }
  return *least;
}

std::optional<PageId> LeafPriorityPolicy::evict() {
  if (inactive_ == 0) return std::nullopt;
  const std::uint32_t page = leaves_.empty() ? least_in_cycle() : choose_victim();
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
