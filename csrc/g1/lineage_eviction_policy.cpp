#include "kvtier/g1/lineage_eviction_policy.hpp"

#include <string>

#include "kvtier/core/errors.hpp"

namespace kvtier::g1 {

LineageEvictionPolicy::LineageEvictionPolicy(std::uint32_t capacity)
    : node_of_page_(capacity, kNone), index_(2 * std::size_t{capacity} + 2) {
  nodes_.reserve(capacity);
}

LineageEvictionPolicy::LeafKey LineageEvictionPolicy::leaf_key(std::uint32_t node) const {
  const Node& n = nodes_[node];
  return {n.tick, n.key.position, n.key.fragment, node};
}

void LineageEvictionPolicy::check_insertable(std::span<const PositionalLineageHash> plhs) const {
  for (std::size_t i = 0; i < plhs.size(); ++i) {
    const NodeKey key = key_of(plhs[i]);
    const auto describe = [&] {
      return "position " + std::to_string(key.position) + " fragment " + std::to_string(key.fragment);
    };
    const std::uint32_t node = index_.find(key);
    if (node != FlatIndex<NodeKey, NodeKeyHash>::kAbsent && nodes_[node].page != kNone) {
      throw ContractError(nodes_[node].plh == plhs[i] ? "duplicate inactive insertion of PLH " + plhs[i].to_string()
                                                      : "PLH collision in the lineage pool at " + describe());
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (key_of(plhs[j]) == key) throw ContractError("PLH collision in the lineage pool at " + describe());
    }
  }
}

std::uint32_t LineageEvictionPolicy::new_node(const NodeKey& key) {
  std::uint32_t node;
  if (!free_nodes_.empty()) {
    node = free_nodes_.back();
    free_nodes_.pop_back();
    nodes_[node] = Node{};
  } else {
    node = static_cast<std::uint32_t>(nodes_.size());
    nodes_.emplace_back();
  }
  nodes_[node].key = key;
  index_.assign(key, node);
  ++live_nodes_;
  return node;
}

void LineageEvictionPolicy::free_node(std::uint32_t node) {
  index_.erase(nodes_[node].key);
  free_nodes_.push_back(node);
  --live_nodes_;
}

void LineageEvictionPolicy::link_parent(std::uint32_t node) {
  const Node& n = nodes_[node];
  if (n.key.position == 0) return;
  const NodeKey parent_key{n.key.position - 1, n.plh.parent_fragment()};
  std::uint32_t parent = index_.find(parent_key);
  if (parent == FlatIndex<NodeKey, NodeKeyHash>::kAbsent) {
    parent = new_node(parent_key);  // a ghost until the real parent arrives
  } else if (nodes_[parent].children == 0 && nodes_[parent].page != kNone) {
    leaves_.erase(leaf_key(parent));
  }
  ++nodes_[parent].children;
  nodes_[node].parent = parent;
}

void LineageEvictionPolicy::insert(PageId page, const PositionalLineageHash& plh) {
  const std::span<const PositionalLineageHash> one(&plh, 1);
  check_insertable(one);
  if (contains(page)) throw ContractError("page " + std::to_string(page.value()) + " is already inactive");
  const NodeKey key = key_of(plh);
  std::uint32_t node = index_.find(key);
  if (node == FlatIndex<NodeKey, NodeKeyHash>::kAbsent) node = new_node(key);
  Node& n = nodes_[node];
  n.plh = plh;
  n.page = page.value();
  n.tick = next_tick_++;
  node_of_page_[page.value()] = node;
  ++real_nodes_;
  if (n.parent == kNone) link_parent(node);
  if (nodes_[node].children == 0) leaves_.insert(leaf_key(node));
}

void LineageEvictionPolicy::drop_childless(std::uint32_t node) {
  for (;;) {
    const std::uint32_t parent = nodes_[node].parent;
    free_node(node);
    if (parent == kNone) return;
    Node& p = nodes_[parent];
    if (--p.children > 0) return;
    if (p.page != kNone) {
      leaves_.insert(leaf_key(parent));  // a leaf again, with its original tick
      return;
    }
    node = parent;  // a childless ghost: prune it too
  }
}

void LineageEvictionPolicy::remove(PageId page) {
  const std::uint32_t node = node_of_page_.at(page.value());
  if (node == kNone) throw ContractError("page " + std::to_string(page.value()) + " is not inactive");
  node_of_page_[page.value()] = kNone;
  --real_nodes_;
  Node& n = nodes_[node];
  if (n.children > 0) {
    n.page = kNone;  // its inactive children keep their links through a ghost
    return;
  }
  leaves_.erase(leaf_key(node));
  drop_childless(node);
}

std::optional<PageId> LineageEvictionPolicy::evict() {
  if (leaves_.empty()) return std::nullopt;
  const std::uint32_t node = std::get<3>(*leaves_.begin());
  const PageId page(nodes_[node].page);
  remove(page);
  return page;
}

std::size_t LineageEvictionPolicy::metadata_bytes() const {
  return nodes_.capacity() * sizeof(Node) + free_nodes_.capacity() * sizeof(std::uint32_t) +
         node_of_page_.capacity() * sizeof(std::uint32_t) + index_.memory_bytes() +
         leaves_.size() * (sizeof(LeafKey) + 4 * sizeof(void*));
}

}  // namespace kvtier::g1
