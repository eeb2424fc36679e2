#include "g1/support/group_reference_model.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace kvtier::g1::test {

GroupReferenceModel::GroupReferenceModel(const ModelGeometry& geometry, std::size_t capacity)
    : groups_(geometry.groups()),
      unit_(geometry.hash_block_size()),
      scheduler_(geometry.scheduler_block_size()),
      hybrid_(geometry.has_null_page()),
      pages_(capacity) {
  // The null page is page 0 and is never on the free list.
  for (std::size_t p = hybrid_ ? 1 : 0; p < capacity; ++p) free_.push_back(static_cast<int>(p));
}

std::size_t GroupReferenceModel::skipped_tokens(std::size_t g, std::size_t n) const {
  const GroupSpec& spec = groups_[g].spec;
  switch (spec.kind) {
    case GroupKind::SlidingWindow:
    case GroupKind::SlidingWindowMla:
      return n + 1 > spec.sliding_window ? n + 1 - spec.sliding_window : 0;
    case GroupKind::ChunkedLocalAttention:
      return n / spec.attention_chunk_size * spec.attention_chunk_size;
    case GroupKind::Mamba:
      if (n == 0) return 0;
      if (spec.mamba_mode == MambaMode::Align) return n - 1 > bs(g) ? n - 1 - bs(g) : 0;
      return n - 1;
    default:
      return 0;
  }
}

std::optional<int> GroupReferenceModel::cached(std::span<const SequenceHash> hashes, std::size_t g,
                                               std::size_t block) const {
  const std::size_t index = (block + 1) * bs(g) / unit_ - 1;
  if (index >= hashes.size()) return std::nullopt;
  const auto it = index_.find({hashes[index].value(), g});
  if (it == index_.end() || it->second.empty()) return std::nullopt;
  const int page = it->second.front();
  if (groups_[g].spec.kind == GroupKind::Mamba && pages_[page].step == step_) return std::nullopt;
  return page;
}

std::size_t GroupReferenceModel::first_real(std::size_t g, std::size_t end) const {
  const GroupSpec& spec = groups_[g].spec;
  const std::size_t blocks = end / bs(g);
  switch (spec.kind) {
    case GroupKind::SlidingWindow:
    case GroupKind::SlidingWindowMla: {
      const std::size_t run = (spec.sliding_window - 1 + bs(g) - 1) / bs(g);
      return blocks > run ? blocks - run : 0;
    }
    case GroupKind::ChunkedLocalAttention:
      return end / spec.attention_chunk_size * spec.attention_chunk_size / bs(g);
    case GroupKind::Mamba:
      return blocks > 0 ? blocks - 1 : 0;
    default:
      return 0;
  }
}

bool GroupReferenceModel::valid(std::span<const SequenceHash> hashes, std::size_t g, std::size_t end) const {
  for (std::size_t b = first_real(g, end); b < end / bs(g); ++b) {
    if (!cached(hashes, g, b)) return false;
  }
  return true;
}

std::pair<std::size_t, std::size_t> GroupReferenceModel::hit(std::span<const SequenceHash> hashes,
                                                             std::size_t prompt_tokens) const {
  if (prompt_tokens == 0) return {0, 0};
  std::size_t candidate = hybrid_ ? prompt_tokens - 1 : prompt_tokens;
  candidate -= candidate % scheduler_;
  std::size_t first_group = 0;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const GroupKind kind = groups_[g].spec.kind;
    if (kind == GroupKind::FullAttention || kind == GroupKind::MlaAttention) {
      first_group = g;
      break;
    }
  }
  std::size_t common = 0;
  std::size_t first = 0;
  for (std::size_t end = candidate; end > 0; end -= scheduler_) {
    if (first == 0 && valid(hashes, first_group, end)) first = end;
    bool all = true;
    for (std::size_t g = 0; g < groups_.size() && all; ++g) all = valid(hashes, g, end);
    if (all) {
      common = end;
      break;
    }
  }
  return {common, first};
}

void GroupReferenceModel::release(int page) {
  if (--pages_[page].refs > 0) return;
  if (pages_[page].keyed) {
    lru_.push_back(page);
  } else {
    free_.push_front(page);
  }
}

void GroupReferenceModel::evict_head() {
  const int page = lru_.front();
  lru_.pop_front();
  auto& copies = index_[pages_[page].key];
  copies.erase(std::find(copies.begin(), copies.end(), page));
  if (copies.empty()) index_.erase(pages_[page].key);
  pages_[page] = Page{};
  free_.push_front(page);
}

bool GroupReferenceModel::allocate(std::uint64_t owner, std::span<const SequenceHash> hashes, std::size_t tokens,
                                   std::size_t reuse) {
  const bool running = owners_.contains(owner);
  Owner fresh_owner;
  fresh_owner.tables.resize(groups_.size());
  fresh_owner.considered.resize(groups_.size());
  fresh_owner.computed = reuse;
  Owner& o = running ? owners_[owner] : fresh_owner;
  if (running) {
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      auto& table = o.tables[g];
      const std::size_t skipped = std::min(skipped_tokens(g, o.computed) / bs(g), table.size());
      for (std::size_t b = skipped; b-- > 0;) {
        if (table[b] == kNull) break;
        release(table[b]);
        table[b] = kNull;
      }
    }
  }
  std::vector<int> hits;
  std::vector<std::size_t> positions(groups_.size());
  std::size_t fresh = 0;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    if (!running && reuse > 0) {
      for (std::size_t b = first_real(g, reuse); b < reuse / bs(g); ++b) hits.push_back(*cached(hashes, g, b));
    }
    const std::size_t held = running ? o.tables[g].size() : reuse / bs(g);
    positions[g] = std::max(held, skipped_tokens(g, o.computed) / bs(g));
    const std::size_t needed = (tokens + bs(g) - 1) / bs(g);
    fresh += needed > positions[g] ? needed - positions[g] : 0;
  }
  std::size_t evictable = 0;
  for (const int page : lru_) evictable += std::find(hits.begin(), hits.end(), page) == hits.end() ? 1 : 0;
  if (free_.size() + evictable < fresh) return false;
  for (const int page : hits) {
    if (pages_[page].refs++ == 0) lru_.remove(page);
  }
  // Evict what the free pages cannot cover, LRU head first, before taking any.
  while (free_.size() < fresh) evict_head();
  std::size_t next_hit = 0;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    auto& table = o.tables[g];
    if (!running) {
      for (std::size_t b = 0; b < reuse / bs(g); ++b)
        table.push_back(b < first_real(g, reuse) ? kNull : hits[next_hit++]);
      o.considered[g] = reuse / bs(g);
    }
    while (table.size() < positions[g]) table.push_back(kNull);
  }
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const std::size_t needed = (tokens + bs(g) - 1) / bs(g);
    while (o.tables[g].size() < needed) {
      const int page = free_.front();
      free_.pop_front();
      pages_[page] = Page{};
      pages_[page].refs = 1;
      pages_[page].group = g;
      o.tables[g].push_back(page);
    }
  }
  if (!running) owners_.emplace(owner, std::move(fresh_owner));
  return true;
}

bool GroupReferenceModel::caches(std::size_t g, std::size_t block, std::size_t computed) const {
  const GroupSpec& spec = groups_[g].spec;
  if (spec.kind == GroupKind::SlidingWindow || spec.kind == GroupKind::SlidingWindowMla) {
    const std::size_t run = (spec.sliding_window - 1 + bs(g) - 1) / bs(g);
    const std::size_t per_segment = scheduler_ / bs(g);
    return block % per_segment + run >= per_segment;
  }
  if (spec.kind == GroupKind::Mamba && spec.mamba_mode == MambaMode::Align) return (block + 1) * bs(g) == computed;
  return true;
}

void GroupReferenceModel::finalize(std::uint64_t owner, std::span<const SequenceHash> hashes, std::size_t computed) {
  Owner& o = owners_.at(owner);
  o.computed = computed;
  const std::size_t end = computed - computed % scheduler_;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    for (std::size_t b = o.considered[g]; b < end / bs(g); ++b) {
      const int page = o.tables[g][b];
      if (page == kNull || pages_[page].keyed || !caches(g, b, computed)) continue;
      pages_[page].keyed = true;
      pages_[page].key = {hashes[(b + 1) * bs(g) / unit_ - 1].value(), g};
      pages_[page].step = step_;
      index_[pages_[page].key].push_back(page);
    }
    o.considered[g] = std::max(o.considered[g], end / bs(g));
  }
}

void GroupReferenceModel::free(std::uint64_t owner) {
  Owner& o = owners_.at(owner);
  for (auto& table : o.tables) {
    for (auto page = table.rbegin(); page != table.rend(); ++page) {
      if (*page != kNull) release(*page);
    }
  }
  owners_.erase(owner);
}

std::vector<bool> GroupReferenceModel::nulls(std::uint64_t owner, std::size_t group) const {
  std::vector<bool> out;
  for (const int page : owners_.at(owner).tables[group]) out.push_back(page == kNull);
  return out;
}

std::size_t GroupReferenceModel::active(std::size_t group) const {
  std::set<int> held;
  for (const auto& [id, o] : owners_) {
    for (const int page : o.tables[group]) {
      if (page != kNull) held.insert(page);
    }
  }
  return held.size();
}

std::size_t GroupReferenceModel::inactive(std::size_t group) const {
  std::size_t n = 0;
  for (const int page : lru_) n += pages_[page].group == group ? 1 : 0;
  return n;
}

}  // namespace kvtier::g1::test
