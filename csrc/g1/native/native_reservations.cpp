// Native reservations: prefill cost, decode growth and destinations
// (disaggregated decode side), each an atomic pool reservation.
#include <string>
#include <utility>

#include "g1/common/contract_checks.hpp"
#include "g1/common/stored_runs.hpp"
#include "g1/native/native_backend.hpp"
#include "kvtier/core/errors.hpp"

namespace kvtier::g1 {

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
  return prefill_cost_of(overlap, active, sequence.blocks().size(), sequence.len());
}

std::optional<std::uint64_t> NativeBackend::reserve_decode_blocks(std::size_t blocks) {
  if (blocks > pool_.capacity()) return std::nullopt;
  G1Acquire blocked;  // a reservation blocked on offload answers "not now"
  auto outcome = reserve_with_offload(PrefixRule::Exact, {}, static_cast<std::uint32_t>(blocks), blocked);
  if (!outcome) return std::nullopt;
  return decode_reservations_.add(reservation_ids_, std::move(outcome->reservation));
}

G1Acquire NativeBackend::process_decode(OwnerId owner, const MoveBlock& signal, std::uint64_t reservation) {
  NativeReservation& reserved = decode_reservations_.at(reservation);
  if (const auto* use_signal = std::get_if<UseSignal>(&signal)) return use(owner, *use_signal, 0, &reserved);
  return process(owner, signal, 0);
}

void NativeBackend::release_decode(std::uint64_t reservation) {
  NativeReservation reserved = decode_reservations_.take(reservation);
  pool_.cancel(reserved);
}

std::optional<BlockManager::DestinationGrant> NativeBackend::reserve_destination(OwnerId owner,
                                                                                 const ActiveSequence& sequence,
                                                                                 double /*now_ms*/) {
  detail::check_destination_owner(owner, tables_.contains(owner));
  Destination destination{
      .reservation = {}, .owner = owner, .prompt = detail::DestinationPrompt::of(sequence, block_size_)};
  std::vector<SequenceHash> candidates;
  if (caching_ && sequence.enable_prefix_caching()) {
    for (std::size_t i = 0; i < destination.prompt.full; ++i) candidates.push_back(destination.prompt.blocks[i].hash());
  }
  const std::size_t prompt_blocks = destination.prompt.blocks.size();
  if (prompt_blocks > pool_.capacity()) return std::nullopt;
  G1Acquire blocked;
  auto outcome =
      reserve_with_offload(PrefixRule::LongestResident, candidates, static_cast<std::uint32_t>(prompt_blocks), blocked);
  if (!outcome) return std::nullopt;
  const std::size_t transferable = std::size_t{outcome->reservation.fresh} * block_size_;
  destination.reservation = std::move(outcome->reservation);
  return DestinationGrant{destinations_.add(reservation_ids_, std::move(destination)), transferable};
}

void NativeBackend::activate_destination(std::uint64_t reservation) {
  Destination& d = destinations_.at(reservation);
  const detail::DestinationPrompt& prompt = d.prompt;
  detail::check_destination_owner(d.owner, tables_.contains(d.owner));
  if (!prompt.blocks.empty()) {
    const UniqueBlock& last = prompt.blocks.back();
    detail::check_partial_unallocated(last, last.is_partial() && live_partials_.contains(last.uuid()));
  }
  detail::NativeOwnerTable& owned = tables_.for_owner(d.owner);
  const std::size_t reused = d.reservation.prefix.size();
  activate_prefix(owned, d.reservation);
  // Transferred KV is computed: fresh full blocks are cached (and Stored) at once.
  detail::StoredRuns runs(publisher_, prompt.blocks.size() - reused);
  for (std::size_t i = reused; i < prompt.blocks.size(); ++i) {
    const UniqueBlock& block = prompt.blocks[i];
    detail::NativeBlockMeta meta;
    PageId page;
    if (block.is_partial()) {
      page = pool_.allocate_private(d.reservation);
      live_partials_.insert(block.uuid());
    } else if (!caching_) {
      page = pool_.allocate_private(d.reservation);
    } else {
      const auto [cached_page, became_visible] = pool_.allocate_cached(d.reservation, block.hash());
      page = cached_page;
      if (pool_.ordered() && i <= PositionalLineageHash::kMaxPosition) {
        pool_.set_lineage(page, PositionalLineageHash(block.hash(), prompt.parent(i), i));
      }
      meta.has_local = !prompt.local_hashes.empty();
      meta.local = prompt.local(i).value();
      const std::span<const TokenId> ids =
          prompt.token_ids ? std::span<const TokenId>((*prompt.token_ids)[i]) : std::span<const TokenId>{};
      if (prompt.token_ids) {
        owned.append_token_ids(i, ids);
        meta.has_token_ids = true;
      }
      if (tier_ != nullptr) {
        remember_for_tier(
            page,
            TieredBlock{.plh = native_tier_key(block.hash()),
                        .hash = block.hash(),
                        .parent = prompt.parent(i),
                        .local = prompt.local(i),
                        .token_ids = prompt.token_ids ? std::optional<std::vector<TokenId>>((*prompt.token_ids)[i])
                                                      : std::nullopt});
      }
      became_visible ? runs.add(prompt.parent(i), {block.hash(), prompt.local(i)}, meta.has_local, ids) : runs.gap();
    }
    owned.pages.push_back(page);
    owned.blocks.push_back(block);
    owned.meta.push_back(meta);
  }
  runs.gap();
  destinations_.erase(reservation);
}

void NativeBackend::cancel_destination(std::uint64_t reservation) {
  Destination d = destinations_.take(reservation);
  pool_.cancel(d.reservation);
}

}  // namespace kvtier::g1
