#pragma once
// An obviously-correct model of the native backend (docs/semantics.md §2.2, §2.4, §4.1,
// §4.3) for differential tests: plain vectors, linear scans, no cleverness.
// It shares no code with the implementation beyond the signal and event types.
#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>
#include <vector>

#include "kvtier/core/kv_event.hpp"
#include "kvtier/core/move_block.hpp"

namespace kvtier::g1::testing {

class NativeReferenceModel {
 public:
  struct Owned {
    UniqueBlock block;
    int copy;
    bool pending = false;
    std::optional<std::uint64_t> parent;
    std::uint64_t local = 0;
    bool has_local = false;
  };
  using EventData = std::variant<KvStored, KvRemoved>;
  struct Refused : std::runtime_error {
    using std::runtime_error::runtime_error;
  };

  NativeReferenceModel(int capacity, int block_size, bool caching)
      : capacity_(capacity), block_size_(block_size), caching_(caching) {}

  /// nullopt = capacity exhausted. Throws Refused for a contract violation.
  std::optional<std::size_t> use(std::uint64_t owner, const UseSignal& use, std::size_t reuse) {
    if (reuse > 0 && (owners_.contains(owner) || !caching_ || reuse > use.blocks.size())) throw Refused("reuse");
    std::vector<int> hits;
    for (std::size_t i = 0; i < reuse; ++i) {
      const int primary = primary_copy(use.blocks[i].hash().value());
      if (primary < 0) throw Refused("not resident");
      hits.push_back(primary);
    }
    const int fresh = static_cast<int>(use.blocks.size() - reuse);
    const int free = capacity_ - static_cast<int>(copies_.size()) - reserved_;
    const int needed = std::max(0, fresh - free);
    std::vector<int> distinct_inactive_hits;
    for (int hit : hits) {
      if (in_lru(hit) && std::find(distinct_inactive_hits.begin(), distinct_inactive_hits.end(), hit) ==
                             distinct_inactive_hits.end()) {
        distinct_inactive_hits.push_back(hit);
      }
    }
    if (needed > static_cast<int>(lru_.size() - distinct_inactive_hits.size())) return std::nullopt;
    for (int hit : hits) {
      lru_.erase(std::remove(lru_.begin(), lru_.end(), hit), lru_.end());
      find(hit).pins++;
    }
    evict(needed);
    for (int hit : hits) {
      find(hit).pins--;
      find(hit).refs++;
    }
    auto& table = owners_[owner];
    std::optional<std::uint64_t> cursor;
    if (use.parent) cursor = use.parent->hash().value();
    std::size_t full_index = 0;
    for (std::size_t i = 0; i < use.blocks.size(); ++i) {
      const UniqueBlock& b = use.blocks[i];
      if (i < reuse) {
        table.push_back(Owned{.block = b, .copy = hits[i], .parent = std::nullopt});
      } else {
        const int copy = new_private_copy();
        Owned owned{.block = b, .copy = copy, .parent = std::nullopt};
        if (b.is_full()) {
          owned.pending = caching_;
          owned.parent = cursor;
          owned.has_local = !use.local_hashes.empty();
          owned.local = owned.has_local ? use.local_hashes[full_index].value() : 0;
        }
        table.push_back(owned);
      }
      if (b.is_full()) {
        cursor = b.hash().value();
        ++full_index;
      }
    }
    return use.blocks.size();
  }

  void deref(std::uint64_t owner, const std::vector<UniqueBlock>& leaf_first) {
    auto it = owners_.find(owner);
    if (it == owners_.end() || leaf_first.size() > it->second.size()) throw Refused("deref");
    for (std::size_t i = 0; i < leaf_first.size(); ++i) {
      if (!(leaf_first[i] == it->second[it->second.size() - 1 - i].block)) throw Refused("order");
    }
    for (std::size_t i = 0; i < leaf_first.size(); ++i) {
      release(it->second.back().copy);
      it->second.pop_back();
    }
    if (it->second.empty()) owners_.erase(it);
  }

  void promote(std::uint64_t owner, const Uuid& uuid, std::uint64_t hash, std::optional<std::uint64_t> parent,
               std::uint64_t local) {
    auto it = owners_.find(owner);
    if (it == owners_.end() || it->second.empty() || !it->second.back().block.is_partial() ||
        it->second.back().block.uuid() != uuid) {
      throw Refused("promote");
    }
    it->second.back().block = UniqueBlock::full(SequenceHash(hash));
    if (!caching_) return;
    if (cache(it->second.back().copy, hash)) {
      events_.push_back(KvStored{parent ? std::optional<SequenceHash>(SequenceHash(*parent)) : std::nullopt,
                                 {{SequenceHash(hash), LocalBlockHash(local)}},
                                 std::nullopt});
    }
  }

  void finalize(std::uint64_t owner, std::size_t before, std::size_t after) {
    if (!caching_) return;
    auto it = owners_.find(owner);
    if (it == owners_.end()) throw Refused("finalize");
    std::optional<KvStored> run;
    bool run_local = false;
    const std::size_t last = std::min(after / block_size_, it->second.size());
    for (std::size_t pos = before / block_size_; pos < last; ++pos) {
      Owned& o = it->second[pos];
      if (o.block.is_partial()) break;
      const bool visible = o.pending && cache(o.copy, o.block.hash().value());
      o.pending = false;
      if (!visible || (run && run_local != o.has_local)) {
        if (run) events_.push_back(*run);
        run.reset();
      }
      if (!visible) continue;
      if (!run) {
        run =
            KvStored{o.parent ? std::optional<SequenceHash>(SequenceHash(*o.parent)) : std::nullopt, {}, std::nullopt};
        run_local = o.has_local;
      }
      run->blocks.push_back({o.block.hash(), LocalBlockHash(o.local)});
    }
    if (run) events_.push_back(*run);
  }

  bool reserve_decode(int n) {
    const int free = capacity_ - static_cast<int>(copies_.size()) - reserved_;
    const int needed = std::max(0, n - free);
    if (needed > static_cast<int>(lru_.size())) return false;
    evict(needed);
    reserved_ += n;
    decode_left_ = n;
    return true;
  }
  void decode_use(std::uint64_t owner, const UseSignal& use) {
    const int n = static_cast<int>(use.blocks.size());
    if (n > decode_left_) throw Refused("decode");
    // The reserved units become free capacity that this Use takes at once.
    decode_left_ -= n;
    reserved_ -= n;
    if (!this->use(owner, use, 0)) throw std::logic_error("a decode allocation must be infallible");
  }
  void release_decode() {
    reserved_ -= decode_left_;
    decode_left_ = 0;
  }

  std::size_t active() const { return copies_.size() - lru_.size() + static_cast<std::size_t>(reserved_); }
  std::size_t inactive() const { return lru_.size(); }
  std::size_t refs() const {
    std::size_t total = 0;
    for (const Copy& c : copies_) total += c.hash ? c.refs : 1;
    return total;
  }
  bool cached(std::uint64_t hash) const { return primary_copy(hash) >= 0; }
  const std::map<std::uint64_t, std::vector<Owned>>& owners() const { return owners_; }
  std::vector<EventData> take_events() { return std::exchange(events_, {}); }

 private:
  struct Copy {
    int id;
    std::optional<std::uint64_t> hash;  // set once cached
    int refs = 0;
    int pins = 0;
    long cached_order = 0;
  };

  Copy& find(int id) {
    return *std::find_if(copies_.begin(), copies_.end(), [&](const Copy& c) { return c.id == id; });
  }
  bool in_lru(int id) const { return std::find(lru_.begin(), lru_.end(), id) != lru_.end(); }
  int primary_copy(std::uint64_t hash) const {
    const Copy* best = nullptr;
    for (const Copy& c : copies_) {
      if (c.hash == hash && (best == nullptr || c.cached_order < best->cached_order)) best = &c;
    }
    return best ? best->id : -1;
  }
  int new_private_copy() {
    copies_.push_back(Copy{.id = next_copy_++, .hash = std::nullopt});
    return copies_.back().id;
  }
  bool cache(int id, std::uint64_t hash) {
    const bool first = primary_copy(hash) < 0;
    Copy& c = find(id);
    c.hash = hash;
    c.refs = 1;
    c.cached_order = next_order_++;
    return first;
  }
  void release(int id) {
    Copy& c = find(id);
    if (!c.hash) {
      copies_.erase(std::find_if(copies_.begin(), copies_.end(), [&](const Copy& x) { return x.id == id; }));
      return;
    }
    if (--c.refs == 0 && c.pins == 0) lru_.push_back(id);
  }
  void evict(int count) {
    std::vector<SequenceHash> removed;
    for (int i = 0; i < count; ++i) {
      const int victim = lru_.front();
      lru_.erase(lru_.begin());
      const std::uint64_t hash = *find(victim).hash;
      copies_.erase(std::find_if(copies_.begin(), copies_.end(), [&](const Copy& x) { return x.id == victim; }));
      if (primary_copy(hash) < 0) removed.emplace_back(hash);
    }
    if (caching_ && !removed.empty()) events_.push_back(KvRemoved{removed});
  }

  int capacity_;
  std::size_t block_size_;
  bool caching_;
  std::vector<Copy> copies_;
  std::vector<int> lru_;  // front = next victim
  int reserved_ = 0;
  int decode_left_ = 0;
  int next_copy_ = 0;
  long next_order_ = 0;
  std::map<std::uint64_t, std::vector<Owned>> owners_;
  std::vector<EventData> events_;
};

}  // namespace kvtier::g1::testing
