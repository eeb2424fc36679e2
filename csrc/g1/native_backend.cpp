#include "kvtier/g1/native_backend.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "backend_support.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::g1 {

NativeBackend::NativeBackend(std::uint32_t capacity, std::uint32_t block_size, bool enable_prefix_caching,
                             KvEventPublisher& publisher)
    : block_size_(block_size), caching_(enable_prefix_caching), publisher_(publisher), pool_(capacity) {}

G1Acquire NativeBackend::process(OwnerId owner, const MoveBlock& signal, std::size_t reusable_prefix_blocks) {
  return std::visit(detail::Overloaded{
                        [&](const UseSignal& s) { return use(owner, s, reusable_prefix_blocks, nullptr); },
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

const NativeBackend::OwnerTable& NativeBackend::table(OwnerId owner) const { return detail::owner_table(tables_, owner); }

void NativeBackend::validate_use(OwnerId owner, const UseSignal& signal, std::size_t reusable) const {
  const std::size_t full = signal.full_block_count();
  if (!signal.local_hashes.empty() && signal.local_hashes.size() != full) {
    throw ContractError("local hashes must be empty or align with full blocks");
  }
  if (signal.token_ids && signal.token_ids->size() != full) throw ContractError("token ids must align with full blocks");
  if (signal.parent && signal.parent->is_partial()) throw ContractError("the parent of a Use must be a full block");
  for (std::size_t i = 0; i < signal.blocks.size(); ++i) {
    const UniqueBlock& block = signal.blocks[i];
    if (block.is_full()) continue;
    if (i + 1 != signal.blocks.size()) throw ContractError("only the last block of a Use may be partial");
    if (live_partials_.contains(block.uuid())) {
      throw ContractError("partial block " + block.uuid().to_string() + " is already allocated");
    }
  }
  if (reusable == 0) return;
  if (!caching_) throw ContractError("prefix reuse requires prefix caching");
  if (tables_.contains(owner)) throw ContractError("only a request's first allocation may reuse a prefix");
  if (reusable > signal.blocks.size()) throw ContractError("reusable prefix exceeds the newly allocated block range");
  for (std::size_t i = 0; i < reusable; ++i) {
    if (signal.blocks[i].is_partial()) throw ContractError("a reused prefix block must be full");
  }
}

G1Acquire NativeBackend::use(OwnerId owner, const UseSignal& signal, std::size_t reusable, NativeReservation* decode) {
  validate_use(owner, signal, reusable);
  if (signal.blocks.empty()) return G1Acquire::ready(0);  // an owner never holds an empty table
  const auto fresh = static_cast<std::uint32_t>(signal.blocks.size() - reusable);
  if (decode != nullptr) {
    if (reusable != 0) throw ContractError("a decode allocation cannot reuse a prefix");
    if (fresh > decode->fresh) throw ContractError("reserved decode allocation must be infallible");
    commit_use(owner, signal, *decode);
    return G1Acquire::ready(signal.blocks.size());
  }
  std::vector<SequenceHash> prefix;
  prefix.reserve(reusable);
  for (std::size_t i = 0; i < reusable; ++i) prefix.push_back(signal.blocks[i].hash());
  G1Acquire blocked;
  auto outcome = reserve_with_offload([&] { return pool_.reserve(prefix, fresh); }, blocked);
  if (!outcome) return blocked.kind == G1Acquire::Kind::BlockedOnOffload ? blocked : G1Acquire::capacity_exhausted();
  commit_use(owner, signal, outcome->reservation);
  return G1Acquire::ready(signal.blocks.size());
}

void NativeBackend::commit_use(OwnerId owner, const UseSignal& signal, NativeReservation& reservation) {
  OwnerTable& owned = detail::table_for(tables_, spare_tables_, owner);
  const std::size_t reused = reservation.prefix.size();
  const std::size_t grown = owned.blocks.size() + signal.blocks.size();
  if (grown > owned.blocks.capacity()) {
    owned.pages.reserve(grown);
    owned.blocks.reserve(grown);
    owned.meta.reserve(grown);
  }
  for (const PrefixPin& pin : pool_.activate_prefix(reservation)) {
    owned.pages.push_back(pin.page);
    owned.blocks.push_back(UniqueBlock::full(pin.hash));
    owned.meta.push_back(BlockMeta{});
  }
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
    BlockMeta meta;
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

void NativeBackend::deref(OwnerId owner, const DerefSignal& signal) {
  const auto it = tables_.find(owner);
  if (it == tables_.end()) throw ContractError("unknown owner " + detail::owner_text(owner));
  OwnerTable& owned = it->second;
  const std::size_t n = owned.blocks.size();
  if (signal.blocks.size() > n) throw ContractError("Deref lists more blocks than owner " + detail::owner_text(owner) + " owns");
  for (std::size_t i = 0; i < signal.blocks.size(); ++i) {
    if (signal.blocks[i] != owned.blocks[n - 1 - i]) {
      throw ContractError("Deref must list owner " + detail::owner_text(owner) + "'s last blocks leaf first; block " +
                          signal.blocks[i].to_string() + " is out of order");
    }
  }
  for (std::size_t i = 0; i < signal.blocks.size(); ++i) {
    const std::size_t position = owned.blocks.size() - 1;
    pool_.release(owned.pages.back());
    if (owned.blocks.back().is_partial()) live_partials_.erase(owned.blocks.back().uuid());
    if (owned.token_ids.size() > position * block_size_) owned.token_ids.resize(position * block_size_);
    owned.pages.pop_back();
    owned.blocks.pop_back();
    owned.meta.pop_back();
  }
  if (owned.blocks.empty()) detail::retire_table(tables_, spare_tables_, it);
}

void NativeBackend::promote(OwnerId owner, const PromoteSignal& signal) {
  const auto it = tables_.find(owner);
  if (it == tables_.end() || it->second.blocks.empty() || !it->second.blocks.back().is_partial() ||
      it->second.blocks.back().uuid() != signal.uuid) {
    throw ContractError("partial block not found: " + signal.uuid.to_string() + " is not owner " + detail::owner_text(owner) +
                        "'s last block");
  }
  OwnerTable& owned = it->second;
  owned.blocks.back() = UniqueBlock::full(signal.hash);
  live_partials_.erase(signal.uuid);
  if (!caching_) return;
  const bool first_copy = pool_.cache_private(owned.pages.back(), signal.hash);
  if (tier_ != nullptr) {
    remember_for_tier(owned.pages.back(), TieredBlock{.plh = native_tier_key(signal.hash),
                                                      .hash = signal.hash,
                                                      .parent = signal.parent,
                                                      .local = signal.local,
                                                      .token_ids = signal.token_ids});
  }
  if (!first_copy) return;
  KvStored stored{.parent = signal.parent, .blocks = {{signal.hash, signal.local}}, .token_ids = std::nullopt};
  if (signal.token_ids) stored.token_ids.emplace().append(*signal.token_ids);
  publisher_.publish_stored(StorageTier::Device, std::move(stored));
}

void NativeBackend::finalize_computed_prefix(OwnerId owner, std::size_t before, std::size_t after) {
  if (before > after) throw ContractError("finalize: computed_before exceeds computed_after");
  if (!caching_) return;
  const auto it = tables_.find(owner);
  if (it == tables_.end()) throw ContractError("unknown owner " + detail::owner_text(owner));
  OwnerTable& owned = it->second;
  const std::size_t last = std::min(after / block_size_, owned.blocks.size());
  std::vector<VisibleBlock>& visible = visible_;
  visible.clear();
  for (std::size_t position = before / block_size_; position < last; ++position) {
    if (owned.blocks[position].is_partial()) break;  // the tail is promoted, not finalized
    BlockMeta& meta = owned.meta[position];
    if (!meta.pending_store) {
      visible.push_back(VisibleBlock::run_gap());
      continue;
    }
    meta.pending_store = false;
    const SequenceHash hash = owned.blocks[position].hash();
    const bool first_copy = pool_.cache_private(owned.pages[position], hash);
    const std::span<const TokenId> ids = owned.token_ids_at(position, block_size_);
    if (tier_ != nullptr) {
      remember_for_tier(owned.pages[position],
                        TieredBlock{.plh = native_tier_key(hash),
                                    .hash = hash,
                                    .parent = meta.has_store_parent ? std::optional<SequenceHash>(SequenceHash(meta.store_parent))
                                                                    : std::nullopt,
                                    .local = LocalBlockHash(meta.local),
                                    .token_ids = meta.has_token_ids ? std::optional<std::vector<TokenId>>(std::in_place, ids.begin(), ids.end())
                                                                    : std::nullopt});
    }
    if (!first_copy) {
      visible.push_back(VisibleBlock::run_gap());  // a duplicate copy: the hash was visible already
      continue;
    }
    visible.push_back(VisibleBlock{
        .gap = false,
        .parent = meta.has_store_parent ? std::optional<SequenceHash>(SequenceHash(meta.store_parent)) : std::nullopt,
        .block = {hash, LocalBlockHash(meta.local)},
        .has_local = meta.has_local,
        .has_token_ids = meta.has_token_ids,
        .token_ids = ids});
  }
  publish_visible_runs(visible);
}

void NativeBackend::publish_removed(std::vector<SequenceHash> removed) {
  if (!caching_) return;
  publisher_.publish_removed(StorageTier::Device, KvRemoved{std::move(removed)});
}

void NativeBackend::publish_visible_runs(const std::vector<VisibleBlock>& visible) {
  if (!publisher_.has_sinks()) return;  // nothing listens: build nothing
  std::optional<KvStored> run;
  bool run_has_local = false;
  const auto flush = [&] {
    if (run) publisher_.publish_stored(StorageTier::Device, std::move(*run));
    run.reset();
  };
  for (std::size_t at = 0; at < visible.size(); ++at) {
    const VisibleBlock& v = visible[at];
    if (v.gap) {
      flush();
      continue;
    }
    // Runs also split where the presence of local hashes or token ids changes.
    if (run && (run_has_local != v.has_local || run->token_ids.has_value() != v.has_token_ids)) flush();
    if (!run) {
      run = KvStored{.parent = v.parent, .blocks = {}, .token_ids = std::nullopt};
      run_has_local = v.has_local;
      run->blocks.reserve(visible.size() - at);  // at most the rest: one allocation per run
      if (v.has_token_ids) {
        run->token_ids.emplace();
        run->token_ids->reserve(visible.size() - at, v.token_ids.size());
      }
    }
    run->blocks.push_back(v.block);
    if (v.has_token_ids) run->token_ids->append(v.token_ids);
  }
  flush();
}

PrefillCost NativeBackend::prefill_cost(const ActiveSequence& sequence) const {
  std::size_t overlap = 0;
  std::size_t active = 0;
  if (caching_ && sequence.enable_prefix_caching()) {
    for (const UniqueBlock& block : sequence.blocks()) {
      if (block.is_partial()) break;
      const auto hit = pool_.prefix_hit(block.hash());
      if (!hit) break;
      ++overlap;
      if (hit->is_active) ++active;
    }
  }
  const std::size_t length = sequence.len();
  PrefillCost cost;
  cost.new_blocks = sequence.blocks().size() - overlap;
  cost.cached_tokens = std::min(overlap * block_size_, length);
  cost.active_cached_tokens = std::min(active * block_size_, length);
  cost.new_tokens = length - cost.cached_tokens;
  return cost;
}

std::optional<std::uint64_t> NativeBackend::reserve_decode_blocks(std::size_t blocks) {
  if (blocks > pool_.capacity()) return std::nullopt;
  G1Acquire blocked;  // a reservation blocked on offload answers "not now"
  auto outcome = reserve_with_offload([&] { return pool_.reserve_fresh(static_cast<std::uint32_t>(blocks)); }, blocked);
  if (!outcome) return std::nullopt;
  const std::uint64_t id = next_reservation_id_++;
  decode_reservations_.emplace(id, std::move(outcome->reservation));
  return id;
}

G1Acquire NativeBackend::process_decode(OwnerId owner, const MoveBlock& signal, std::uint64_t reservation) {
  const auto it = detail::find_reservation(decode_reservations_, reservation, "decode");
  if (const auto* use_signal = std::get_if<UseSignal>(&signal)) return use(owner, *use_signal, 0, &it->second);
  return process(owner, signal, 0);
}

void NativeBackend::release_decode(std::uint64_t reservation) {
  const auto it = detail::find_reservation(decode_reservations_, reservation, "decode");
  pool_.cancel(it->second);
  decode_reservations_.erase(it);
}

std::optional<BlockManager::DestinationGrant> NativeBackend::reserve_destination(OwnerId owner,
                                                                                 const ActiveSequence& sequence,
                                                                                 double /*now_ms*/) {
  if (tables_.contains(owner)) throw ContractError("destination owner " + detail::owner_text(owner) + " already owns blocks");
  if (sequence.block_size() != block_size_) throw ContractError("sequence block size differs from the manager's");
  const std::size_t prompt_blocks = (sequence.num_input_tokens() + block_size_ - 1) / block_size_;
  Destination destination;
  destination.owner = owner;
  destination.blocks.assign(sequence.blocks().begin(),
                            sequence.blocks().begin() + static_cast<std::ptrdiff_t>(prompt_blocks));
  std::vector<SequenceHash> candidates;
  for (std::size_t i = 0; i < prompt_blocks; ++i) {
    if (destination.blocks[i].is_partial()) break;
    if (sequence.enable_prefix_caching()) destination.local_hashes.push_back(sequence.local_hash(i));
    if (caching_ && sequence.enable_prefix_caching()) candidates.push_back(destination.blocks[i].hash());
  }
  if (sequence.emits_token_ids()) {
    destination.token_ids.emplace();
    for (std::size_t i = 0; i < destination.local_hashes.size(); ++i) {
      const auto first = sequence.tokens().begin() + static_cast<std::ptrdiff_t>(i * block_size_);
      destination.token_ids->emplace_back(first, first + block_size_);
    }
  }
  if (prompt_blocks > pool_.capacity()) return std::nullopt;
  G1Acquire blocked;
  auto outcome = reserve_with_offload(
      [&] { return pool_.reserve_resident_prefix(candidates, static_cast<std::uint32_t>(prompt_blocks)); }, blocked);
  if (!outcome) return std::nullopt;
  const std::size_t transferable = std::size_t{outcome->reservation.fresh} * block_size_;
  destination.reservation = std::move(outcome->reservation);
  const std::uint64_t id = next_reservation_id_++;
  destinations_.emplace(id, std::move(destination));
  return DestinationGrant{id, transferable};
}

void NativeBackend::activate_destination(std::uint64_t reservation) {
  const auto it = detail::find_reservation(destinations_, reservation, "destination");
  Destination& d = it->second;
  if (tables_.contains(d.owner)) throw ContractError("destination owner " + detail::owner_text(d.owner) + " already owns blocks");
  if (!d.blocks.empty() && d.blocks.back().is_partial() && live_partials_.contains(d.blocks.back().uuid())) {
    throw ContractError("partial block " + d.blocks.back().uuid().to_string() + " is already allocated");
  }
  OwnerTable& owned = detail::table_for(tables_, spare_tables_, d.owner);
  const std::size_t reused = d.reservation.prefix.size();
  for (const PrefixPin& pin : pool_.activate_prefix(d.reservation)) {
    owned.pages.push_back(pin.page);
    owned.blocks.push_back(UniqueBlock::full(pin.hash));
    owned.meta.push_back(BlockMeta{});
  }
  // Transferred KV is computed: fresh full blocks are cached (and Stored) at once.
  std::vector<VisibleBlock> visible(reused, VisibleBlock::run_gap());
  for (std::size_t i = reused; i < d.blocks.size(); ++i) {
    const UniqueBlock& block = d.blocks[i];
    BlockMeta meta;
    PageId page;
    if (block.is_partial()) {
      page = pool_.allocate_private(d.reservation);
      live_partials_.insert(block.uuid());
    } else if (!caching_) {
      page = pool_.allocate_private(d.reservation);
    } else {
      const auto [cached_page, became_visible] = pool_.allocate_cached(d.reservation, block.hash());
      page = cached_page;
      meta.has_local = !d.local_hashes.empty();
      meta.local = meta.has_local ? d.local_hashes[i].value() : 0;
      if (d.token_ids) {
        owned.append_token_ids(i, (*d.token_ids)[i]);
        meta.has_token_ids = true;
      }
      if (tier_ != nullptr) {
        remember_for_tier(page, TieredBlock{.plh = native_tier_key(block.hash()),
                                            .hash = block.hash(),
                                            .parent = i == 0 ? std::nullopt : std::optional<SequenceHash>(d.blocks[i - 1].hash()),
                                            .local = LocalBlockHash(meta.local),
                                            .token_ids = d.token_ids ? std::optional<std::vector<TokenId>>((*d.token_ids)[i])
                                                                     : std::nullopt});
      }
      if (became_visible) {
        // d's own ids: the table's flat vector may still grow in this loop.
        visible.push_back(VisibleBlock{
            .gap = false,
            .parent = i == 0 ? std::nullopt : std::optional<SequenceHash>(d.blocks[i - 1].hash()),
            .block = {block.hash(), LocalBlockHash(meta.local)},
            .has_local = meta.has_local,
            .has_token_ids = d.token_ids.has_value(),
            .token_ids = d.token_ids ? std::span<const TokenId>((*d.token_ids)[i]) : std::span<const TokenId>{}});
      } else {
        visible.push_back(VisibleBlock::run_gap());
      }
    }
    owned.pages.push_back(page);
    owned.blocks.push_back(block);
    owned.meta.push_back(meta);
  }
  publish_visible_runs(visible);
  destinations_.erase(it);
}

void NativeBackend::cancel_destination(std::uint64_t reservation) {
  const auto it = detail::find_reservation(destinations_, reservation, "destination");
  pool_.cancel(it->second.reservation);
  destinations_.erase(it);
}

G1Metrics NativeBackend::metrics() const {
  // Swap-in destination pages are private copies that no table holds yet:
  // active pages, but not references (as KVBM's held slots).
  std::size_t slot_pages = 0;
  for (const auto& entry : swap_in_slots_) slot_pages += entry.second.size();
  return G1Metrics{.active_blocks = pool_.active_blocks(),
                   .active_block_refs = pool_.active_block_refs() - slot_pages,
                   .inactive_blocks = pool_.inactive_len(),
                   .capacity = pool_.capacity()};
}

std::span<const PageId> NativeBackend::block_table(OwnerId owner) const { return table(owner).pages; }

std::span<const UniqueBlock> NativeBackend::owned_blocks(OwnerId owner) const { return table(owner).blocks; }

std::vector<OwnerId> NativeBackend::owners() const { return detail::sorted_owners(tables_); }

std::size_t NativeBackend::metadata_bytes() const {
  std::size_t bytes = pool_.metadata_bytes();
  const auto table_bytes = [](const OwnerTable& owned) {
    return sizeof(OwnerId) + sizeof(OwnerTable) + owned.pages.capacity() * sizeof(PageId) +
           owned.blocks.capacity() * sizeof(UniqueBlock) + owned.meta.capacity() * sizeof(BlockMeta);
  };
  for (const auto& [owner, owned] : tables_) bytes += table_bytes(owned);
  for (const auto& spare : spare_tables_) bytes += table_bytes(spare.mapped());  // kept for reuse: still held
  return bytes;
}

void NativeBackend::audit() const {
  NativeBlockPool::Holders holders{.refs = std::vector<std::uint32_t>(pool_.capacity(), 0),
                                   .pins = std::vector<std::uint32_t>(pool_.capacity(), 0)};
  std::size_t partials = 0;
  for (const auto& [owner, owned] : tables_) {
    const std::string who = "owner " + detail::owner_text(owner);
    KVTIER_ASSERT(!owned.blocks.empty(), who + " keeps an empty table");
    KVTIER_ASSERT(owned.pages.size() == owned.blocks.size() && owned.meta.size() == owned.blocks.size(),
                  who + "'s table columns differ in length");
    for (std::size_t i = 0; i < owned.blocks.size(); ++i) {
      const PageId page = owned.pages[i];
      KVTIER_ASSERT(page.value() < pool_.capacity(), who + " lists a page outside the pool");
      ++holders.refs[page.value()];
      if (owned.blocks[i].is_partial()) {
        ++partials;
        KVTIER_ASSERT(live_partials_.contains(owned.blocks[i].uuid()), who + " holds a partial block that is not live");
        KVTIER_ASSERT(pool_.is_private_page(page), who + "'s partial block is on a page that is not private");
      } else if (const auto hash = pool_.cached_hash(page)) {
        KVTIER_ASSERT(*hash == owned.blocks[i].hash(), who + "'s full block is on a page cached for another hash");
      }
    }
  }
  KVTIER_ASSERT(partials == live_partials_.size(), "live partial blocks differ from the partials in tables");
  const auto hold = [&](const NativeReservation& reservation) {
    for (const PrefixPin& pin : reservation.prefix) ++holders.pins[pin.page.value()];
    holders.reserved += reservation.fresh;
  };
  for (const auto& entry : decode_reservations_) hold(entry.second);
  for (const auto& entry : destinations_) hold(entry.second.reservation);
  for (const auto& entry : prefix_pins_) hold(entry.second);
  for (const auto& entry : swap_in_slots_) {
    for (const PageId page : entry.second) ++holders.refs[page.value()];
  }
  pool_.audit(holders);
}

std::vector<std::pair<PageId, SequenceHash>> NativeBackend::registered_blocks() const {
  std::vector<std::pair<PageId, SequenceHash>> out;
  for (std::uint32_t page = 0; page < pool_.capacity(); ++page) {
    if (const auto hash = pool_.cached_hash(PageId(page))) out.emplace_back(PageId(page), *hash);
  }
  return out;
}

template <class Reserve>
std::optional<NativeReserveOutcome> NativeBackend::reserve_with_offload(Reserve reserve, G1Acquire& blocked) {
  for (;;) {
    auto outcome = reserve();
    if (!outcome) return std::nullopt;
    publish_removed(std::exchange(outcome->removed, {}));
    if (outcome->quarantined.empty()) return outcome;
    std::vector<EvictedBlock> victims;
    victims.reserve(outcome->quarantined.size());
    for (const PrefixPin& pin : outcome->quarantined) {
      const auto known = tier_blocks_.find(pin.page.value());
      victims.push_back(EvictedBlock{
          pin.page, known != tier_blocks_.end() && known->second.hash == pin.hash
                        ? known->second
                        : TieredBlock{native_tier_key(pin.hash), pin.hash, std::nullopt, LocalBlockHash(0), std::nullopt}});
    }
    const SwapOutTicket ticket = tier_->swap_out(victims);
    std::vector<PageId> copied(ticket.quarantined);
    std::sort(copied.begin(), copied.end());
    for (const PrefixPin& pin : outcome->quarantined) {
      if (!std::binary_search(copied.begin(), copied.end(), pin.page)) {
        pool_.release_quarantined(pin.page);  // not copied: free now
      }
    }
    if (!ticket.quarantined.empty()) {
      blocked = G1Acquire{.kind = G1Acquire::Kind::BlockedOnOffload,
                          .count = 0,
                          .offload_id = ticket.transfer,
                          .deadline_ms = tier_->earliest_deadline_ms().value_or(0.0)};
      return std::nullopt;
    }
    // RetryNow (§5.3): every victim was filtered and its page is free; the retry takes it.
  }
}

void NativeBackend::remember_for_tier(PageId page, const TieredBlock& block) { tier_blocks_[page.value()] = block; }

void NativeBackend::attach_offload(OffloadTier* tier) {
  if (tier_ != nullptr) throw ContractError("an offload tier is attached already");
  tier_ = tier;
  pool_.set_quarantine(caching_);  // without prefix caching nothing is cached, so nothing is offloaded
}

void NativeBackend::release_quarantined(std::span<const PageId> pages) {
  for (const PageId page : pages) pool_.release_quarantined(page);
}

std::optional<std::uint64_t> NativeBackend::pin_prefix(std::span<const PositionalLineageHash> keys) {
  std::vector<SequenceHash> hashes;
  hashes.reserve(keys.size());
  for (const PositionalLineageHash& key : keys) {
    if (key.high() != 0) throw ContractError("the native backend keys blocks by sequence hash (native_tier_key)");
    hashes.emplace_back(key.low());
    if (!caching_ || !pool_.is_resident(hashes.back())) return std::nullopt;
  }
  auto outcome = pool_.reserve_exact_prefix(hashes, static_cast<std::uint32_t>(hashes.size()));
  KVTIER_ASSERT(outcome && outcome->removed.empty(), "pinning resident blocks evicted or failed");
  const std::uint64_t id = next_reservation_id_++;
  prefix_pins_.emplace(id, std::move(outcome->reservation));
  return id;
}

void NativeBackend::release_pins(std::uint64_t pins) {
  const auto it = detail::find_reservation(prefix_pins_, pins, "prefix pin");
  pool_.cancel(it->second);
  prefix_pins_.erase(it);
}

BlockManager::SlotGrant NativeBackend::reserve_slots(std::size_t count) {
  if (count > pool_.capacity()) return SlotGrant{G1Acquire::capacity_exhausted(), 0};
  G1Acquire blocked;
  auto outcome = reserve_with_offload([&] { return pool_.reserve_fresh(static_cast<std::uint32_t>(count)); }, blocked);
  if (!outcome) {
    return SlotGrant{blocked.kind == G1Acquire::Kind::BlockedOnOffload ? blocked : G1Acquire::capacity_exhausted(), 0};
  }
  std::vector<PageId> pages;
  for (std::size_t i = 0; i < count; ++i) pages.push_back(pool_.allocate_private(outcome->reservation));
  const std::uint64_t id = next_reservation_id_++;
  swap_in_slots_.emplace(id, std::move(pages));
  return SlotGrant{G1Acquire::ready(count), id};
}

std::span<const PageId> NativeBackend::reserved_slots(std::uint64_t slots) const {
  const auto it = swap_in_slots_.find(slots);
  if (it == swap_in_slots_.end()) throw ContractError("unknown slot reservation " + std::to_string(slots));
  return it->second;
}

void NativeBackend::release_slots(std::uint64_t slots) {
  const auto it = detail::find_reservation(swap_in_slots_, slots, "slot");
  for (const PageId page : it->second) pool_.release(page);
  swap_in_slots_.erase(it);
}

std::size_t NativeBackend::register_swapped_in(std::uint64_t slots, std::span<const TieredBlock> blocks) {
  const auto it = detail::find_reservation(swap_in_slots_, slots, "slot");
  const std::vector<PageId> pages = std::move(it->second);
  if (blocks.size() > pages.size()) throw ContractError("more swapped-in blocks than reserved slots");
  swap_in_slots_.erase(it);
  std::vector<VisibleBlock> visible;
  std::vector<PageId> registered;
  for (std::size_t i = 0; i < pages.size(); ++i) {
    if (i >= blocks.size() || !caching_ || pool_.is_resident(blocks[i].hash)) {
      pool_.release(pages[i]);  // a copy G1 holds already ends the run and parents the next (§5.5)
      visible.push_back(VisibleBlock::run_gap());
      continue;
    }
    const TieredBlock& b = blocks[i];
    pool_.cache_private(pages[i], b.hash);
    if (tier_ != nullptr) remember_for_tier(pages[i], b);
    visible.push_back(VisibleBlock{.gap = false,
                                   .parent = b.parent,
                                   .block = {b.hash, b.local},
                                   .has_local = true,
                                   .has_token_ids = b.token_ids.has_value(),
                                   .token_ids = b.token_ids ? std::span<const TokenId>(*b.token_ids) : std::span<const TokenId>{}});
    registered.push_back(pages[i]);
  }
  publish_visible_runs(visible);
  // Inactive, leaf first at the LRU head, as a Deref would leave them.
  for (auto page = registered.rbegin(); page != registered.rend(); ++page) pool_.release(*page);
  return registered.size();
}

}  // namespace kvtier::g1
