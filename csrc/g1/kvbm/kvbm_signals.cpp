// KVBM's signals: a Use classified against the registry (active hit, match,
// fresh) and committed all or nothing, a Deref, a Promote.
#include <algorithm>
#include <string>
#include <tuple>

#include "g1/common/contract_checks.hpp"
#include "g1/common/stored_runs.hpp"
#include "g1/kvbm/kvbm_backend.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::g1 {
void KvbmBackend::validate_use(const UseSignal& signal) const {
  // Its shape was checked by the facade (G1Manager::validate_use), the only caller.
  if (!signal.blocks.empty()) {
    const UniqueBlock& last = signal.blocks.back();
    detail::check_partial_unallocated(last, last.is_partial() && partials_.contains(last.uuid()));
  }
}

void KvbmBackend::computed_prefix(std::span<const UniqueBlock> blocks, ComputedPrefix& into) const {
  into.pages.clear();  // KVBM matches by lineage at the Use: the run's length is what a scheduler reads
  into.generation = 0;
  const auto prefetch = [&](std::size_t at) {
    if (at < blocks.size() && blocks[at].is_full()) index_.prefetch(filed_under(blocks[at].hash().value()));
  };
  for (std::size_t at = 0; at < kPrefetchAhead; ++at) prefetch(at);
  std::size_t n = 0;
  for (; n < blocks.size() && blocks[n].is_full(); ++n) {
    prefetch(n + kPrefetchAhead);
    if (page_of_hash(blocks[n].hash().value()) == kNoPage) break;
  }
  into.blocks = n;
}

std::vector<KvbmBackend::Classified> KvbmBackend::classify(const UseSignal& signal) const {
  std::vector<Classified> out;
  out.reserve(signal.blocks.size());
  std::size_t full_index = 0;
  // The index slots a few blocks ahead (a PLH and its block's hash are filed
  // together unless injected hashes disagree).
  const auto prefetch = [&](std::size_t at) {
    if (at < signal.plhs.size()) index_.prefetch(filed_under(signal.plhs[at]));
  };
  for (std::size_t ahead = 0; ahead < kPrefetchAhead; ++ahead) prefetch(ahead);
  for (const UniqueBlock& block : signal.blocks) {
    if (block.is_partial()) {
      out.push_back({Kind::Fresh, kNoPage});  // validate_use refused a live one
      continue;
    }
    prefetch(full_index + kPrefetchAhead);
    // With real hashes a block's PLH and sequence hash name the same page: one
    // lookup decides. Injected hashes may disagree; then the active sequence
    // hash wins, as in Dynamo.
    const std::uint32_t matched = registered_page(signal.plhs[full_index]);
    if (matched != kNoPage && pages_[matched].hash == block.hash().value()) {
      out.push_back({pages_[matched].refs > 0 ? Kind::ActiveHit : Kind::Matched, matched});
    } else if (const std::uint32_t active = page_of_hash(block.hash().value());
               active != kNoPage && pages_[active].refs > 0) {
      out.push_back({Kind::ActiveHit, active});
    } else {
      out.push_back({matched != kNoPage ? Kind::Matched : Kind::Fresh, matched});
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
    KVTIER_EXPECTS(fresh <= decode_slots->size(), "reserved decode allocation must be infallible");
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
  removed.reserve(fresh);  // at most one a fresh block: one allocation, not one per doubling
  std::vector<std::uint32_t> slots;
  if (decode_slots != nullptr) {
    slots.assign(decode_slots->end() - static_cast<std::ptrdiff_t>(fresh), decode_slots->end());
    decode_slots->resize(decode_slots->size() - fresh);
  } else {
    G1Acquire blocked;
    auto taken = take_slots(fresh, removed, blocked);
    if (!taken) {
      // Not committed (docs/semantics.md §5.3): the matches go back to the
      // inactive pool, leaf first; only the evictions happened.
      for (std::size_t i = classes.size(); i-- > 0;) {
        const std::uint32_t page = classes[i].page;
        if (classes[i].kind != Kind::Matched || policy_->contains(PageId(page))) continue;
        if (pages_[page].refs == 0 && pages_[page].pins == 0) policy_->insert(PageId(page), pages_[page].plh);
      }
      publish_removed(std::move(removed));
      return blocked;
    }
    slots = std::move(*taken);
  }

  detail::KvbmOwnerTable& owned = tables_.for_owner(owner);
  if (owned.blocks.size() + signal.blocks.size() > owned.blocks.capacity()) {
    owned.pages.reserve(owned.blocks.size() + signal.blocks.size());
    owned.blocks.reserve(owned.blocks.size() + signal.blocks.size());
  }
  detail::StoredRuns runs(publisher_, signal.blocks.size());
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
      // Registration probes the index: start that load now.
      index_.prefetch(filed_under(signal.plhs[full_index + kPrefetchAhead]));
    }
    const LocalBlockHash local = signal.local_hashes.empty() ? LocalBlockHash(0) : signal.local_hashes[full_index];
    const std::vector<TokenId>* ids = signal.token_ids ? &(*signal.token_ids)[full_index] : nullptr;
    ++full_index;
    if (classes[i].kind == Kind::Fresh) {
      bool registered = false;
      std::tie(page, registered) = register_or_adopt(slots[next_slot++], plh, block.hash(), cursor, local, ids);
      registered ? runs.add(cursor, {block.hash(), local}, true, detail::token_ids_of(ids)) : runs.gap();
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
  publish_removed(std::move(removed));  // after the Stored runs (§2.5)
  return G1Acquire::ready(signal.blocks.size());
}

void KvbmBackend::process_deref(OwnerId owner, const DerefSignal& signal) {
  const auto it = tables_.find_known(owner);
  detail::KvbmOwnerTable& owned = it->second;
  detail::check_deref_lists_tail(owner, owned.blocks, signal);
  const std::size_t n = owned.blocks.size();
  std::vector<std::uint32_t> listed;  // pages, leaf first
  listed.reserve(signal.blocks.size());
  for (std::size_t i = 0; i < signal.blocks.size(); ++i) listed.push_back(owned.pages[n - 1 - i].value());
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
  KVTIER_EXPECTS(refusal.empty(), refusal);
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
  if (owned.blocks.empty()) tables_.retire(it);
}

void KvbmBackend::promote(OwnerId owner, const PromoteSignal& signal) {
  detail::KvbmOwnerTable* table = tables_.find(owner);
  const auto partial = partials_.find(signal.uuid);
  detail::check_promote_target(owner,
                               table ? std::span<const UniqueBlock>(table->blocks) : std::span<const UniqueBlock>{},
                               signal, partial != partials_.end());
  detail::KvbmOwnerTable& owned = *table;
  const std::uint32_t own_page = partial->second;
  std::uint32_t existing = page_of_hash(signal.hash.value());
  if (existing == kNoPage || pages_[existing].refs == 0) existing = registered_page(signal.plh);
  partials_.erase(partial);
  owned.blocks.back() = UniqueBlock::full(signal.hash);
  if (existing != kNoPage) {
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
  detail::StoredRuns runs(publisher_, 1);
  runs.add(signal.parent, {signal.hash, signal.local}, true, detail::token_ids_of(ids));
  runs.gap();
}

}  // namespace kvtier::g1
