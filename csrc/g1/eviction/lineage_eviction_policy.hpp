#pragma once
#include <deque>
#include <set>
#include <tuple>
#include <vector>

#include "g1/common/id_index.hpp"
#include "kvtier/g1/eviction_policy.hpp"

namespace kvtier::g1 {

/// KVBM's default inactive pool: a graph keyed by (position, current
/// fragment) with a link from each block to its parent at position − 1.
/// Only leaves (no child node) are evictable; the victim is the leaf with the
/// smallest (insertion tick, position, fragment). A parent left childless
/// becomes a leaf with its original tick. A block matched while it still has
/// children, or a parent missing when its child arrives, is a ghost: never
/// evicted, filled (with a fresh tick) when the real block arrives, pruned
/// upward once childless.
class LineageEvictionPolicy final : public EvictionPolicy {
 public:
  explicit LineageEvictionPolicy(std::uint32_t capacity);
  LineageEvictionPolicy(const LineageEvictionPolicy&) = delete;  // the index points into this object
  LineageEvictionPolicy& operator=(const LineageEvictionPolicy&) = delete;
  std::optional<std::string> insert_refusal(std::span<const PositionalLineageHash> plhs) const override;
  void insert(PageId page, const PositionalLineageHash& plh) override;
  void remove(PageId page) override;
  bool contains(PageId page) const override { return node_of_page_[page.value()] != kNoNode; }
  std::optional<PageId> evict() override;
  std::size_t size() const override { return real_nodes_; }
  std::size_t metadata_bytes() const override;

  /// Nodes that are ghosts now (for tests and diagnostics).
  std::size_t ghost_count() const noexcept { return live_nodes_ - real_nodes_; }

 private:
  static constexpr std::uint32_t kNoNode = 0xFFFFFFFFU;
  struct NodeKey {
    std::uint64_t position = 0;
    std::uint64_t fragment = 0;
    friend bool operator==(const NodeKey&, const NodeKey&) = default;
    friend auto operator<=>(const NodeKey&, const NodeKey&) = default;
  };
  struct Node {
    std::uint64_t tick = 0;
    std::uint64_t fragment = 0;
    std::uint32_t position = 0;
    std::uint32_t page = kNoNode;  // kNoNode: a ghost
    std::uint32_t parent = kNoNode;
    std::uint32_t children = 0;
    NodeKey key() const noexcept { return {position, fragment}; }
  };
  /// The node index stores node ids; a node's key is its (position, fragment).
  struct KeyOfNode {
    const std::deque<Node>* nodes;
    NodeKey key(std::uint32_t node) const noexcept { return (*nodes)[node].key(); }
    static std::size_t hash(const NodeKey& k) noexcept { return k.fragment ^ (k.position * 0xC2B2AE3D27D4EB4FULL); }
  };
  using LeafKey = std::tuple<std::uint64_t, std::uint64_t, std::uint64_t, std::uint32_t>;

  static NodeKey key_of(const PositionalLineageHash& plh) { return {plh.position(), plh.current_fragment()}; }
  LeafKey leaf_key(std::uint32_t node) const;
  std::uint32_t new_node(const NodeKey& key);
  void link_parent(std::uint32_t node, const PositionalLineageHash& plh);
  /// Removes a childless node and fixes its ancestors (leaf again, or pruned).
  void drop_childless(std::uint32_t node);
  void free_node(std::uint32_t node);

  std::deque<Node> nodes_;              // grows in chunks: ghosts never double the whole table
  std::uint32_t free_nodes_ = kNoNode;  // freed nodes, linked through Node::parent
  std::vector<std::uint32_t> node_of_page_;
  IdIndex<KeyOfNode> index_;
  std::set<LeafKey> leaves_;
  std::uint64_t next_tick_ = 0;
  std::size_t real_nodes_ = 0;
  std::size_t live_nodes_ = 0;
};

}  // namespace kvtier::g1
