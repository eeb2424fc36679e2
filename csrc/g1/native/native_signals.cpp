// Native signals: a Use on pool reservations (fresh blocks stay private),
// Deref, Promote, and finalize_computed_prefix, which makes computed blocks
// visible (vLLM's computed-only visibility).
#include <algorithm>
#include <string>
#include <utility>

#include "g1/common/contract_checks.hpp"
#include "g1/common/stored_runs.hpp"
#include "g1/native/native_backend.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::g1 {

NativeBackend::NativeBackend(std::uint32_t capacity, std::uint32_t block_size, bool enable_prefix_caching,
                             KvEventPublisher& publisher, std::optional<EvictionBackend> order)
    : TabledBackend(block_size, publisher), caching_(enable_prefix_caching), pool_(capacity, order) {}

void NativeBackend::validate_use(OwnerId owner, const UseSignal& signal, std::size_t reusable) const {
  // Its shape was checked by the facade (G1Manager::validate_use), the only caller.
  if (!signal.blocks.empty()) {
    const UniqueBlock& last = signal.blocks.back();
    detail::check_partial_unallocated(last, last.is_partial() && live_partials_.contains(last.uuid()));
  }
  if (reusable == 0) return;
  KVTIER_EXPECTS(caching_, "prefix reuse requires prefix caching");
  KVTIER_EXPECTS(!tables_.contains(owner), "only a request's first allocation may reuse a prefix");
  KVTIER_EXPECTS(reusable <= signal.blocks.size(), "reusable prefix exceeds the newly allocated block range");
  for (std::size_t i = 0; i < reusable; ++i) {
    KVTIER_EXPECTS(!signal.blocks[i].is_partial(), "a reused prefix block must be full");
  }
}

void NativeBackend::computed_prefix(std::span<const UniqueBlock> blocks, ComputedPrefix& into) const {
  pool_.resident_run(blocks, into.pages);
  into.blocks = into.pages.size();
  into.generation = pool_.generation();
}

G1Acquire NativeBackend::use(OwnerId owner, const UseSignal& signal, std::size_t reusable, NativeReservation* decode,
                             const ComputedPrefix* computed) {
  validate_use(owner, signal, reusable);
  if (signal.blocks.empty()) return G1Acquire::ready(0);  // an owner never holds an empty table
  const auto fresh = static_cast<std::uint32_t>(signal.blocks.size() - reusable);
  if (decode != nullptr) {
    KVTIER_EXPECTS(reusable == 0, "a decode allocation cannot reuse a prefix");
    KVTIER_EXPECTS(fresh <= decode->fresh, "reserved decode allocation must be infallible");
    commit_use(owner, signal, *decode);
    return G1Acquire::ready(signal.blocks.size());
  }
  std::vector<SequenceHash>& prefix = prefix_;  // reused: no allocation a request
  prefix.clear();
  for (std::size_t i = 0; i < reusable; ++i) prefix.push_back(signal.blocks[i].hash());
  G1Acquire blocked;
  auto outcome = reserve_with_offload(PrefixRule::Exact, prefix, static_cast<std::uint32_t>(signal.blocks.size()),
                                      blocked, computed);
  if (!outcome) return blocked.kind == G1Acquire::Kind::BlockedOnOffload ? blocked : G1Acquire::capacity_exhausted();
  commit_use(owner, signal, outcome->reservation);
  return G1Acquire::ready(signal.blocks.size());
}

void NativeBackend::activate_prefix(detail::NativeOwnerTable& owned, NativeReservation& reservation) {
  for (const PrefixPin& pin : reservation.prefix) {
    owned.pages.push_back(pin.page);
    owned.blocks.push_back(UniqueBlock::full(pin.hash));
    owned.meta.push_back(detail::NativeBlockMeta{});
  }
  pool_.activate_prefix(reservation);
}

void NativeBackend::commit_use(OwnerId owner, const UseSignal& signal, NativeReservation& reservation) {
  detail::NativeOwnerTable& owned = tables_.for_owner(owner);
  const std::size_t reused = reservation.prefix.size();
  const std::size_t grown = owned.blocks.size() + signal.blocks.size();
  if (grown > owned.blocks.capacity()) {
    owned.pages.reserve(grown);
    owned.blocks.reserve(grown);
    owned.meta.reserve(grown);
  }
  activate_prefix(owned, reservation);
  std::optional<SequenceHash> cursor;
  if (signal.parent) cursor = signal.parent->hash();
  std::size_t full_index = 0;
  for (std::size_t i = 0; i < signal.blocks.size(); ++i) {
    const UniqueBlock& block = signal.blocks[i];
    if (i < reused) {
      cursor = block.hash();
      ++full_index;
      continue;
    }
    const PageId page = pool_.allocate_private(reservation);
    detail::NativeBlockMeta meta;
    if (block.is_full()) {
      meta.pending_store = caching_;
      meta.has_store_parent = cursor.has_value();
      meta.store_parent = cursor ? cursor->value() : 0;
      meta.has_local = !signal.local_hashes.empty();
      meta.local = meta.has_local ? signal.local_hashes[full_index].value() : 0;
      if (signal.token_ids && caching_) {
        owned.append_token_ids(owned.blocks.size(), (*signal.token_ids)[full_index]);
        meta.has_token_ids = true;
      }
      cursor = block.hash();
      ++full_index;
    } else {
      live_partials_.insert(block.uuid());
    }
    owned.pages.push_back(page);
    owned.blocks.push_back(block);
    owned.meta.push_back(meta);
  }
}

void NativeBackend::process_deref(OwnerId owner, const DerefSignal& signal) {
  const auto it = tables_.find_known(owner);
  detail::NativeOwnerTable& owned = it->second;
  detail::check_deref_lists_tail(owner, owned.blocks, signal);
  for (std::size_t i = 0; i < signal.blocks.size(); ++i) {
    const std::size_t position = owned.blocks.size() - 1;
    pool_.release(owned.pages.back());
    if (owned.blocks.back().is_partial()) live_partials_.erase(owned.blocks.back().uuid());
    if (owned.token_ids.size() > position * block_size_) owned.token_ids.resize(position * block_size_);
    owned.pages.pop_back();
    owned.blocks.pop_back();
    owned.meta.pop_back();
  }
  if (owned.blocks.empty()) tables_.retire(it);
}

void NativeBackend::promote(OwnerId owner, const PromoteSignal& signal) {
  detail::NativeOwnerTable* table = tables_.find(owner);
  detail::check_promote_target(
      owner, table ? std::span<const UniqueBlock>(table->blocks) : std::span<const UniqueBlock>{}, signal, true);
  detail::NativeOwnerTable& owned = *table;
  owned.blocks.back() = UniqueBlock::full(signal.hash);
  live_partials_.erase(signal.uuid);
  if (!caching_) return;
  const bool first_copy = pool_.cache_private(owned.pages.back(), signal.hash);
  pool_.set_lineage(owned.pages.back(), signal.plh);
  if (tier_ != nullptr) {
    remember_for_tier(owned.pages.back(), TieredBlock{.plh = native_tier_key(signal.hash),
                                                      .hash = signal.hash,
                                                      .parent = signal.parent,
                                                      .local = signal.local,
                                                      .token_ids = signal.token_ids});
  }
  if (!first_copy) return;
  detail::StoredRuns runs(publisher_, 1);
  runs.add(signal.parent, {signal.hash, signal.local}, true, detail::token_ids_of(signal.token_ids));
  runs.gap();
}

void NativeBackend::finalize_computed_prefix(OwnerId owner, std::size_t before, std::size_t after) {
  KVTIER_EXPECTS(before <= after, "finalize: computed_before exceeds computed_after");
  if (!caching_) return;
  detail::NativeOwnerTable& owned = tables_.find_known(owner)->second;
  const std::size_t first = before / block_size_;
  const std::size_t last = std::min(after / block_size_, owned.blocks.size());
  detail::StoredRuns runs(publisher_, last > first ? last - first : 0);
  for (std::size_t position = first; position < last; ++position) {
    if (position + NativeBlockPool::kPrefetchAhead < last &&
        owned.blocks[position + NativeBlockPool::kPrefetchAhead].is_full()) {
      pool_.prefetch(owned.blocks[position + NativeBlockPool::kPrefetchAhead].hash());
    }
    if (owned.blocks[position].is_partial()) break;  // the tail is promoted, not finalized
    detail::NativeBlockMeta& meta = owned.meta[position];
    if (!meta.pending_store) {
      runs.gap();
      continue;
    }
    meta.pending_store = false;
    const SequenceHash hash = owned.blocks[position].hash();
    const bool first_copy = pool_.cache_private(owned.pages[position], hash);
    if (pool_.ordered() && position <= PositionalLineageHash::kMaxPosition) {
      pool_.set_lineage(owned.pages[position], PositionalLineageHash(hash, meta.parent(), position));
    }
    const std::span<const TokenId> ids = owned.token_ids_at(position, block_size_);
    if (tier_ != nullptr) {
      remember_for_tier(owned.pages[position],
                        TieredBlock{.plh = native_tier_key(hash),
                                    .hash = hash,
                                    .parent = meta.parent(),
                                    .local = LocalBlockHash(meta.local),
                                    .token_ids = meta.has_token_ids ? std::optional<std::vector<TokenId>>(
                                                                          std::in_place, ids.begin(), ids.end())
                                                                    : std::nullopt});
    }
    if (!first_copy) {
      runs.gap();  // a duplicate copy: the hash was visible already
      continue;
    }
    runs.add(meta.parent(), {hash, LocalBlockHash(meta.local)}, meta.has_local, ids);
  }
  runs.gap();
}

void NativeBackend::publish_removed(std::vector<SequenceHash> removed) {
  if (!caching_) return;
  publisher_.publish_removed(StorageTier::Device, KvRemoved{std::move(removed)});
}

}  // namespace kvtier::g1
