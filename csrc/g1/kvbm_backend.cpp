#include "kvtier/g1/kvbm_backend.hpp"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "backend_support.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::g1 {
namespace {


/// Builds the Stored runs of one operation: a reused block ends the run, a
/// partial block is skipped without ending it.
class StoredRuns {
 public:
  /// `expected`: an upper bound of the blocks that may join runs (one allocation per run).
  StoredRuns(KvEventPublisher& publisher, std::size_t expected) : publisher_(publisher), expected_(expected) {}
  void add(std::optional<SequenceHash> parent, SequenceHash hash, std::uint64_t local,
           const std::vector<TokenId>* token_ids) {
    if (!publisher_.has_sinks()) return;  // nothing listens: build nothing
    // A Use gives token ids for all its blocks or none; a swap-in's blocks come
    // from several Uses, so a run splits where their presence changes.
    if (!run_.blocks.empty() && run_.token_ids.has_value() != (token_ids != nullptr)) gap();
    if (run_.blocks.empty()) {
      run_.parent = parent;
      run_.token_ids.reset();
      run_.blocks.reserve(expected_);
      if (token_ids) {
        run_.token_ids.emplace();
        run_.token_ids->reserve(expected_, token_ids->size());
      }
    }
    if (run_.token_ids && token_ids) run_.token_ids->append(*token_ids);
    run_.blocks.push_back({hash, LocalBlockHash(local)});
  }
  void gap() {
    if (!run_.blocks.empty()) publisher_.publish_stored(StorageTier::Device, std::exchange(run_, KvStored{}));
  }

 private:
  KvEventPublisher& publisher_;
  std::size_t expected_;
  KvStored run_;
};

}  // namespace

std::size_t KvbmBackend::index_slack(EvictionBackend eviction) noexcept {
  // Every eviction erases from both indexes, and backward-shift erase walks to
  // the end of the probe cluster: at load 1/2 clusters are a quarter as long
  // as at 3/4. Lineage's graph already spends most of its 128-byte budget
  // (docs/performance.md), so it takes 2/3 (1.3 bytes a page more per index).
  return eviction == EvictionBackend::Lineage ? 2 : 1;
}

KvbmBackend::KvbmBackend(std::uint32_t capacity, std::uint32_t block_size, EvictionBackend eviction,
                         KvEventPublisher& publisher)
    : capacity_(capacity),
      block_size_(block_size),
      publisher_(publisher),
      policy_(make_eviction_policy(eviction, capacity)),
      pages_(capacity),
      registry_(capacity, PlhOfPage{&pages_}, index_slack(eviction)),
      by_hash_(capacity, HashOfPage{&pages_}, index_slack(eviction)) {
  for (std::uint32_t page = capacity; page-- > 0;) push_free(page);
}

const KvbmBackend::OwnerTable& KvbmBackend::table(OwnerId owner) const { return detail::owner_table(tables_, owner); }

std::uint32_t KvbmBackend::registered_page(const PositionalLineageHash& plh) const { return registry_.find(plh); }

std::span<const TokenId> KvbmBackend::page_token_ids(std::uint32_t page) const {
  return {token_ids_.data() + std::size_t{page} * block_size_, block_size_};
}

std::uint32_t KvbmBackend::logical_refs(SequenceHash hash) const {
  const std::uint32_t page = by_hash_.find(hash.value());
  return page == kNone ? 0 : pages_[page].refs;
}

void KvbmBackend::return_page(std::uint32_t page) {
  KVTIER_ASSERT(pages_[page].state != PageState::Reset, "page " + std::to_string(page) + " is freed twice");
  push_free(page);
}

void KvbmBackend::push_free(std::uint32_t page) noexcept {
  pages_[page] = Page{};
  pages_[page].refs = free_head_;
  free_head_ = page;
  ++free_count_;
}

std::size_t KvbmBackend::obtainable(std::span<const std::uint32_t> resurrecting) const {
  std::vector<std::uint32_t> inactive;
  for (std::uint32_t page : resurrecting) {
    if (policy_->contains(PageId(page))) inactive.push_back(page);
  }
  std::sort(inactive.begin(), inactive.end());
  const auto distinct = static_cast<std::size_t>(std::unique(inactive.begin(), inactive.end()) - inactive.begin());
  return free_count_ + policy_->size() - distinct;
}

std::vector<std::uint32_t> KvbmBackend::take_pages(std::size_t count, std::vector<SequenceHash>& removed,
                                                   std::vector<EvictedBlock>& victims) {
  std::vector<std::uint32_t> taken;
  taken.reserve(count);
  while (taken.size() < count && free_head_ != kNone) {
    const std::uint32_t page = free_head_;
    free_head_ = pages_[page].refs;
    --free_count_;
    pages_[page] = Page{};
    pages_[page].state = PageState::Held;
    taken.push_back(page);
  }
  // The victims first, in eviction order (the policy keeps its own state),
  // then their unregistration, prefetching a few victims ahead: each one
  // erases from both indexes, and those misses then overlap.
  const std::size_t first_victim = taken.size();
  while (taken.size() < count) taken.push_back(policy_->evict().value().value());
  const auto prefetch = [&](std::size_t at) {
    if (at >= taken.size()) return;
    registry_.prefetch(pages_[taken[at]].plh);
    by_hash_.prefetch(pages_[taken[at]].hash);
  };
  for (std::size_t at = first_victim; at < std::min(taken.size(), first_victim + kPrefetchAhead); ++at) prefetch(at);
  for (std::size_t at = first_victim; at < taken.size(); ++at) {
    prefetch(at + kPrefetchAhead);
    const std::uint32_t page = taken[at];
    const Page& p = pages_[page];
    removed.emplace_back(p.hash);
    if (tier_ != nullptr) {
      TieredBlock block{.plh = p.plh,
                        .hash = SequenceHash(p.hash),
                        .parent = (p.flags & kHasParent) ? std::optional<SequenceHash>(SequenceHash(p.parent)) : std::nullopt,
                        .local = LocalBlockHash(p.local),
                        .token_ids = std::nullopt};
      if (p.flags & kHasTokenIds) block.token_ids.emplace(page_token_ids(page).begin(), page_token_ids(page).end());
      victims.push_back(EvictedBlock{PageId(page), std::move(block)});
    }
    unregister(page);
    pages_[page] = Page{};
    pages_[page].state = PageState::Held;
  }
  return taken;
}

std::optional<std::uint64_t> KvbmBackend::hand_off(std::vector<std::uint32_t>& slots,
                                                    std::vector<EvictedBlock>& victims) {
  if (victims.empty()) return std::nullopt;
  const SwapOutTicket ticket = tier_->swap_out(victims);
  if (ticket.quarantined.empty()) return std::nullopt;  // RetryNow: the victims' pages are usable now
  std::vector<std::uint32_t> taken(slots);
  std::sort(taken.begin(), taken.end());  // O(n log n): an eviction can hand thousands of pages over
  for (const PageId page : ticket.quarantined) {
    KVTIER_ASSERT(page.value() < capacity_ && pages_[page.value()].state == PageState::Held &&
                      std::binary_search(taken.begin(), taken.end(), page.value()),
                  "the offload tier quarantined page " + std::to_string(page.value()) + ", which this eviction did not take");
    pages_[page.value()].state = PageState::Quarantined;
    ++quarantined_;
  }
  for (const std::uint32_t slot : slots) {
    if (pages_[slot].state != PageState::Quarantined) return_page(slot);
  }
  slots.clear();
  return ticket.transfer;
}

G1Acquire KvbmBackend::blocked_on(std::uint64_t transfer) const {
  return G1Acquire{.kind = G1Acquire::Kind::BlockedOnOffload,
                   .count = 0,
                   .offload_id = transfer,
                   .deadline_ms = tier_->earliest_deadline_ms().value_or(0.0)};
}

void KvbmBackend::unpin_pages(std::span<const std::uint32_t> pages) {
  std::vector<PositionalLineageHash> going_inactive;
  for (auto page = pages.rbegin(); page != pages.rend(); ++page) {
    if (pages_[*page].pins == 1 && pages_[*page].refs == 0) going_inactive.push_back(pages_[*page].plh);
  }
  policy_->check_insertable(going_inactive);
  for (auto page = pages.rbegin(); page != pages.rend(); ++page) {
    Page& p = pages_[*page];
    if (--p.pins == 0 && p.refs == 0) policy_->insert(PageId(*page), p.plh);  // leaf first
  }
}

std::uint32_t KvbmBackend::register_block(std::uint32_t page, const PositionalLineageHash& plh, SequenceHash hash,
                                          std::optional<SequenceHash> parent, LocalBlockHash local,
                                          const std::vector<TokenId>* token_ids) {
  Page& p = pages_[page];
  p.plh = plh;
  const std::uint32_t canonical = registry_.insert_or_find(page);
  if (canonical != page) return canonical;
  p.state = PageState::Registered;
  p.hash = hash.value();
  p.flags = parent ? kHasParent : 0;
  p.parent = parent ? parent->value() : 0;
  p.local = local.value();
  by_hash_.insert_or_find(page);
  if (token_ids) {
    KVTIER_ASSERT(token_ids->size() == block_size_, "a block's token ids must be block_size long");
    if (token_ids_.empty()) token_ids_.resize(std::size_t{capacity_} * block_size_);  // on first use only
    std::copy(token_ids->begin(), token_ids->end(), token_ids_.begin() + static_cast<std::ptrdiff_t>(std::size_t{page} * block_size_));
    p.flags |= kHasTokenIds;
  }
  policy_->touch(plh);
  return page;
}

std::pair<std::uint32_t, bool> KvbmBackend::register_or_adopt(std::uint32_t slot, const PositionalLineageHash& plh,
                                                               SequenceHash hash, std::optional<SequenceHash> parent,
                                                               LocalBlockHash local,
                                                               const std::vector<TokenId>* token_ids) {
  const std::uint32_t page = register_block(slot, plh, hash, parent, local, token_ids);
  if (page != slot) {
    // Reject duplication: adopt the canonical block and give the slot back.
    return_page(slot);
    add_ref(page);
    return {page, false};
  }
  ++pages_[page].refs;
  ++full_refs_;
  return {page, true};
}

void KvbmBackend::unregister(std::uint32_t page) {
  registry_.erase(page);
  by_hash_.erase(page);
  pages_[page].flags &= static_cast<std::uint8_t>(~kHasTokenIds);
}

void KvbmBackend::add_ref(std::uint32_t page) {
  if (policy_->contains(PageId(page))) policy_->remove(PageId(page));
  ++pages_[page].refs;
  ++full_refs_;
}

void KvbmBackend::drop_ref(std::uint32_t page) {
  Page& p = pages_[page];
  --p.refs;
  --full_refs_;
  if (p.refs == 0 && p.pins == 0) policy_->insert(PageId(page), p.plh);
}

G1Acquire KvbmBackend::process(OwnerId owner, const MoveBlock& signal, std::size_t /*reusable_prefix_blocks*/) {
  // KVBM matches by lineage on its own; the caller's reuse hint is not needed.
  return std::visit(detail::Overloaded{
                        [&](const UseSignal& s) { return use(owner, s, nullptr); },
                        [&](const DerefSignal& s) {
                          deref(owner, s);
                          return G1Acquire::ready(s.blocks.size());
                        },
                        [&](const PromoteSignal& s) {
                          promote(owner, s);
                          return G1Acquire::ready(1);
                        },
                    },
                    signal);
}

void KvbmBackend::validate_use(const UseSignal& signal) const {
  const std::size_t full = signal.full_block_count();
  if (signal.plhs.size() != full) throw ContractError("PLHs must align with full blocks");
  if (!signal.local_hashes.empty() && signal.local_hashes.size() != full) {
    throw ContractError("local hashes must be empty or align with full blocks");
  }
  if (signal.token_ids && signal.token_ids->size() != full) throw ContractError("token ids must align with full blocks");
  if (signal.parent && signal.parent->is_partial()) throw ContractError("the parent of a Use must be a full block");
  for (std::size_t i = 0; i + 1 < signal.blocks.size(); ++i) {
    if (signal.blocks[i].is_partial()) throw ContractError("only the last block of a Use may be partial");
  }
  // A partial block has exactly one owner, once: a second holder would share
  // its page and free it under the first (issue #13).
  if (!signal.blocks.empty() && signal.blocks.back().is_partial() && partials_.contains(signal.blocks.back().uuid())) {
    throw ContractError("partial block " + signal.blocks.back().uuid().to_string() + " is already allocated");
  }
}

std::vector<KvbmBackend::Classified> KvbmBackend::classify(const UseSignal& signal) const {
  std::vector<Classified> out;
  out.reserve(signal.blocks.size());
  std::size_t full_index = 0;
  for (std::size_t ahead = 0; ahead < std::min(kPrefetchAhead, signal.plhs.size()); ++ahead) {
    registry_.prefetch(signal.plhs[ahead]);
  }
  for (const UniqueBlock& block : signal.blocks) {
    if (block.is_partial()) {
      out.push_back({Kind::Fresh, kNone});  // validate_use refused a live one
      continue;
    }
    if (full_index + kPrefetchAhead < signal.plhs.size()) registry_.prefetch(signal.plhs[full_index + kPrefetchAhead]);
    // With real hashes a block's PLH and sequence hash name the same page: one
    // lookup decides. Injected hashes may disagree; then the active sequence
    // hash wins, as in Dynamo.
    const std::uint32_t matched = registered_page(signal.plhs[full_index]);
    if (matched != kNone && pages_[matched].hash == block.hash().value()) {
      out.push_back({pages_[matched].refs > 0 ? Kind::ActiveHit : Kind::Matched, matched});
    } else if (const std::uint32_t active = by_hash_.find(block.hash().value());
               active != kNone && pages_[active].refs > 0) {
      out.push_back({Kind::ActiveHit, active});
    } else {
      out.push_back({matched != kNone ? Kind::Matched : Kind::Fresh, matched});
    }
    ++full_index;
  }
  return out;
}

G1Acquire KvbmBackend::use(OwnerId owner, const UseSignal& signal, std::vector<std::uint32_t>* decode_slots) {
  validate_use(signal);
  if (signal.blocks.empty()) return G1Acquire::ready(0);  // an owner never holds an empty table
  const std::vector<Classified> classes = classify(signal);
  std::vector<std::uint32_t> matched;
  std::size_t fresh = 0;
  for (const Classified& c : classes) {
    if (c.kind == Kind::Matched) matched.push_back(c.page);
    if (c.kind == Kind::Fresh) ++fresh;
  }
  if (decode_slots != nullptr) {
    if (fresh > decode_slots->size()) throw ContractError("reserved decode allocation must be infallible");
  } else if (fresh > obtainable(matched)) {
    return G1Acquire::capacity_exhausted();  // nothing moved
  }

  // Matches leave the inactive pool before any eviction can pick them.
  std::size_t full_index = 0;
  for (std::size_t i = 0; i < classes.size(); ++i) {
    if (signal.blocks[i].is_partial()) continue;
    if (classes[i].kind == Kind::Matched) {
      if (policy_->contains(PageId(classes[i].page))) policy_->remove(PageId(classes[i].page));
      policy_->touch(signal.plhs[full_index]);
    }
    ++full_index;
  }
  std::vector<SequenceHash> removed;
  std::vector<std::uint32_t> slots;
  if (decode_slots != nullptr) {
    slots.assign(decode_slots->end() - static_cast<std::ptrdiff_t>(fresh), decode_slots->end());
    decode_slots->resize(decode_slots->size() - fresh);
  } else {
    std::vector<EvictedBlock> victims;
    slots = take_pages(fresh, removed, victims);
    if (const auto transfer = hand_off(slots, victims)) {
      // Not committed (docs/semantics.md §5.3): the matches go back to the
      // inactive pool, leaf first; only the evictions happened.
      for (std::size_t i = classes.size(); i-- > 0;) {
        const std::uint32_t page = classes[i].page;
        if (classes[i].kind != Kind::Matched || policy_->contains(PageId(page))) continue;
        if (pages_[page].refs == 0 && pages_[page].pins == 0) policy_->insert(PageId(page), pages_[page].plh);
      }
      publisher_.publish_removed(StorageTier::Device, KvRemoved{std::move(removed)});
      return blocked_on(*transfer);
    }
  }

  OwnerTable& owned = detail::table_for(tables_, spare_tables_, owner);
  if (owned.blocks.size() + signal.blocks.size() > owned.blocks.capacity()) {
    owned.pages.reserve(owned.blocks.size() + signal.blocks.size());
    owned.blocks.reserve(owned.blocks.size() + signal.blocks.size());
  }
  StoredRuns runs(publisher_, signal.blocks.size());
  std::optional<SequenceHash> cursor;
  if (signal.parent) cursor = signal.parent->hash();
  std::size_t next_slot = 0;
  full_index = 0;
  for (std::size_t i = 0; i < signal.blocks.size(); ++i) {
    const UniqueBlock& block = signal.blocks[i];
    std::uint32_t page = classes[i].page;
    if (block.is_partial()) {
      if (classes[i].kind == Kind::Fresh) {
        page = slots[next_slot++];
        pages_[page].state = PageState::Partial;
        partials_.emplace(block.uuid(), page);
      }
      owned.pages.emplace_back(page);
      owned.blocks.push_back(block);
      continue;
    }
    const PositionalLineageHash& plh = signal.plhs[full_index];
    if (i + kPrefetchAhead < signal.blocks.size() && classes[i + kPrefetchAhead].kind == Kind::Fresh &&
        signal.blocks[i + kPrefetchAhead].is_full()) {
      // Registration probes both indexes: start those loads now.
      registry_.prefetch(signal.plhs[full_index + kPrefetchAhead]);
      by_hash_.prefetch(signal.blocks[i + kPrefetchAhead].hash().value());
    }
    const LocalBlockHash local = signal.local_hashes.empty() ? LocalBlockHash(0) : signal.local_hashes[full_index];
    const std::vector<TokenId>* ids = signal.token_ids ? &(*signal.token_ids)[full_index] : nullptr;
    ++full_index;
    if (classes[i].kind == Kind::Fresh) {
      bool registered = false;
      std::tie(page, registered) = register_or_adopt(slots[next_slot++], plh, block.hash(), cursor, local, ids);
      registered ? runs.add(cursor, block.hash(), local.value(), ids) : runs.gap();
    } else {
      ++pages_[page].refs;  // active hit or match: already out of the inactive pool
      ++full_refs_;
      runs.gap();
    }
    owned.pages.emplace_back(page);
    owned.blocks.push_back(block);
    cursor = block.hash();
  }
  runs.gap();
  publisher_.publish_removed(StorageTier::Device, KvRemoved{std::move(removed)});
  return G1Acquire::ready(signal.blocks.size());
}

void KvbmBackend::deref(OwnerId owner, const DerefSignal& signal) {
  const auto it = tables_.find(owner);
  if (it == tables_.end()) throw ContractError("unknown owner " + detail::owner_text(owner));
  OwnerTable& owned = it->second;
  const std::size_t n = owned.blocks.size();
  if (signal.blocks.size() > n) throw ContractError("Deref lists more blocks than owner " + detail::owner_text(owner) + " owns");
  std::vector<std::uint32_t> listed;  // pages, leaf first
  listed.reserve(signal.blocks.size());
  for (std::size_t i = 0; i < signal.blocks.size(); ++i) {
    if (signal.blocks[i] != owned.blocks[n - 1 - i]) {
      throw ContractError("Deref must list owner " + detail::owner_text(owner) + "'s last blocks leaf first; block " +
                          signal.blocks[i].to_string() + " is out of order");
    }
    listed.push_back(owned.pages[n - 1 - i].value());
  }
  // Each page must hold as many references as the Deref drops from it: drop
  // them tentatively (noting which pages would go inactive), then restore.
  std::vector<PositionalLineageHash> going_inactive;
  std::string refusal;
  std::size_t dropped = 0;
  for (; dropped < listed.size(); ++dropped) {
    Page& p = pages_[listed[dropped]];
    if (p.state == PageState::Partial) {
      const auto partial = partials_.find(owned.blocks[n - 1 - dropped].uuid());
      KVTIER_ASSERT(partial != partials_.end() && partial->second == listed[dropped],
                    "a table lists partial page " + std::to_string(listed[dropped]) + " that its block does not hold");
      if (p.flags & kMarked) {
        refusal = "Deref releases a partial block twice";
        break;
      }
      p.flags |= kMarked;
    } else if (p.state != PageState::Registered || p.refs == 0) {
      refusal = "Deref of page " + std::to_string(listed[dropped]) + " which holds no reference";
      break;
    } else if (--p.refs == 0 && p.pins == 0) {
      going_inactive.push_back(p.plh);
    }
  }
  for (std::size_t i = 0; i < dropped; ++i) {
    Page& p = pages_[listed[i]];
    if (p.state == PageState::Partial) {
      p.flags &= static_cast<std::uint8_t>(~kMarked);
    } else {
      ++p.refs;
    }
  }
  if (!refusal.empty()) throw ContractError(refusal);
  policy_->check_insertable(going_inactive);
  for (std::size_t i = 0; i < signal.blocks.size(); ++i) {
    const UniqueBlock block = owned.blocks.back();
    const std::uint32_t page = owned.pages.back().value();
    if (block.is_partial()) {
      partials_.erase(block.uuid());
      return_page(page);
    } else {
      drop_ref(page);
    }
    owned.pages.pop_back();
    owned.blocks.pop_back();
  }
  if (owned.blocks.empty()) detail::retire_table(tables_, spare_tables_, it);
}

void KvbmBackend::promote(OwnerId owner, const PromoteSignal& signal) {
  const auto it = tables_.find(owner);
  const auto partial = partials_.find(signal.uuid);
  if (it == tables_.end() || partial == partials_.end() || it->second.blocks.empty() ||
      !it->second.blocks.back().is_partial() || it->second.blocks.back().uuid() != signal.uuid) {
    throw ContractError("partial block not found: " + signal.uuid.to_string() + " is not owner " + detail::owner_text(owner) +
                        "'s last block");
  }
  OwnerTable& owned = it->second;
  const std::uint32_t own_page = partial->second;
  std::uint32_t existing = by_hash_.find(signal.hash.value());
  if (existing == kNone || pages_[existing].refs == 0) existing = registered_page(signal.plh);
  partials_.erase(partial);
  owned.blocks.back() = UniqueBlock::full(signal.hash);
  if (existing != kNone) {
    // Adopt the canonical block: the request's table shows its page from now on.
    return_page(own_page);
    policy_->touch(signal.plh);
    add_ref(existing);
    owned.pages.back() = PageId(existing);
    return;
  }
  const std::vector<TokenId>* ids = signal.token_ids ? &*signal.token_ids : nullptr;
  register_block(own_page, signal.plh, signal.hash, signal.parent, signal.local, ids);  // PLH unknown: checked above
  ++pages_[own_page].refs;
  ++full_refs_;
  KvStored stored{.parent = signal.parent, .blocks = {{signal.hash, signal.local}}, .token_ids = std::nullopt};
  if (ids) stored.token_ids.emplace().append(*ids);
  publisher_.publish_stored(StorageTier::Device, std::move(stored));
}

PrefillCost KvbmBackend::prefill_cost(const ActiveSequence& sequence) const {
  std::size_t overlap = 0;
  std::size_t active = 0;
  if (sequence.enable_prefix_caching()) {
    for (std::size_t i = 0; i < sequence.blocks().size(); ++i) {
      const UniqueBlock& block = sequence.blocks()[i];
      if (block.is_partial()) break;
      const std::uint32_t page = by_hash_.find(block.hash().value());
      if (page != kNone && pages_[page].refs > 0) {
        ++overlap;
        ++active;
      } else if (registered_page(sequence.plh(i)) != kNone) {
        ++overlap;
      } else {
        break;
      }
    }
  }
  const std::size_t length = sequence.num_input_tokens();
  PrefillCost cost;
  cost.new_blocks = sequence.blocks().size() - overlap;
  cost.cached_tokens = std::min(overlap * block_size_, length);
  cost.active_cached_tokens = std::min(active * block_size_, length);
  cost.new_tokens = length - cost.cached_tokens;
  return cost;
}

std::optional<std::uint64_t> KvbmBackend::reserve_decode_blocks(std::size_t blocks) {
  if (blocks > obtainable({})) return std::nullopt;
  std::vector<SequenceHash> removed;
  std::vector<EvictedBlock> victims;
  auto slots = take_pages(blocks, removed, victims);
  const auto blocked = hand_off(slots, victims);
  publisher_.publish_removed(StorageTier::Device, KvRemoved{std::move(removed)});
  if (blocked) return std::nullopt;  // not now: the evictions wait for their copies
  const std::uint64_t id = next_reservation_id_++;
  decode_reservations_.emplace(id, std::move(slots));
  return id;
}

G1Acquire KvbmBackend::process_decode(OwnerId owner, const MoveBlock& signal, std::uint64_t reservation) {
  const auto it = detail::find_reservation(decode_reservations_, reservation, "decode");
  if (const auto* use_signal = std::get_if<UseSignal>(&signal)) return use(owner, *use_signal, &it->second);
  return process(owner, signal, 0);
}

void KvbmBackend::release_decode(std::uint64_t reservation) {
  const auto it = detail::find_reservation(decode_reservations_, reservation, "decode");
  for (std::uint32_t page : it->second) return_page(page);
  decode_reservations_.erase(it);
}

std::optional<BlockManager::DestinationGrant> KvbmBackend::reserve_destination(OwnerId owner,
                                                                               const ActiveSequence& sequence,
                                                                               double /*now_ms*/) {
  if (tables_.contains(owner)) throw ContractError("destination owner " + detail::owner_text(owner) + " already owns blocks");
  if (sequence.block_size() != block_size_) throw ContractError("sequence block size differs from the manager's");
  const std::size_t prompt_blocks = (sequence.num_input_tokens() + block_size_ - 1) / block_size_;
  Destination d;
  d.owner = owner;
  d.blocks.assign(sequence.blocks().begin(), sequence.blocks().begin() + static_cast<std::ptrdiff_t>(prompt_blocks));
  for (std::size_t i = 0; i < prompt_blocks && d.blocks[i].is_full(); ++i) {
    d.plhs.push_back(sequence.plh(i));
    if (sequence.enable_prefix_caching()) d.local_hashes.push_back(sequence.local_hash(i));
  }
  if (sequence.emits_token_ids()) {
    d.token_ids.emplace();
    for (std::size_t i = 0; i < d.plhs.size(); ++i) {
      const auto first = sequence.tokens().begin() + static_cast<std::ptrdiff_t>(i * block_size_);
      d.token_ids->emplace_back(first, first + block_size_);
    }
  }
  for (std::size_t i = 0; i < d.plhs.size(); ++i) {
    std::uint32_t page = by_hash_.find(d.blocks[i].hash().value());
    if (page == kNone || pages_[page].refs == 0) page = registered_page(d.plhs[i]);
    if (page == kNone) break;
    d.prefix_pages.push_back(page);
  }
  const std::size_t fresh = prompt_blocks - d.prefix_pages.size();
  if (fresh > obtainable(d.prefix_pages)) return std::nullopt;
  for (std::uint32_t page : d.prefix_pages) {
    if (pages_[page].pins == 0xFFFF) throw ContractError("too many reservations pin page " + std::to_string(page));
  }
  for (std::size_t i = 0; i < d.prefix_pages.size(); ++i) {
    const std::uint32_t page = d.prefix_pages[i];
    if (policy_->contains(PageId(page))) policy_->remove(PageId(page));
    policy_->touch(d.plhs[i]);
    ++pages_[page].pins;
  }
  std::vector<SequenceHash> removed;
  std::vector<EvictedBlock> victims;
  d.slots = take_pages(fresh, removed, victims);
  const auto blocked = hand_off(d.slots, victims);
  publisher_.publish_removed(StorageTier::Device, KvRemoved{std::move(removed)});
  if (blocked) {
    unpin_pages(d.prefix_pages);
    return std::nullopt;
  }
  const std::uint64_t id = next_reservation_id_++;
  const std::size_t transferable = fresh * block_size_;
  destinations_.emplace(id, std::move(d));
  return DestinationGrant{id, transferable};
}

void KvbmBackend::activate_destination(std::uint64_t reservation) {
  const auto it = detail::find_reservation(destinations_, reservation, "destination");
  Destination& d = it->second;
  if (tables_.contains(d.owner)) throw ContractError("destination owner " + detail::owner_text(d.owner) + " already owns blocks");
  if (!d.blocks.empty() && d.blocks.back().is_partial() && partials_.contains(d.blocks.back().uuid())) {
    throw ContractError("partial block " + d.blocks.back().uuid().to_string() + " is already allocated");
  }
  OwnerTable& owned = detail::table_for(tables_, spare_tables_, d.owner);
  StoredRuns runs(publisher_, d.blocks.size());
  std::size_t next_slot = 0;
  for (std::size_t i = 0; i < d.blocks.size(); ++i) {
    const UniqueBlock& block = d.blocks[i];
    std::uint32_t page;
    if (i < d.prefix_pages.size()) {
      page = d.prefix_pages[i];
      --pages_[page].pins;
      ++pages_[page].refs;
      ++full_refs_;
      runs.gap();
    } else if (block.is_partial()) {
      page = d.slots[next_slot++];
      pages_[page].state = PageState::Partial;
      partials_.emplace(block.uuid(), page);
    } else {
      const std::uint32_t slot = d.slots[next_slot++];
      const std::optional<SequenceHash> parent =
          i == 0 ? std::nullopt : std::optional<SequenceHash>(d.blocks[i - 1].hash());
      const LocalBlockHash local = d.local_hashes.empty() ? LocalBlockHash(0) : d.local_hashes[i];
      const std::vector<TokenId>* ids = d.token_ids ? &(*d.token_ids)[i] : nullptr;
      bool registered = false;
      std::tie(page, registered) = register_or_adopt(slot, d.plhs[i], block.hash(), parent, local, ids);
      registered ? runs.add(parent, block.hash(), local.value(), ids) : runs.gap();
    }
    owned.pages.emplace_back(page);
    owned.blocks.push_back(block);
  }
  runs.gap();
  destinations_.erase(it);
}

void KvbmBackend::cancel_destination(std::uint64_t reservation) {
  const auto it = detail::find_reservation(destinations_, reservation, "destination");
  Destination& d = it->second;
  unpin_pages(d.prefix_pages);
  for (std::uint32_t slot : d.slots) return_page(slot);
  destinations_.erase(it);
}

G1Metrics KvbmBackend::metrics() const {
  const std::size_t available = free_count_ + policy_->size();
  return G1Metrics{.active_blocks = capacity_ - available,
                   .active_block_refs = partials_.size() + full_refs_,
                   .inactive_blocks = policy_->size(),
                   .capacity = capacity_};
}

std::span<const PageId> KvbmBackend::block_table(OwnerId owner) const { return table(owner).pages; }

std::span<const UniqueBlock> KvbmBackend::owned_blocks(OwnerId owner) const { return table(owner).blocks; }

std::vector<OwnerId> KvbmBackend::owners() const { return detail::sorted_owners(tables_); }

std::size_t KvbmBackend::metadata_bytes() const {
  std::size_t bytes = pages_.capacity() * sizeof(Page) + registry_.memory_bytes() + by_hash_.memory_bytes() +
                      policy_->metadata_bytes();
  const auto table_bytes = [](const OwnerTable& owned) {
    return sizeof(OwnerId) + sizeof(OwnerTable) + owned.pages.capacity() * sizeof(PageId) +
           owned.blocks.capacity() * sizeof(UniqueBlock);
  };
  for (const auto& [owner, owned] : tables_) bytes += table_bytes(owned);
  for (const auto& spare : spare_tables_) bytes += table_bytes(spare.mapped());  // kept for reuse: still held
  return bytes;
}

void KvbmBackend::attach_offload(OffloadTier* tier) {
  if (tier_ != nullptr) throw ContractError("an offload tier is attached already");
  tier_ = tier;
}

void KvbmBackend::release_quarantined(std::span<const PageId> pages) {
  for (const PageId page : pages) {
    KVTIER_ASSERT(page.value() < capacity_ && pages_[page.value()].state == PageState::Quarantined,
                  "page " + std::to_string(page.value()) + " is released from quarantine but is not quarantined");
  }
  for (const PageId page : pages) {
    return_page(page.value());
    --quarantined_;
  }
}

std::optional<std::uint64_t> KvbmBackend::pin_prefix(std::span<const PositionalLineageHash> plhs) {
  std::vector<std::uint32_t> pages;
  pages.reserve(plhs.size());
  for (const PositionalLineageHash& plh : plhs) {
    const std::uint32_t page = registered_page(plh);
    if (page == kNone) return std::nullopt;  // all or nothing: the prefix stops here
    if (pages_[page].pins == 0xFFFF) throw ContractError("too many reservations pin page " + std::to_string(page));
    pages.push_back(page);
  }
  for (const std::uint32_t page : pages) {
    if (policy_->contains(PageId(page))) policy_->remove(PageId(page));
    policy_->touch(pages_[page].plh);
    ++pages_[page].pins;
  }
  const std::uint64_t id = next_reservation_id_++;
  prefix_pins_.emplace(id, std::move(pages));
  return id;
}

void KvbmBackend::release_pins(std::uint64_t pins) {
  const auto it = detail::find_reservation(prefix_pins_, pins, "prefix pin");
  unpin_pages(it->second);
  prefix_pins_.erase(it);
}

BlockManager::SlotGrant KvbmBackend::reserve_slots(std::size_t count) {
  if (count > obtainable({})) return SlotGrant{G1Acquire::capacity_exhausted(), 0};
  std::vector<SequenceHash> removed;
  std::vector<EvictedBlock> victims;
  auto slots = take_pages(count, removed, victims);
  const auto blocked = hand_off(slots, victims);
  publisher_.publish_removed(StorageTier::Device, KvRemoved{std::move(removed)});
  if (blocked) return SlotGrant{blocked_on(*blocked), 0};
  const std::uint64_t id = next_reservation_id_++;
  swap_in_slots_.emplace(id, std::vector<PageId>(slots.begin(), slots.end()));
  return SlotGrant{G1Acquire::ready(count), id};
}

std::span<const PageId> KvbmBackend::reserved_slots(std::uint64_t slots) const {
  const auto it = swap_in_slots_.find(slots);
  if (it == swap_in_slots_.end()) throw ContractError("unknown slot reservation " + std::to_string(slots));
  return it->second;
}

void KvbmBackend::release_slots(std::uint64_t slots) {
  const auto it = detail::find_reservation(swap_in_slots_, slots, "slot");
  for (const PageId page : it->second) return_page(page.value());
  swap_in_slots_.erase(it);
}

std::size_t KvbmBackend::register_swapped_in(std::uint64_t slots, std::span<const TieredBlock> blocks) {
  const auto it = detail::find_reservation(swap_in_slots_, slots, "slot");
  const std::vector<PageId>& reserved = it->second;
  if (blocks.size() > reserved.size()) throw ContractError("more swapped-in blocks than reserved slots");
  // Which blocks become new inactive blocks, checked before anything changes.
  std::vector<bool> fresh(blocks.size(), false);
  std::vector<PositionalLineageHash> inserting;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const std::uint32_t active = by_hash_.find(blocks[i].hash.value());
    fresh[i] = registered_page(blocks[i].plh) == kNone && (active == kNone || pages_[active].refs == 0) &&
               std::find_if(blocks.begin(), blocks.begin() + static_cast<std::ptrdiff_t>(i),
                            [&](const TieredBlock& b) { return b.plh == blocks[i].plh; }) ==
                   blocks.begin() + static_cast<std::ptrdiff_t>(i);
    if (fresh[i]) inserting.push_back(blocks[i].plh);
  }
  std::reverse(inserting.begin(), inserting.end());
  policy_->check_insertable(inserting);
  StoredRuns runs(publisher_, blocks.size());
  std::vector<std::uint32_t> registered;
  for (std::size_t i = 0; i < reserved.size(); ++i) {
    const std::uint32_t slot = reserved[i].value();
    if (i >= blocks.size() || !fresh[i]) {
      return_page(slot);
      runs.gap();  // a block G1 holds already ends the run and parents the next (§5.5)
      continue;
    }
    const TieredBlock& b = blocks[i];
    const std::vector<TokenId>* ids = b.token_ids ? &*b.token_ids : nullptr;
    register_block(slot, b.plh, b.hash, b.parent, b.local, ids);
    runs.add(b.parent, b.hash, b.local.value(), ids);
    registered.push_back(slot);
  }
  runs.gap();
  for (auto page = registered.rbegin(); page != registered.rend(); ++page) {
    policy_->insert(PageId(*page), pages_[*page].plh);  // inactive, leaf first
  }
  swap_in_slots_.erase(it);
  return registered.size();
}

std::vector<std::pair<PageId, SequenceHash>> KvbmBackend::registered_blocks() const {
  std::vector<std::pair<PageId, SequenceHash>> out;
  for (std::uint32_t page = 0; page < capacity_; ++page) {
    if (pages_[page].state == PageState::Registered) out.emplace_back(PageId(page), SequenceHash(pages_[page].hash));
  }
  return out;
}

void KvbmBackend::audit() const {
  std::vector<std::uint32_t> uses(capacity_, 0);
  std::size_t entries = 0;
  for (const auto& [owner, owned] : tables_) {
    const std::string who = "owner " + detail::owner_text(owner);
    KVTIER_ASSERT(!owned.blocks.empty(), who + " keeps an empty table");
    KVTIER_ASSERT(owned.pages.size() == owned.blocks.size(), who + "'s table columns differ in length");
    for (std::size_t i = 0; i < owned.blocks.size(); ++i) {
      const std::uint32_t page = owned.pages[i].value();
      KVTIER_ASSERT(page < capacity_, who + " lists a page outside the pool");
      ++uses[page];
      ++entries;
      const std::string at = who + ", page " + std::to_string(page) + ": ";
      if (owned.blocks[i].is_partial()) {
        const auto partial = partials_.find(owned.blocks[i].uuid());
        KVTIER_ASSERT(pages_[page].state == PageState::Partial, at + "a partial block on a page that is not partial");
        KVTIER_ASSERT(partial != partials_.end() && partial->second == page, at + "a partial block its record does not hold");
      } else {
        KVTIER_ASSERT(pages_[page].state == PageState::Registered, at + "a full block on a page that is not registered");
      }
    }
  }
  std::vector<bool> on_free_list(capacity_, false);
  std::uint32_t free_pages = 0;
  for (std::uint32_t page = free_head_; page != kNone; page = pages_[page].refs) {
    KVTIER_ASSERT(page < capacity_ && !on_free_list[page] && pages_[page].state == PageState::Reset,
                  "the free list is corrupt at page " + std::to_string(page));
    on_free_list[page] = true;
    ++free_pages;
  }
  KVTIER_ASSERT(free_pages == free_count_, "the free list length differs from its count");
  std::size_t held = 0;
  for (const auto& entry : decode_reservations_) held += entry.second.size();
  for (const auto& entry : destinations_) held += entry.second.slots.size();
  for (const auto& entry : swap_in_slots_) held += entry.second.size();
  std::vector<std::uint32_t> pins(capacity_, 0);
  for (const auto& entry : destinations_) {
    for (std::uint32_t page : entry.second.prefix_pages) ++pins[page];
  }
  for (const auto& entry : prefix_pins_) {
    for (std::uint32_t page : entry.second) ++pins[page];
  }
  std::size_t quarantined_pages = 0;
  std::size_t partial_pages = 0;
  std::size_t held_pages = 0;
  std::size_t refs = 0;
  std::size_t inactive = 0;
  for (std::uint32_t page = 0; page < capacity_; ++page) {
    const Page& p = pages_[page];
    const std::string at = "page " + std::to_string(page) + ": ";
    switch (p.state) {
      case PageState::Reset:
        KVTIER_ASSERT(on_free_list[page], at + "a reset page is missing from the free list");
        KVTIER_ASSERT(uses[page] == 0, at + "a table holds a free page");
        break;
      case PageState::Held:
        ++held_pages;
        KVTIER_ASSERT(uses[page] == 0, at + "a table holds a reserved slot");
        break;
      case PageState::Quarantined:
        ++quarantined_pages;
        KVTIER_ASSERT(uses[page] == 0, at + "a table holds a quarantined page");
        break;
      case PageState::Partial:
        ++partial_pages;
        KVTIER_ASSERT(uses[page] == 1, at + "a partial page has other than one table entry");
        break;
      case PageState::Registered:
        refs += p.refs;
        KVTIER_ASSERT(p.refs == uses[page], at + "references differ from table entries");
        KVTIER_ASSERT(p.pins == pins[page], at + "pins differ from the destination reservations and prefix pins");
        KVTIER_ASSERT(registry_.find(p.plh) == page, at + "a registered page is missing from the registry");
        KVTIER_ASSERT(policy_->contains(PageId(page)) == (p.refs == 0 && p.pins == 0),
                      at + "a registered page is in the inactive pool iff unheld");
        if (p.refs == 0 && p.pins == 0) ++inactive;
        break;
    }
  }
  KVTIER_ASSERT(held_pages == held, "reserved slots differ from the reservations");
  KVTIER_ASSERT(quarantined_pages == quarantined_, "quarantined pages differ from their count");
  KVTIER_ASSERT(partial_pages == partials_.size(), "partial pages differ from the partial records");
  KVTIER_ASSERT(refs == full_refs_, "full references differ from the registered pages' counts");
  KVTIER_ASSERT(entries == partials_.size() + full_refs_, "active references differ from the table entries");
  KVTIER_ASSERT(inactive == policy_->size(), "the inactive pool's size differs from the unheld registered pages");
}

}  // namespace kvtier::g1
