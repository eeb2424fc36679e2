#include "g1/eviction/lineage_eviction_policy.hpp"

#include <algorithm>
#include <functional>
#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::g1 {

LineageEvictionPolicy::LineageEvictionPolicy(std::uint32_t capacity)
    // Live nodes never exceed twice the pages (a ghost stands for an active
    // page or a missing parent of a real node) and are about one per page in
    // practice: size for the bound at a high load.
    : node_of_page_(capacity, kNoNode), index_(2 * std::size_t{capacity} + 2, KeyOfNode{&nodes_}, /*slack=*/8) {}

LineageEvictionPolicy::LeafKey LineageEvictionPolicy::leaf_key(std::uint32_t node) const {
  const Node& n = nodes_[node];
  return {n.tick, n.position, n.fragment, node};
}

std::optional<std::string> LineageEvictionPolicy::insert_refusal(std::span<const PositionalLineageHash> plhs) const {
  const auto collision = [](const NodeKey& key) {
    return "PLH collision in the lineage pool at position " + std::to_string(key.position) + " fragment " +
           std::to_string(key.fragment);
  };
  std::vector<NodeKey> keys;
  keys.reserve(plhs.size());
  for (const PositionalLineageHash& plh : plhs) {
    const NodeKey key = key_of(plh);
    const std::uint32_t node = index_.find(key);
    if (node != kNoNode && nodes_[node].page != kNoNode) return collision(key);  // a real block holds the key
    keys.push_back(key);
  }
  // A request's blocks come with strictly monotone positions, so no key can
  // repeat: the sort is only needed otherwise.
  const auto by_position = [](const NodeKey& a, const NodeKey& b) { return a.position < b.position; };
  const auto by_position_desc = [](const NodeKey& a, const NodeKey& b) { return a.position > b.position; };
  if (std::adjacent_find(keys.begin(), keys.end(), std::not_fn(by_position)) == keys.end() ||
      std::adjacent_find(keys.begin(), keys.end(), std::not_fn(by_position_desc)) == keys.end()) {
    return std::nullopt;
  }
  std::sort(keys.begin(), keys.end());
  if (const auto twice = std::adjacent_find(keys.begin(), keys.end()); twice != keys.end()) return collision(*twice);
  return std::nullopt;
}

std::uint32_t LineageEvictionPolicy::new_node(const NodeKey& key) {
  std::uint32_t node;
  if (free_nodes_ != kNoNode) {
    node = free_nodes_;
    free_nodes_ = nodes_[node].parent;
    nodes_[node] = Node{};
  } else {
    node = static_cast<std::uint32_t>(nodes_.size());
    nodes_.emplace_back();
  }
  nodes_[node].position = static_cast<std::uint32_t>(key.position);
  nodes_[node].fragment = key.fragment;
  index_.insert(node);
  ++live_nodes_;
  return node;
}

void LineageEvictionPolicy::free_node(std::uint32_t node) {
  index_.erase(node);
  nodes_[node].parent = free_nodes_;
  free_nodes_ = node;
  --live_nodes_;
}

void LineageEvictionPolicy::link_parent(std::uint32_t node, const PositionalLineageHash& plh) {
  if (plh.position() == 0) return;
  const NodeKey parent_key{plh.position() - 1, plh.parent_fragment()};
  std::uint32_t parent = index_.find(parent_key);
  if (parent == kNoNode) {
    parent = new_node(parent_key);  // a ghost until the real parent arrives
  } else if (nodes_[parent].children == 0 && nodes_[parent].page != kNoNode) {
    leaves_.erase(leaf_key(parent));
  }
  ++nodes_[parent].children;
  nodes_[node].parent = parent;
}

void LineageEvictionPolicy::insert(PageId page, const PositionalLineageHash& plh) {
  KVTIER_EXPECTS(!contains(page), "page " + std::to_string(page.value()) + " is already inactive");
  const NodeKey key = key_of(plh);
  std::uint32_t node = index_.find(key);
  if (node == kNoNode) {
    node = new_node(key);
  } else if (nodes_[node].page != kNoNode) {
    check_insertable(std::span<const PositionalLineageHash>(&plh, 1));  // throws: the key is taken
  }                                                                     // else: fill the ghost
  nodes_[node].page = page.value();
  nodes_[node].tick = next_tick_++;
  node_of_page_[page.value()] = node;
  ++real_nodes_;
  if (nodes_[node].parent == kNoNode) link_parent(node, plh);
  if (nodes_[node].children == 0) leaves_.insert(leaf_key(node));
}

void LineageEvictionPolicy::drop_childless(std::uint32_t node) {
  for (;;) {
    const std::uint32_t parent = nodes_[node].parent;
    free_node(node);
    if (parent == kNoNode) return;
    Node& p = nodes_[parent];
    if (--p.children > 0) return;
    if (p.page != kNoNode) {
      leaves_.insert(leaf_key(parent));  // a leaf again, with its original tick
      return;
    }
    node = parent;  // a childless ghost: prune it too
  }
}

void LineageEvictionPolicy::remove(PageId page) {
  const std::uint32_t node = node_of_page_.at(page.value());
  KVTIER_EXPECTS(node != kNoNode, "page " + std::to_string(page.value()) + " is not inactive");
  node_of_page_[page.value()] = kNoNode;
  --real_nodes_;
  if (nodes_[node].children > 0) {
    nodes_[node].page = kNoNode;  // its inactive children keep their links through a ghost
    return;
  }
  leaves_.erase(leaf_key(node));
  drop_childless(node);
}

std::optional<PageId> LineageEvictionPolicy::evict() {
  if (leaves_.empty()) return std::nullopt;
  const PageId page(nodes_[std::get<3>(*leaves_.begin())].page);
  remove(page);
  return page;
}

std::size_t LineageEvictionPolicy::metadata_bytes() const {
  return nodes_.size() * sizeof(Node) + node_of_page_.capacity() * sizeof(std::uint32_t) + index_.memory_bytes() +
         leaves_.size() * (sizeof(LeafKey) + 4 * sizeof(void*));
}

}  // namespace kvtier::g1
