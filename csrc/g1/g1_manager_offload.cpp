// The facade's offload calls (docs/semantics.md §5.2–5.5, docs/offload.md): the
// swap-in lifecycle over the backend's pins and slots and the tier's copies.
#include <string>

#include "g1/common/block_manager.hpp"
#include "g1/native/groups/grouped_backend.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"
#include "kvtier/g1/g1_manager.hpp"

namespace kvtier::g1 {

const char* swap_in_status_name(SwapInStatus status) noexcept {
  switch (status) {
    case SwapInStatus::NoHits:
      return "no_hits";
    case SwapInStatus::Scheduled:
      return "scheduled";
    case SwapInStatus::BlockedOnG1Offload:
      return "blocked_on_offload";
  }
  return "?";
}

void G1Manager::attach_offload_engine(std::shared_ptr<OffloadTier> engine) {
  KVTIER_EXPECTS(engine, "attach_offload_engine needs an engine");
  KVTIER_EXPECTS(!tier_, "an offload engine is attached already");
  if (grouped_ != nullptr) {
    // Each group's event fields and block fingerprint: the tier keeps (hash, group).
    std::vector<KvEventGroup> groups;
    std::vector<std::uint64_t> fingerprints;
    for (std::size_t g = 0; g < geometry_->group_count(); ++g) {
      groups.push_back(grouped_->event_group(g));
      fingerprints.push_back(geometry_->block_fingerprint(g));
    }
    engine->bind_groups(*publisher_, std::move(groups), std::move(fingerprints));
  } else {
    engine->bind(*publisher_, config_.backend);  // refuses an engine bound to another manager
  }
  backend_->attach_offload(engine.get());
  tier_ = std::move(engine);
}

std::optional<double> G1Manager::earliest_offload_deadline() const {
  return tier_ ? tier_->earliest_deadline_ms() : std::nullopt;
}

TierProgress G1Manager::collect_offloads(bool wait) {
  if (!tier_) return {};
  TierProgress progress = tier_->poll(wait);
  backend_->release_quarantined(progress.released);
  reap_cancelled_swap_ins();
  return progress;
}

OffloadStats G1Manager::offload_stats() const {
  OffloadStats stats;
  if (tier_) stats.tier = tier_->stats();
  stats.quarantined = backend_->quarantined();
  stats.swap_ins = swap_ins_.size();
  return stats;
}

std::optional<G1PrefixPins> G1Manager::try_pin_g1_prefix(std::span<const PositionalLineageHash> plhs) {
  if (!tier_) return std::nullopt;  // no engine: nothing to swap in behind a pin
  if (plhs.empty()) return G1PrefixPins{};
  const auto id = backend_->pin_prefix(plhs);
  if (!id) return std::nullopt;
  return G1PrefixPins{.id = *id, .blocks = plhs.size()};
}

void G1Manager::release_g1_prefix_pins(G1PrefixPins&& pins) {
  if (pins.id != 0) backend_->release_pins(pins.id);
}

SwapInStart G1Manager::try_batch_swap_in(std::span<const PositionalLineageHash> plhs,
                                         std::optional<G1PrefixPins> prefix_pins, double /*now_ms*/) {
  const std::uint64_t pins = prefix_pins ? prefix_pins->id : 0;
  const auto drop_pins = [&] {
    if (pins != 0) backend_->release_pins(pins);
  };
  if (!tier_) {
    drop_pins();
    return {};
  }
  // The tier blocks are pinned first, so making room in G1 (whose evictions
  // go to the tier) cannot push them out of it.
  SwapInCopy copy = tier_->prepare_swap_in(plhs);
  if (copy.blocks.empty()) {
    drop_pins();
    return {};
  }
  const auto abandon = [&] {
    tier_->finish_swap_in(copy.transfer);
    drop_pins();
  };
  const BlockManager::SlotGrant grant = backend_->reserve_slots(copy.blocks.size());
  if (grant.acquire.kind == G1Acquire::Kind::BlockedOnOffload) {
    abandon();
    return SwapInStart{.status = SwapInStatus::BlockedOnG1Offload, .offload_id = grant.acquire.offload_id};
  }
  if (!grant.acquire.is_ready()) {
    abandon();
    return {};
  }
  try {
    tier_->start_swap_in(copy.transfer, backend_->reserved_slots(grant.id));
  } catch (...) {
    backend_->release_slots(grant.id);
    abandon();
    throw;
  }
  const std::size_t copied = copy.blocks.size();
  swap_ins_.emplace(copy.transfer, SwapInLease{.slots = grant.id, .pins = pins, .blocks = std::move(copy.blocks)});
  return SwapInStart{.status = SwapInStatus::Scheduled,
                     .swap_in_id = copy.transfer,
                     .count = copied,
                     .from_lower = copy.from_lower,
                     .from_external = copy.from_external};
}

bool G1Manager::cancel_swap_in(std::uint64_t swap_in_id) {
  const auto it = swap_ins_.find(swap_in_id);
  if (it == swap_ins_.end() || it->second.cancelled) return false;
  // Reaped by the next collect_offloads, once its copy has stopped (§5.5: at
  // the next tick), never here: what a cancel frees does not depend on timing.
  it->second.cancelled = true;
  return true;
}

void G1Manager::release_lease(const SwapInLease& lease) {
  backend_->release_slots(lease.slots);
  if (lease.pins != 0) backend_->release_pins(lease.pins);
}

void G1Manager::reap_cancelled_swap_ins() {
  for (auto it = swap_ins_.begin(); it != swap_ins_.end();) {
    // A destination page is freed only after the copy into it has stopped.
    if (!it->second.cancelled || tier_->swap_in_state(it->first) == TransferState::Pending) {
      ++it;
      continue;
    }
    release_lease(it->second);
    tier_->finish_swap_in(it->first);
    it = swap_ins_.erase(it);
  }
}

SwapInRegistration G1Manager::register_completed_swap_in(std::uint64_t swap_in_id) {
  const auto it = swap_ins_.find(swap_in_id);
  KVTIER_EXPECTS(it != swap_ins_.end(), "unknown swap-in " + std::to_string(swap_in_id));
  KVTIER_EXPECTS(!it->second.cancelled, "swap-in " + std::to_string(swap_in_id) + " was cancelled");
  const TransferState state = tier_->wait_swap_in(swap_in_id);
  const SwapInLease lease = std::move(it->second);
  swap_ins_.erase(it);
  SwapInRegistration result;
  if (state == TransferState::Complete) {
    if (const auto registered = backend_->register_swapped_in(lease.slots, lease.blocks)) {
      result.registered = *registered;
    } else {
      result.failed = true;  // a lineage collision: the slots are still reserved
      backend_->release_slots(lease.slots);
    }
    if (lease.pins != 0) backend_->release_pins(lease.pins);
  } else {
    result.failed = true;
    release_lease(lease);
  }
  tier_->finish_swap_in(swap_in_id);
  return result;
}

SwapInPlan G1Manager::group_swap_in_plan(const ActiveSequence& sequence, std::size_t prompt_tokens) const {
  KVTIER_EXPECTS(grouped_ != nullptr, "group_swap_in_plan is for a manager with KV cache groups");
  KVTIER_EXPECTS(prompt_tokens <= sequence.len(), "a prompt of ", prompt_tokens, " tokens; the sequence has ",
                 sequence.len());
  return grouped_->plan_swap_in(sequence, prompt_tokens);
}

std::vector<PositionalLineageHash> G1Manager::tier_keys(const ActiveSequence& sequence, std::size_t blocks) const {
  KVTIER_EXPECTS(blocks <= sequence.full_block_count(),
                 "tier_keys of " + std::to_string(blocks) + " blocks; the sequence has " +
                     std::to_string(sequence.full_block_count()) + " full blocks");
  std::vector<PositionalLineageHash> keys;
  keys.reserve(blocks);
  for (std::size_t i = 0; i < blocks; ++i) {
    keys.push_back(config_.backend == G1Backend::Kvbm ? sequence.plh(i) : native_tier_key(sequence.blocks()[i].hash()));
  }
  return keys;
}

}  // namespace kvtier::g1
