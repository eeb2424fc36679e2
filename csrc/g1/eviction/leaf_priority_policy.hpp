#pragma once
#include <cstdint>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kvtier/g1/eviction_policy.hpp"

namespace kvtier::g1 {

/// The frame of the history-aware policies (docs/policies.md): each release
/// into the inactive pool is one access of the block, counted on a logical
/// clock (a request releases leaf first, so its leaf is the older access);
/// the victim is the inactive *leaf* — no inactive child — of least
/// priority, so a parent never leaves before its child, and a parent whose
/// last inactive child leaves becomes a candidate with the priority it had.
/// A block's access history outlives its eviction in a bounded ghost table
/// (two generations of at most twice `capacity` blocks each): a block seen again
/// soon after it left is known again (second sight). Subclasses say how a
/// history ranks.
class LeafPriorityPolicy : public EvictionPolicy {
 public:
  explicit LeafPriorityPolicy(std::uint32_t capacity);
  LeafPriorityPolicy(const LeafPriorityPolicy&) = delete;
  LeafPriorityPolicy& operator=(const LeafPriorityPolicy&) = delete;

  std::optional<std::string> insert_refusal(std::span<const PositionalLineageHash> plhs) const override;
  void insert(PageId page, const PositionalLineageHash& plh) override;
  void remove(PageId page) override;
  bool contains(PageId page) const override { return pages_[page.value()].inactive; }
  std::optional<PageId> evict() override;
  std::size_t size() const override { return inactive_; }
  std::size_t metadata_bytes() const override;

  /// Inactive blocks that may be evicted now (tests).
  std::size_t leaf_count() const noexcept { return leaves_.size(); }

 protected:
  /// What the policy remembers of a block across its stays.
  struct History {
    std::uint64_t last = 0;         // clock of the latest access
    std::uint64_t second_last = 0;  // of the one before (0: none remembered)
    std::uint64_t count = 0;        // accesses remembered
  };
  /// Lower is evicted first; the page id breaks ties.
  using Priority = std::pair<std::uint64_t, std::uint64_t>;
  virtual Priority priority(const History& history) const = 0;
  /// The victim of this priority just left (dynamic aging hooks here).
  virtual void evicted(const Priority& /*priority*/) {}

 private:
  struct NodeKey {
    std::uint64_t position = 0;
    std::uint64_t fragment = 0;
    friend bool operator==(const NodeKey&, const NodeKey&) = default;
  };
  struct NodeKeyHash {
    std::size_t operator()(const NodeKey& k) const noexcept { return k.fragment ^ (k.position * 0xC2B2AE3D27D4EB4FULL); }
  };
  struct PageState {
    NodeKey key;
    History history;
    Priority priority{};
    bool inactive = false;
    bool is_leaf = false;
    bool holds_block = false;  // key/history are the block on this page (until evicted)
  };
  using LeafKey = std::tuple<std::uint64_t, std::uint64_t, std::uint32_t>;

  static NodeKey key_of(const PositionalLineageHash& plh) { return {plh.position(), plh.current_fragment()}; }
  static std::optional<NodeKey> parent_key_of(const NodeKey& key, const PositionalLineageHash& plh);
  std::uint32_t inactive_children(const NodeKey& key) const;
  void make_leaf(std::uint32_t page);
  void unmake_leaf(std::uint32_t page);
  /// The page left the pool: its parent may become a leaf.
  void detach(std::uint32_t page);
  History recall(const NodeKey& key);
  void remember(const NodeKey& key, const History& history);

  std::vector<PageState> pages_;
  std::vector<std::optional<NodeKey>> parent_of_page_;
  std::unordered_map<NodeKey, std::uint32_t, NodeKeyHash> inactive_page_;     // node -> its inactive page
  std::unordered_map<NodeKey, std::uint32_t, NodeKeyHash> inactive_children_;  // node -> inactive children
  std::unordered_map<NodeKey, History, NodeKeyHash> ghosts_;                   // the newer generation
  std::unordered_map<NodeKey, History, NodeKeyHash> old_ghosts_;
  std::set<LeafKey> leaves_;
  std::size_t ghost_limit_;
  std::uint64_t clock_ = 0;
  std::size_t inactive_ = 0;
};

}  // namespace kvtier::g1
