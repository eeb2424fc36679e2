#pragma once
#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "g1/eviction/tiny_lfu.hpp"
#include "kvtier/g1/eviction_policy.hpp"

namespace kvtier::g1 {

/// The frame of the history-aware policies (docs/policies.md): each release
/// into the inactive pool is one access of the block, counted on a logical
/// clock (a request releases leaf first, so its leaf is the older access);
/// the victim is the inactive *leaf* — no inactive child — of least
/// priority, so a parent never leaves before its child, and a parent whose
/// last inactive child leaves becomes a candidate with the priority it had.
/// A block's access history outlives its eviction in a bounded ghost table
/// (two generations of at most `history_capacities` x `capacity` blocks each;
/// G1's pools: 2): a block seen again soon after it left is known again
/// (second sight). Subclasses say how a
/// history ranks, and may prefer a class of victims or spare one (ARC's
/// lists, S3-FIFO's queues).
class LeafPriorityPolicy : public EvictionPolicy {
 public:
  /// A node of the prefix tree: a G1 block (its PLH's position and fragment)
  /// or an engine's chunk (a hash of the engine's key, position 0).
  struct NodeKey {
    std::uint64_t position = 0;
    std::uint64_t fragment = 0;
    friend bool operator==(const NodeKey&, const NodeKey&) = default;
  };

  explicit LeafPriorityPolicy(std::uint32_t capacity, std::uint32_t history_capacities = 2);
  LeafPriorityPolicy(const LeafPriorityPolicy&) = delete;
  LeafPriorityPolicy& operator=(const LeafPriorityPolicy&) = delete;

  std::optional<std::string> insert_refusal(std::span<const PositionalLineageHash> plhs) const override;
  /// G1's release: one use of the block (record_use), then the pool (enter_pool).
  void insert(PageId page, const PositionalLineageHash& plh) override;
  void remove(PageId page) override;
  bool contains(PageId page) const override { return pages_[page.value()].inactive; }
  std::optional<PageId> evict() override;
  std::size_t size() const override { return inactive_; }
  std::size_t metadata_bytes() const override;

  /// Inactive blocks that may be evicted now (tests).
  std::size_t leaf_count() const noexcept { return leaves_.size(); }

  // The same frame for an engine whose uses and evictability come apart
  // (vLLM's CPU tier: a request reuses a chunk, a load pins and unpins it).
  /// One use of the node on `page` (`parent`: its prefix's last node, if
  /// known): history and priority move, pool membership does not. A page in
  /// the pool keeps its node (ContractError for another); a page that held
  /// another node takes this one, with the history remembered for it.
  void record_use(std::uint32_t page, const NodeKey& key, const std::optional<NodeKey>& parent,
                  const PositionalLineageHash& sketch_key);
  /// One more use of the node `page` holds, in its place in the tree.
  /// Precondition: holds(page).
  void record_use_again(std::uint32_t page);
  /// A newer place in recency for the node on `page`, no new use counted
  /// (a chunk this request stored, not reused). Precondition: holds(page).
  void record_recency(std::uint32_t page);
  /// The node on `page` joins the pool with the priority it has.
  /// Precondition: holds(page), not in the pool.
  void enter_pool(std::uint32_t page);
  /// The node on `page` leaves the pool, not evicted. Precondition: in the pool.
  void leave_pool(std::uint32_t page) { detach(page); }
  /// `page` holds nothing any more; its node's history is dropped, not remembered.
  void forget(std::uint32_t page);
  bool holds(std::uint32_t page) const noexcept { return page < pages_.size() && pages_[page].holds_block; }
  bool in_pool(std::uint32_t page) const noexcept { return page < pages_.size() && pages_[page].inactive; }
  /// Exactly `n` victims in the policy's order (leaf first), none of
  /// `spared` — or none at all, nothing changed, when fewer than n can go.
  std::optional<std::vector<std::uint32_t>> evict_exactly(std::size_t n, std::span<const std::uint32_t> spared);

 protected:
  /// What the policy remembers of a block across its stays.
  struct History {
    std::uint64_t last = 0;         // clock of the latest access
    std::uint64_t second_last = 0;  // of the one before (0: none remembered)
    std::uint64_t count = 0;        // accesses remembered
    std::uint64_t frequency = 0;    // the sketch's recent-access estimate (longer memory than count)
    std::uint64_t mark = 0;         // the policy's own: a queue entry tick, ...
    std::uint32_t state = 0;        // the policy's own: a queue, a list, ...
    std::uint32_t credit = 0;       // the policy's own: a frequency budget, ...
  };
  /// Lower is evicted first; the page id breaks ties.
  using Priority = std::pair<std::uint64_t, std::uint64_t>;
  enum class Access : std::uint8_t {
    New,       // no history: never seen, or forgotten
    Recalled,  // back from the ghost table after an eviction
    Again,     // released again while its page still holds it (a hit)
  };
  /// Block `block` (a hash of its identity) was just accessed (last,
  /// second_last and count already updated): update the policy's fields and
  /// say its priority; `previous` is the one it had on this page (Again only).
  virtual Priority accessed(History& history, Access how, const Priority& previous, std::uint64_t block) = 0;
  /// The node's latest access moved to now (history.last updated) without a
  /// new use: the priority it has, its recency renewed.
  virtual Priority refreshed(const History& history, const Priority& previous) {
    return {previous.first, history.last};
  }
  /// The class (Priority::first) to take the victim from, when it has a leaf;
  /// nullopt: the least priority overall.
  virtual std::optional<std::uint64_t> preferred_class() const { return std::nullopt; }
  /// The chosen victim may be spared: true after updating its history and
  /// `priority` (it is re-queued and the choice repeats). Must not spare forever.
  virtual bool second_chance(History& /*history*/, Priority& /*priority*/) { return false; }
  /// The victim of this priority just left (dynamic aging hooks here).
  virtual void evicted(const History& /*history*/, const Priority& /*priority*/) {}
  /// An inactive page of this priority joined or left the pool (class sizes).
  virtual void entered(const Priority& /*priority*/) {}
  virtual void left(const Priority& /*priority*/) {}
  /// A history entered or left the ghost table (ghost sizes).
  virtual void ghost_added(const History& /*history*/) {}
  virtual void ghost_dropped(const History& /*history*/) {}
  /// Ranks every inactive block anew by `rank(history, priority it has)`
  /// (a policy that changed its mind). O(n log n).
  template <class Rank>
  void rerank_all(Rank rank) {
    leaves_.clear();
    for (std::uint32_t page = 0; page < pages_.size(); ++page) {
      PageState& p = pages_[page];
      if (!p.inactive) continue;
      left(p.priority);
      p.priority = rank(p.history, p.priority);
      entered(p.priority);
      if (p.is_leaf) leaves_.emplace(p.priority.first, p.priority.second, page);
    }
  }
  /// The blocks the pool is sized for.
  std::uint32_t capacity() const noexcept { return static_cast<std::uint32_t>(pages_.size()); }
  /// A fresh tick of the access clock (a re-queued victim goes behind everything).
  std::uint64_t tick() noexcept { return ++clock_; }

 private:
  struct NodeKeyHash {
    std::size_t operator()(const NodeKey& k) const noexcept {
      return k.fragment ^ (k.position * 0xC2B2AE3D27D4EB4FULL);
    }
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
  /// The page, in the pool, goes out of the leaf order and class sizes
  /// while its priority changes; `requeue` puts it back.
  bool unqueue(std::uint32_t page);
  void requeue(std::uint32_t page, bool was_leaf);
  void make_leaf(std::uint32_t page);
  void unmake_leaf(std::uint32_t page);
  std::uint32_t choose_victim();
  /// Pooled blocks but no leaf: parents that point in a circle, which a
  /// prefix tree never makes but an engine's inconsistent chains might.
  /// The pooled page of least priority (a scan: only then).
  std::uint32_t least_in_cycle() const;
  /// The page left the pool: its parent may become a leaf.
  void detach(std::uint32_t page);
  History recall(const NodeKey& key);
  void remember(const NodeKey& key, const History& history);

  std::vector<PageState> pages_;
  std::vector<std::optional<NodeKey>> parent_of_page_;
  std::unordered_map<NodeKey, std::uint32_t, NodeKeyHash> inactive_page_;      // node -> its inactive page
  std::unordered_map<NodeKey, std::uint32_t, NodeKeyHash> inactive_children_;  // node -> inactive children
  std::unordered_map<NodeKey, History, NodeKeyHash> ghosts_;                   // the newer generation
  std::unordered_map<NodeKey, History, NodeKeyHash> old_ghosts_;
  std::set<LeafKey> leaves_;
  TinyLfu sketch_;
  std::size_t ghost_limit_;
  std::uint64_t clock_ = 0;
  std::size_t inactive_ = 0;
};

}  // namespace kvtier::g1
