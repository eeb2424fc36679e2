#include "g1/native/groups/group_coordinator.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::g1 {

/// One group's cached blocks of one prompt, as its rule asks for them.
class GroupCoordinator::Lookup final : public CachedBlocks {
 public:
  Lookup(const GroupCoordinator& coordinator, std::span<const SequenceHash> hashes, std::size_t group,
         bool active_only = false, const TierHolds* tier_holds = nullptr)
      : coordinator_(coordinator), hashes_(hashes), group_(group), active_only_(active_only), tier_holds_(tier_holds) {}
  bool cached(std::size_t block) const override {
    if (coordinator_.cached_page(hashes_, group_, block, active_only_).has_value()) return true;
    return tier_holds_ != nullptr && coordinator_.hash_index(group_, block) < hashes_.size() &&
           (*tier_holds_)(group_, block);
  }

 private:
  const GroupCoordinator& coordinator_;
  std::span<const SequenceHash> hashes_;
  std::size_t group_;
  bool active_only_;
  const TierHolds* tier_holds_;
};

GroupCoordinator::GroupCoordinator(ModelGeometry geometry, std::uint32_t capacity, bool enable_prefix_caching)
    : geometry_(std::move(geometry)),
      caching_(enable_prefix_caching),
      pool_(capacity),
      page_group_(capacity, 0),
      removed_(geometry_.group_count()),
      hit_pages_(geometry_.group_count(), 0),
      fresh_pages_(geometry_.group_count(), 0),
      landing_(capacity, false),
      pins_(capacity, 0) {
  KVTIER_EXPECTS(geometry_.group_count() > 0 && geometry_.group_count() <= 255,
                 "a manager holds between 1 and 255 KV cache groups");
  for (const ResolvedGroup& group : geometry_.groups()) {
    rules_.push_back(make_group_rule(group, geometry_.scheduler_block_size()));
  }
  const auto& groups = geometry_.groups();
  bool mixed = false;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    std::size_t cls = 0;
    while (!groups[cls].format().same_precision(groups[g].format())) ++cls;
    group_precision_.push_back(static_cast<std::uint8_t>(cls));
    mixed = mixed || cls != 0;
  }
  if (mixed) {
    page_precision_.assign(capacity, kZeroed);
  } else {
    group_precision_.clear();
  }
  for (std::size_t g = 0; g < rules_.size(); ++g) {
    const GroupKind kind = geometry_.groups()[g].spec.kind;
    if (kind == GroupKind::FullAttention || kind == GroupKind::MlaAttention) lookup_order_.push_back(g);
  }
  for (std::size_t g = 0; g < rules_.size(); ++g) {
    if (std::find(lookup_order_.begin(), lookup_order_.end(), g) == lookup_order_.end()) lookup_order_.push_back(g);
  }
  if (geometry_.has_null_page()) {
    if (capacity < 2) throw ConfigError("a manager with KV cache groups needs at least 2 pages (one is the null page)");
    auto held = pool_.reserve_fresh(1);
    KVTIER_ASSERT(held.has_value(), "a fresh pool has room for its null page");
    null_page_ = pool_.allocate_private(held->reservation);  // page 0: never freed, cached or counted
  }
}

std::uint64_t GroupCoordinator::cache_key(SequenceHash hash, std::size_t group) const noexcept {
  if (group == 0) return hash.value();  // a single-group manager keys as it always has
  // splitmix64 of the hash and the group: the same tokens cached independently per group.
  std::uint64_t x = hash.value() + 0x9E3779B97F4A7C15ULL * (group + 1);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

std::size_t GroupCoordinator::hash_index(std::size_t group, std::size_t block) const noexcept {
  const std::size_t per_block = rules_[group]->block_size() / geometry_.hash_block_size();
  return (block + 1) * per_block - 1;
}

std::optional<PageId> GroupCoordinator::cached_page(std::span<const SequenceHash> hashes, std::size_t group,
                                                    std::size_t block, bool active_only) const {
  const std::size_t index = hash_index(group, block);
  if (index >= hashes.size()) return std::nullopt;
  const auto hit = pool_.prefix_hit(SequenceHash(cache_key(hashes[index], group)));
  if (!hit || (active_only && !hit->is_active)) return std::nullopt;
  if (geometry_.groups()[group].spec.kind == GroupKind::Mamba) {
    // A state cached in this step is written when the step runs: not yet a hit.
    const auto step = state_step_.find(hit->page.value());
    if (step != state_step_.end() && step->second == step_) return std::nullopt;
  }
  return hit->page;
}

std::pair<std::size_t, std::size_t> GroupCoordinator::fixed_point(std::span<const SequenceHash> hashes,
                                                                  std::size_t candidate, bool active_only,
                                                                  const TierHolds* tier_holds) const {
  const std::size_t unit = geometry_.scheduler_block_size();
  std::size_t length = candidate - candidate % unit;
  std::size_t first_hit = 0;
  bool first = true;
  for (bool changed = true; changed && length > 0;) {
    changed = false;
    for (const std::size_t g : lookup_order_) {
      const std::size_t hit = rules_[g]->longest_hit(Lookup(*this, hashes, g, active_only, tier_holds), length);
      if (first) first_hit = hit;
      first = false;
      if (hit < length) {
        length = hit;
        changed = true;
      }
    }
  }
  return {length, first_hit};
}

GroupHit GroupCoordinator::find_hit(std::span<const SequenceHash> hashes, std::size_t prompt_tokens) const {
  if (!caching_ || prompt_tokens == 0) return {};
  // A single full-attention group keeps the seed's probe (candidate_of).
  const auto [tokens, first_hit] = fixed_point(hashes, candidate_of(prompt_tokens), false);
  return GroupHit{.tokens = tokens,
                  .uncached_common_prefix = first_hit - tokens,
                  .active_tokens = fixed_point(hashes, tokens, true).first};
}

std::size_t GroupCoordinator::computed_tokens(OwnerId owner) const {
  const auto it = owners_.find(owner);
  KVTIER_EXPECTS(it != owners_.end(), "owner ", owner.value(), " holds no pages");
  return it->second.computed;
}

std::span<const PageId> GroupCoordinator::table(OwnerId owner, std::size_t group) const {
  const auto it = owners_.find(owner);
  KVTIER_EXPECTS(it != owners_.end(), "owner ", owner.value(), " holds no pages");
  KVTIER_EXPECTS(group < rules_.size(), "group ", group, " is not one of the manager's ", rules_.size(), " groups");
  return it->second.tables[group].pages;
}

void GroupCoordinator::release_skipped(Owner& owner) {
  for (std::size_t g = 0; g < rules_.size(); ++g) {
    std::vector<PageId>& pages = owner.tables[g].pages;
    // Backwards from the last skipped block; the first null means the rest
    // were released by an earlier step.
    for (std::size_t b = rules_[g]->skipped_blocks(owner.computed, pages.size()); b-- > 0;) {
      if (is_null(pages[b])) break;
      pool_.release(pages[b]);
      pages[b] = *null_page_;
    }
  }
}

bool GroupCoordinator::allocate(OwnerId owner, std::span<const SequenceHash> hashes, std::size_t tokens,
                                std::size_t reuse_tokens) {
  const auto found = owners_.find(owner);
  const bool running = found != owners_.end();
  const std::size_t unit = geometry_.scheduler_block_size();
  KVTIER_EXPECTS(!running || reuse_tokens == 0, "owner ", owner.value(), " is running: it takes no prefix hit");
  KVTIER_EXPECTS(reuse_tokens <= tokens, "a reuse of ", reuse_tokens, " tokens exceeds the ", tokens, " allocated");
  KVTIER_EXPECTS(reuse_tokens == 0 || caching_, "prefix caching is off: nothing can be reused");
  KVTIER_EXPECTS(reuse_tokens % unit == 0, "a reuse of ", reuse_tokens,
                 " tokens is not a multiple of the scheduler block size ", unit);

  // Every group's hit positions, checked as cached now (the caller's probe may be stale).
  std::vector<PrefixPin> pins;
  std::vector<std::size_t> first_real(rules_.size(), 0);
  if (reuse_tokens > 0) {
    for (std::size_t g = 0; g < rules_.size(); ++g) {
      const GroupRule& rule = *rules_[g];
      KVTIER_EXPECTS(rule.longest_hit(Lookup(*this, hashes, g), reuse_tokens) == reuse_tokens, "a reuse of ",
                     reuse_tokens, " tokens is more than group ", g, " has cached");
      first_real[g] = rule.first_hit_block(reuse_tokens);
      for (std::size_t b = first_real[g]; b < reuse_tokens / rule.block_size(); ++b) {
        const SequenceHash key(cache_key(hashes[hash_index(g, b)], g));
        pins.push_back(PrefixPin{key, *cached_page(hashes, g, b)});
      }
    }
  }

  Owner fresh_owner{.tables = std::vector<Table>(rules_.size()), .computed = reuse_tokens};
  Owner& state = running ? found->second : fresh_owner;
  if (running) release_skipped(state);

  std::vector<std::size_t> positions(rules_.size());  // what each table covers before fresh pages
  std::vector<std::size_t> fresh(rules_.size());
  std::uint32_t fresh_total = 0;
  for (std::size_t g = 0; g < rules_.size(); ++g) {
    const GroupRule& rule = *rules_[g];
    const std::size_t held = running ? state.tables[g].pages.size() : reuse_tokens / rule.block_size();
    const std::size_t skipped = rule.skipped_blocks(state.computed, static_cast<std::size_t>(-1));
    positions[g] = std::max(held, skipped);
    const std::size_t needed = (tokens + rule.block_size() - 1) / rule.block_size();
    fresh[g] = needed > positions[g] ? needed - positions[g] : 0;
    fresh_total += static_cast<std::uint32_t>(fresh[g]);
  }
  auto outcome = pool_.reserve_hits(pins, fresh_total);
  if (!outcome) return false;
  note_quarantined(outcome->quarantined);
  note_removed(outcome->removed);
  if (!outcome->quarantined.empty()) return false;  // only the evictions happened: the tier copies them first

  // Hits first (all groups), then fresh pages (all groups).
  const std::vector<PrefixPin> taken = outcome->reservation.prefix;  // activation empties it
  pool_.activate_prefix(outcome->reservation);
  std::size_t next_hit = 0;
  for (std::size_t g = 0; g < rules_.size(); ++g) {
    Table& table = state.tables[g];
    if (!running) {
      const std::size_t hit_blocks = reuse_tokens / rules_[g]->block_size();
      for (std::size_t b = 0; b < hit_blocks; ++b) {
        table.pages.push_back(b < first_real[g] ? *null_page_ : taken[next_hit++].page);
      }
      hit_pages_[g] += hit_blocks - std::min(hit_blocks, first_real[g]);
      table.considered = hit_blocks;
    }
    while (table.pages.size() < positions[g]) table.pages.push_back(*null_page_);
  }
  for (std::size_t g = 0; g < rules_.size(); ++g) {
    for (std::size_t i = 0; i < fresh[g]; ++i) {
      const PageId page = pool_.allocate_private(outcome->reservation);
      page_group_[page.value()] = static_cast<std::uint8_t>(g);
      if (!page_precision_.empty()) {
        std::uint8_t& last = page_precision_[page.value()];
        if (last != kZeroed && last != group_precision_[g]) to_zero_.push_back(page);
        last = group_precision_[g];
      }
      state.tables[g].pages.push_back(page);
    }
    fresh_pages_[g] += fresh[g];
  }
  if (!running) owners_.emplace(owner, std::move(fresh_owner));
  return true;
}

std::vector<PageId> GroupCoordinator::take_pages_to_zero() { return std::exchange(to_zero_, {}); }

std::vector<std::vector<GroupCoordinator::CachedBlock>> GroupCoordinator::finalize(OwnerId owner,
                                                                                   std::span<const SequenceHash> hashes,
                                                                                   std::size_t computed) {
  const auto it = owners_.find(owner);
  KVTIER_EXPECTS(it != owners_.end(), "owner ", owner.value(), " holds no pages");
  Owner& state = it->second;
  KVTIER_EXPECTS(computed >= state.computed, "the computed length of owner ", owner.value(), " moves back from ",
                 state.computed, " to ", computed);
  for (std::size_t g = 0; g < rules_.size(); ++g) {
    KVTIER_EXPECTS(computed <= state.tables[g].pages.size() * rules_[g]->block_size(), "owner ", owner.value(),
                   " computed ", computed, " tokens past its slots");
  }
  const std::size_t cached_end = computed - computed % geometry_.scheduler_block_size();
  KVTIER_EXPECTS(!caching_ || hashes.size() >= cached_end / geometry_.hash_block_size(), "owner ", owner.value(),
                 " computed ", computed, " tokens but gave ", hashes.size(), " block hashes");
  state.computed = computed;
  std::vector<std::vector<CachedBlock>> cached(rules_.size());
  if (!caching_) return cached;
  for (std::size_t g = 0; g < rules_.size(); ++g) {
    const GroupRule& rule = *rules_[g];
    Table& table = state.tables[g];
    const std::size_t end_block = cached_end / rule.block_size();
    for (std::size_t b = table.considered; b < end_block; ++b) {
      const PageId page = table.pages[b];
      if (is_null(page) || !pool_.is_private_page(page) || !rule.caches(b, computed)) continue;
      const SequenceHash hash = hashes[hash_index(g, b)];
      const std::uint64_t key = cache_key(hash, g);
      const bool first_copy = pool_.cache_private(page, SequenceHash(key));
      cached_keys_.emplace(key, std::make_pair(hash, g));
      if (geometry_.groups()[g].spec.kind == GroupKind::Mamba) state_step_[page.value()] = step_;
      if (first_copy) cached[g].push_back(CachedBlock{b, hash, page});  // a duplicate copy is not news
    }
    table.considered = std::max(table.considered, end_block);
  }
  return cached;
}

std::vector<OwnerId> GroupCoordinator::owners() const {
  std::vector<OwnerId> out;
  out.reserve(owners_.size());
  for (const auto& entry : owners_) out.push_back(entry.first);
  return out;
}

std::vector<GroupCoordinator::CachedPage> GroupCoordinator::cached_pages() const {
  std::vector<CachedPage> out;
  for (std::uint32_t page = 0; page < pool_.capacity(); ++page) {
    const auto key = pool_.cached_hash(PageId(page));
    if (!key) continue;
    const auto& [hash, group] = cached_keys_.at(key->value());
    out.push_back(CachedPage{PageId(page), hash, group});
  }
  return out;
}

bool GroupCoordinator::is_cached(SequenceHash hash, std::size_t group) const {
  return group < rules_.size() && pool_.is_resident(SequenceHash(cache_key(hash, group)));
}

void GroupCoordinator::free(OwnerId owner) {
  const auto it = owners_.find(owner);
  KVTIER_EXPECTS(it != owners_.end(), "owner ", owner.value(), " holds no pages");
  for (Table& table : it->second.tables) {
    for (auto page = table.pages.rbegin(); page != table.pages.rend(); ++page) {
      if (!is_null(*page)) pool_.release(*page);
    }
  }
  owners_.erase(it);
}

void GroupCoordinator::note_removed(std::span<const SequenceHash> keys) {
  for (const SequenceHash key : keys) {
    const auto it = cached_keys_.find(key.value());
    KVTIER_ASSERT(it != cached_keys_.end(), "an evicted key the coordinator never cached");
    removed_[it->second.second].push_back(it->second.first);
    cached_keys_.erase(it);
  }
}

std::vector<SequenceHash> GroupCoordinator::take_removed(std::size_t group) {
  KVTIER_EXPECTS(group < removed_.size(), "group ", group, " is not one of the manager's groups");
  return std::exchange(removed_[group], {});
}

std::vector<GroupUsage> GroupCoordinator::usage() const {
  std::vector<GroupUsage> out(rules_.size());
  std::vector<bool> seen(pool_.capacity(), false);
  for (const auto& [id, owner] : owners_) {
    for (std::size_t g = 0; g < owner.tables.size(); ++g) {
      for (const PageId page : owner.tables[g].pages) {
        if (is_null(page) || seen[page.value()]) continue;
        seen[page.value()] = true;
        ++out[g].active;
      }
    }
  }
  for (const PageId page : pool_.inactive_order()) ++out[page_group_[page.value()]].inactive;
  return out;
}

void GroupCoordinator::audit() const {
  NativeBlockPool::Holders holders{.refs = std::vector<std::uint32_t>(pool_.capacity(), 0),
                                   .pins = std::vector<std::uint32_t>(pool_.capacity(), 0)};
  if (null_page_) {
    holders.refs[null_page_->value()] = 1;  // the pool sees it as one private page
    KVTIER_ASSERT(pool_.is_private_page(*null_page_), "the null page is no longer reserved");
  }
  for (const auto& [id, owner] : owners_) {
    KVTIER_ASSERT(owner.tables.size() == rules_.size(), "owner ", id.value(), " has a table count unlike the groups'");
    for (std::size_t g = 0; g < owner.tables.size(); ++g) {
      for (const PageId page : owner.tables[g].pages) {
        if (is_null(page)) continue;
        KVTIER_ASSERT(page_group_[page.value()] == g, "owner ", id.value(), " holds page ", page.value(), " of group ",
                      static_cast<int>(page_group_[page.value()]), " in group ", g, "'s table");
        ++holders.refs[page.value()];
      }
    }
  }
  for (std::uint32_t page = 0; page < pins_.size(); ++page) holders.pins[page] += pins_[page];
  std::size_t landing = 0;
  for (std::uint32_t page = 0; page < landing_.size(); ++page) {
    if (!landing_[page]) continue;
    KVTIER_ASSERT(pool_.is_private_page(PageId(page)), "landing page ", page, " is not a private page");
    ++holders.refs[page];
    ++landing;
  }
  pool_.audit(holders);
  std::size_t pages = (null_page_ ? 1 : 0) + landing + pool_.quarantined();
  for (const GroupUsage& group : usage()) pages += group.active + group.inactive;
  KVTIER_ASSERT(pages + pool_.free_capacity() == pool_.capacity(),
                "held, cached, landing, quarantined and free pages (", pages, " + ", pool_.free_capacity(),
                ") differ from the capacity ", pool_.capacity());
}

}  // namespace kvtier::g1
