#pragma once
// An obviously-correct model of the KVBM backend (docs/semantics.md §2.5, §4.2, §4.3) for
// differential tests: maps and linear scans, each eviction policy written out
// from its rules. Only the TinyLFU estimator is shared with the
// implementation (both sides feed it the same touches).
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <vector>

#include "g1/eviction/tiny_lfu.hpp"
#include "kvtier/core/kv_event.hpp"
#include "kvtier/core/move_block.hpp"
#include "kvtier/g1/eviction_policy.hpp"

namespace kvtier::g1::testing {

class KvbmReferenceModel {
 public:
  using EventData = std::variant<KvStored, KvRemoved>;
  using Key = std::pair<std::uint64_t, std::uint64_t>;  // a PLH
  struct Refused : std::runtime_error {
    using std::runtime_error::runtime_error;
  };

  KvbmReferenceModel(int capacity, EvictionBackend policy)
      : capacity_(capacity), free_(capacity), policy_(policy), frequency_(static_cast<std::uint32_t>(capacity)) {}

  /// nullopt = capacity exhausted.
  std::optional<std::size_t> use(std::uint64_t owner, const UseSignal& use, int decode_slots = -1) {
    enum Kind { Hit, Match, Existing, Fresh };
    std::vector<Kind> kinds;
    std::vector<Key> matched_inactive;
    int fresh = 0;
    std::size_t f = 0;
    for (const UniqueBlock& b : use.blocks) {
      if (b.is_partial()) {
        kinds.push_back(partials_.contains(b.uuid()) ? Existing : Fresh);
      } else {
        const Key key = key_of(use.plhs[f++]);
        const Block* active = active_by_hash(b.hash().value());
        if (active) {
          kinds.push_back(Hit);
        } else if (registry_.contains(key)) {
          kinds.push_back(Match);
          if (is_inactive(key) &&
              std::find(matched_inactive.begin(), matched_inactive.end(), key) == matched_inactive.end()) {
            matched_inactive.push_back(key);
          }
        } else {
          kinds.push_back(Fresh);
        }
      }
      if (kinds.back() == Fresh) ++fresh;
    }
    if (decode_slots >= 0) {
      if (fresh > decode_slots) throw Refused("decode");
    } else if (fresh > free_ + inactive_count() - static_cast<int>(matched_inactive.size())) {
      return std::nullopt;
    }
    f = 0;
    for (std::size_t i = 0; i < use.blocks.size(); ++i) {
      if (use.blocks[i].is_partial()) continue;
      const Key key = key_of(use.plhs[f++]);
      if (kinds[i] == Match) {
        if (is_inactive(key)) leave_pool(key);
        frequency_.increment(use.plhs[f - 1]);
      }
    }
    std::vector<SequenceHash> removed;
    if (decode_slots < 0) {
      for (int i = 0; i < fresh; ++i) {
        if (free_ > 0) {
          --free_;
        } else {
          const Key victim = pick_victim();
          leave_pool(victim);
          removed.emplace_back(registry_.at(victim).hash);
          registry_.erase(victim);
        }
      }
    }
    auto& table = owners_[owner];
    std::optional<KvStored> run;
    const auto flush = [&] {
      if (run) events_.push_back(*run);
      run.reset();
    };
    std::optional<std::uint64_t> cursor;
    if (use.parent) cursor = use.parent->hash().value();
    f = 0;
    for (std::size_t i = 0; i < use.blocks.size(); ++i) {
      const UniqueBlock& b = use.blocks[i];
      table.push_back(b);
      if (b.is_partial()) {
        if (kinds[i] == Fresh) partials_.insert(b.uuid());
        continue;
      }
      const PositionalLineageHash plh = use.plhs[f];
      const Key key = key_of(plh);
      const std::uint64_t local = use.local_hashes.empty() ? 0 : use.local_hashes[f].value();
      ++f;
      if (kinds[i] == Fresh && !registry_.contains(key)) {
        registry_[key] = Block{b.hash().value(), 1, plh};
        frequency_.increment(plh);
        if (!run) run = KvStored{cursor ? std::optional<SequenceHash>(SequenceHash(*cursor)) : std::nullopt, {}, {}};
        run->blocks.push_back({b.hash(), LocalBlockHash(local)});
      } else {
        if (kinds[i] == Fresh) ++free_;  // a duplicate registration gives its page back
        Block& target = kinds[i] == Hit ? *active_by_hash_mut(b.hash().value()) : registry_.at(key);
        if (is_inactive(key_of(target.plh))) leave_pool(key_of(target.plh));
        target.refs++;
        flush();
      }
      cursor = b.hash().value();
    }
    flush();
    if (!removed.empty()) events_.push_back(KvRemoved{removed});
    return use.blocks.size();
  }

  void deref(std::uint64_t owner, const std::vector<UniqueBlock>& leaf_first) {
    auto it = owners_.find(owner);
    if (it == owners_.end() || leaf_first.size() > it->second.size()) throw Refused("deref");
    for (std::size_t i = 0; i < leaf_first.size(); ++i) {
      if (!(leaf_first[i] == it->second[it->second.size() - 1 - i])) throw Refused("order");
    }
    for (const UniqueBlock& b : leaf_first) {
      it->second.pop_back();
      if (b.is_partial()) {
        partials_.erase(b.uuid());
        ++free_;
        continue;
      }
      Block& block = *owned_block(b.hash().value());
      if (--block.refs == 0) enter_pool(key_of(block.plh));
    }
    if (it->second.empty()) owners_.erase(it);
  }

  void promote(std::uint64_t owner, const PromoteSignal& p) {
    auto it = owners_.find(owner);
    if (it == owners_.end() || !it->second.back().is_partial() || it->second.back().uuid() != p.uuid) {
      throw Refused("promote");
    }
    partials_.erase(p.uuid);
    it->second.back() = UniqueBlock::full(p.hash);
    Block* existing = active_by_hash_mut(p.hash.value());
    if (!existing && registry_.contains(key_of(p.plh))) existing = &registry_.at(key_of(p.plh));
    if (existing) {
      ++free_;
      frequency_.increment(p.plh);
      if (is_inactive(key_of(existing->plh))) leave_pool(key_of(existing->plh));
      existing->refs++;
      return;
    }
    registry_[key_of(p.plh)] = Block{p.hash.value(), 1, p.plh};
    frequency_.increment(p.plh);
    events_.push_back(KvStored{p.parent, {{p.hash, p.local}}, std::nullopt});
  }

  bool reserve_decode(int n) {
    if (n > free_ + inactive_count()) return false;
    std::vector<SequenceHash> removed;
    for (int i = 0; i < n; ++i) {
      if (free_ > 0) {
        --free_;
        continue;
      }
      const Key victim = pick_victim();
      leave_pool(victim);
      removed.emplace_back(registry_.at(victim).hash);
      registry_.erase(victim);
    }
    if (!removed.empty()) events_.push_back(KvRemoved{removed});
    decode_left_ = n;
    return true;
  }
  void decode_use(std::uint64_t owner, const UseSignal& u) {
    const int before = decode_left_;
    if (!use(owner, u, decode_left_)) throw std::logic_error("decode allocation failed in the model");
    decode_left_ = before - static_cast<int>(std::count_if(u.blocks.begin(), u.blocks.end(), [&](const UniqueBlock& b) {
                     return b.is_partial();  // the driver only decodes fresh partials
                   }));
  }
  void release_decode() {
    free_ += decode_left_;
    decode_left_ = 0;
  }

  std::size_t inactive() const { return static_cast<std::size_t>(inactive_count()); }
  std::size_t active() const { return static_cast<std::size_t>(capacity_ - free_ - inactive_count()); }
  std::size_t refs() const {
    std::size_t total = partials_.size();
    for (const auto& [key, b] : registry_) total += static_cast<std::size_t>(b.refs);
    return total;
  }
  bool cached(std::uint64_t hash) const {
    return std::any_of(registry_.begin(), registry_.end(), [&](const auto& e) { return e.second.hash == hash; });
  }
  const std::map<std::uint64_t, std::vector<UniqueBlock>>& owners() const { return owners_; }
  std::vector<EventData> take_events() { return std::exchange(events_, {}); }

 private:
  struct Block {
    std::uint64_t hash;
    int refs;
    PositionalLineageHash plh;
  };
  struct Node {  // Lineage graph node
    bool ghost;
    std::uint64_t tick;
    std::optional<std::pair<std::uint64_t, std::uint64_t>> parent;  // (position, fragment)
    Key plh;
  };
  using NodeKey = std::pair<std::uint64_t, std::uint64_t>;

  static Key key_of(const PositionalLineageHash& plh) { return {plh.high(), plh.low()}; }
  static PositionalLineageHash plh_of(const Key& k) { return PositionalLineageHash::from_raw(k.first, k.second); }
  static NodeKey node_key(const Key& k) {
    const auto plh = plh_of(k);
    return {plh.position(), plh.current_fragment()};
  }
  Block* active_by_hash_mut(std::uint64_t hash) {
    for (auto& [key, b] : registry_) {
      if (b.hash == hash && b.refs > 0) return &b;
    }
    return nullptr;
  }
  const Block* active_by_hash(std::uint64_t hash) const {
    for (const auto& [key, b] : registry_) {
      if (b.hash == hash && b.refs > 0) return &b;
    }
    return nullptr;
  }
  Block* owned_block(std::uint64_t hash) { return active_by_hash_mut(hash); }

  int inactive_count() const { return static_cast<int>(inactive_.size()); }
  bool is_inactive(const Key& key) const { return inactive_.contains(key); }

  void enter_pool(const Key& key) {
    inactive_[key] = next_tick_++;
    level_[key] = static_cast<int>(level_for(frequency_.estimate(plh_of(key))));
    if (policy_ != EvictionBackend::Lineage) return;
    const NodeKey nk = node_key(key);
    const auto plh = plh_of(key);
    auto it = nodes_.find(nk);
    if (it == nodes_.end()) {
      nodes_[nk] = Node{false, inactive_[key], std::nullopt, key};
    } else {
      it->second.ghost = false;
      it->second.tick = inactive_[key];
      it->second.plh = key;
    }
    Node& n = nodes_[nk];
    if (!n.parent && plh.position() > 0) {
      n.parent = NodeKey{plh.position() - 1, plh.parent_fragment()};
      if (!nodes_.contains(*n.parent)) nodes_[*n.parent] = Node{true, 0, std::nullopt, {}};
    }
  }

  void leave_pool(const Key& key) {
    inactive_.erase(key);
    level_.erase(key);
    if (policy_ != EvictionBackend::Lineage) return;
    const NodeKey nk = node_key(key);
    if (has_children(nk)) {
      nodes_[nk].ghost = true;
      return;
    }
    erase_and_prune(nk);
  }

  bool has_children(const NodeKey& nk) const {
    return std::any_of(nodes_.begin(), nodes_.end(), [&](const auto& e) { return e.second.parent == nk; });
  }
  void erase_and_prune(NodeKey nk) {
    for (;;) {
      const auto parent = nodes_.at(nk).parent;
      nodes_.erase(nk);
      if (!parent || has_children(*parent) || !nodes_.at(*parent).ghost) return;
      nk = *parent;
    }
  }

  static std::uint32_t level_for(std::uint32_t frequency) {
    return frequency >= 15 ? 3 : frequency >= 8 ? 2 : frequency >= 3 ? 1 : 0;
  }

  Key pick_victim() const {
    if (policy_ == EvictionBackend::Lru) {
      return std::min_element(inactive_.begin(), inactive_.end(),
                              [](const auto& a, const auto& b) { return a.second < b.second; })
          ->first;
    }
    if (policy_ == EvictionBackend::MultiLru) {
      return std::min_element(inactive_.begin(), inactive_.end(),
                              [&](const auto& a, const auto& b) {
                                return std::pair(level_.at(a.first), a.second) <
                                       std::pair(level_.at(b.first), b.second);
                              })
          ->first;
    }
    // Lineage: the real leaf with the smallest (tick, position, fragment).
    std::optional<std::tuple<std::uint64_t, std::uint64_t, std::uint64_t, Key>> best;
    for (const auto& [nk, node] : nodes_) {
      if (node.ghost || has_children(nk)) continue;
      const auto candidate = std::tuple(node.tick, nk.first, nk.second, node.plh);
      if (!best || candidate < *best) best = candidate;
    }
    return std::get<3>(*best);
  }

  int capacity_;
  int free_;
  EvictionBackend policy_;
  TinyLfu frequency_;
  std::map<Key, Block> registry_;
  std::map<Key, std::uint64_t> inactive_;  // PLH -> insertion tick
  std::map<Key, int> level_;               // MultiLru level at insertion
  std::map<NodeKey, Node> nodes_;          // Lineage graph
  std::uint64_t next_tick_ = 0;
  std::set<Uuid> partials_;
  std::map<std::uint64_t, std::vector<UniqueBlock>> owners_;
  std::vector<EventData> events_;
  int decode_left_ = 0;
};

}  // namespace kvtier::g1::testing
