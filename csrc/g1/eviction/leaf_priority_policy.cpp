#include "g1/eviction/leaf_priority_policy.hpp"

#include <algorithm>
#include <string>

#include "kvtier/core/expects.hpp"

namespace kvtier::g1 {

LeafPriorityPolicy::LeafPriorityPolicy(std::uint32_t capacity)
    : pages_(capacity), parent_of_page_(capacity), ghost_limit_(std::max<std::size_t>(std::size_t{capacity} * 2, 1)) {}

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
      return history;
    }
  }
  return History{};
}

void LeafPriorityPolicy::remember(const NodeKey& key, const History& history) {
  if (ghosts_.size() >= ghost_limit_) {  // the older generation is forgotten whole
    old_ghosts_ = std::move(ghosts_);
    ghosts_.clear();
  }
  ghosts_[key] = history;
}

void LeafPriorityPolicy::insert(PageId page_id, const PositionalLineageHash& plh) {
  const std::uint32_t page = page_id.value();
  KVTIER_EXPECTS(page < pages_.size(), "page " + std::to_string(page) + " is outside the pool");
  KVTIER_EXPECTS(!contains(page_id), "page " + std::to_string(page) + " is already inactive");
  if (auto refusal = insert_refusal(std::span(&plh, 1))) throw ContractError(std::move(*refusal));
  PageState& p = pages_[page];
  const NodeKey key = key_of(plh);
  if (!p.holds_block || !(p.key == key)) {
    p.key = key;
    p.history = recall(key);
    p.holds_block = true;
  }
  p.history.second_last = p.history.last;
  p.history.last = ++clock_;
  ++p.history.count;
  p.priority = priority(p.history);
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

std::optional<PageId> LeafPriorityPolicy::evict() {
  if (leaves_.empty()) return std::nullopt;
  const std::uint32_t page = std::get<2>(*leaves_.begin());
  detach(page);
  PageState& p = pages_[page];
  evicted(p.priority);
  remember(p.key, p.history);
  p.holds_block = false;
  return PageId(page);
}

std::size_t LeafPriorityPolicy::metadata_bytes() const {
  constexpr std::size_t kMapNode = 48;  // a hash-map node with its key and bucket share, about
  return pages_.capacity() * (sizeof(PageState) + sizeof(std::optional<NodeKey>)) +
         (inactive_page_.size() + inactive_children_.size()) * kMapNode +
         (ghosts_.size() + old_ghosts_.size()) * (kMapNode + sizeof(History)) + leaves_.size() * kMapNode;
}

}  // namespace kvtier::g1
