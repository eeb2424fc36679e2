#include "kvtier/driver/request_driver.hpp"

#include <algorithm>
#include <functional>
#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::driver {

std::size_t RequestDriver::resident_prefix(const ActiveSequence& sequence) const {
  const auto blocks = sequence.blocks();
  std::size_t n = 0;
  while (n < blocks.size() && blocks[n].is_full() && manager_->is_cached(blocks[n].hash())) ++n;
  return n;
}

g1::G1Acquire RequestDriver::allocate_groups(g1::OwnerId owner, ActiveSequence& sequence, std::size_t tokens,
                                             std::optional<std::size_t> reuse) {
  // A new request takes the prefix hit of its prompt (or the `reuse` blocks
  // of the manager's block size it names), when the allocation covers it.
  std::size_t reuse_tokens = 0;
  if (!manager_->has_owner(owner)) {
    if (reuse) {
      reuse_tokens = *reuse * manager_->block_size();
    } else if (manager_->enable_prefix_caching()) {
      const std::size_t hit = manager_->get_prefill_cost(sequence).cached_tokens;
      reuse_tokens = hit <= tokens ? hit : 0;
    }
  } else {
    KVTIER_EXPECTS(!reuse || *reuse == 0, "a running request takes no prefix hit");
  }
  const g1::G1Acquire acquire = manager_->allocate_slots(owner, sequence, tokens, reuse_tokens);
  zero_reassigned_pages();
  if (acquire.is_ready()) sequence.commit_allocation(std::max(tokens, sequence.num_allocated_tokens()));
  return acquire;
}

void RequestDriver::zero_reassigned_pages() {
  if (!zero_pages_) return;
  const std::vector<PageId> pages = manager_->take_pages_to_zero();
  if (!pages.empty()) zero_pages_(pages);
}

DecodeStep RequestDriver::decode_groups(g1::OwnerId owner, ActiveSequence& sequence, std::optional<TokenId> token) {
  KVTIER_EXPECTS(manager_->has_owner(owner) && sequence.num_allocated_tokens() == sequence.len(), "allocated up to ",
                 sequence.num_allocated_tokens(), " of its ", sequence.len(), " tokens: allocate it before generating");
  // The step that sampled this token ran on every token before it: they are
  // computed (their blocks cached, the skipped ones released below).
  manager_->finalize_computed_prefix(owner, 0, sequence.len(), &sequence);
  DecodeStep step;
  step.signals = token ? sequence.push(*token) : sequence.generate();
  step.applied = step.signals.size();
  step.finished = !step.signals.empty() && std::holds_alternative<DerefSignal>(step.signals.back());
  if (step.finished) {
    manager_->free_slots(owner);
    sequence.commit_allocation(0);
    step.acquire = g1::G1Acquire::ready(step.signals.size());
    return step;
  }
  step.acquire = manager_->allocate_slots(owner, sequence, sequence.len());
  zero_reassigned_pages();
  if (!step.acquire.is_ready()) {
    step.applied = 0;
    return step;  // the token stays, unallocated: the next step retries its slot
  }
  sequence.commit_allocation(sequence.len());
  return step;
}

g1::G1Acquire RequestDriver::allocate(g1::OwnerId owner, ActiveSequence& sequence, std::size_t cumulative_tokens,
                                      std::optional<std::size_t> reuse) {
  KVTIER_EXPECTS(cumulative_tokens <= sequence.len(), "cannot allocate past the sequence length");
  if (manager_->has_groups()) return allocate_groups(owner, sequence, cumulative_tokens, reuse);
  const auto use = sequence.prepare_allocation(cumulative_tokens);
  if (!use) {
    sequence.commit_allocation(std::max(cumulative_tokens, sequence.num_allocated_tokens()));
    return g1::G1Acquire::ready(0);
  }
  g1::G1Acquire acquire;
  if (!reuse && manager_->backend() == g1::G1Backend::Native && manager_->enable_prefix_caching() &&
      sequence.num_allocated_tokens() == 0 && !manager_->has_owner(owner)) {
    // The first allocation's blocks lead the sequence: their resident run is
    // the prefix hit, whose pages the Use takes as found (get_computed_blocks).
    acquire = manager_->process_for_request(owner, *use, manager_->computed_prefix(use->blocks, computed_));
  } else {
    acquire = manager_->process_for_request(owner, *use, reuse.value_or(0));
  }
  if (acquire.is_ready()) sequence.commit_allocation(cumulative_tokens);
  return acquire;
}

void RequestDriver::finalize(g1::OwnerId owner, ActiveSequence& sequence, std::size_t before, std::size_t after) {
  // G1Manager checks the tail's Promote before it changes the sequence or
  // publishes anything, so a refusal leaves both as they were.
  manager_->finalize_computed_prefix(owner, before, after, &sequence);
}

void RequestDriver::require_decodable(g1::OwnerId owner, const ActiveSequence& sequence) const {
  KVTIER_EXPECTS(sequence.num_allocated_tokens() == sequence.len(),
                 "allocated up to " + std::to_string(sequence.num_allocated_tokens()) + " of its " +
                     std::to_string(sequence.len()) + " tokens: allocate it before generating");
  const auto owned = manager_->has_owner(owner) ? manager_->owned_blocks(owner) : std::span<const UniqueBlock>{};
  const auto blocks = sequence.blocks();
  if (owned.size() < blocks.size() ||
      !std::equal(blocks.begin(), blocks.end(), owned.end() - static_cast<std::ptrdiff_t>(blocks.size()))) {
    throw ContractError("its blocks are no longer the tail of its owner's table");
  }
}

DecodeStep RequestDriver::decode(g1::OwnerId owner, ActiveSequence& sequence, std::optional<TokenId> token) {
  if (manager_->has_groups()) return decode_groups(owner, sequence, token);
  require_decodable(owner, sequence);
  DecodeStep step;
  step.signals = token ? sequence.push(*token) : sequence.generate();
  for (; step.applied < step.signals.size(); ++step.applied) {
    try {
      step.acquire = manager_->process_for_request(owner, step.signals[step.applied], 0);
    } catch (const ContractError& error) {
      // require_decodable makes every signal valid (a Promote of the owner's
      // last block, a Use of a fresh partial, a Deref of the table's tail), so
      // a refusal here is kvtier's bug — and no copy of the sequence is kept
      // per token to undo it.
      throw InvariantError("decode: signal " + std::to_string(step.applied) +
                           " of a decodable sequence was refused: " + error.what());
    }
    if (!step.acquire.is_ready()) return step;
  }
  step.acquire = g1::G1Acquire::ready(step.signals.size());
  step.finished = !step.signals.empty() && std::holds_alternative<DerefSignal>(step.signals.back());
  sequence.commit_allocation(step.finished ? 0 : sequence.len());
  return step;
}

void RequestDriver::release(g1::OwnerId owner, ActiveSequence& sequence) {
  if (manager_->has_groups()) {
    if (manager_->has_owner(owner)) manager_->free_slots(owner);
  } else if (const auto deref = sequence.free_signal()) {
    manager_->process_for_request(owner, *deref, 0);
  }
  sequence.reset_with_signal();
}

g1::G1Acquire RequestDriver::allocate_collecting(g1::OwnerId owner, ActiveSequence& sequence,
                                                 std::size_t cumulative_tokens, std::size_t& manager_calls) {
  for (;;) {
    const g1::G1Acquire acquire = allocate(owner, sequence, cumulative_tokens);
    ++manager_calls;
    if (acquire.is_ready()) return acquire;
    const bool blocked = acquire.kind == g1::G1Acquire::Kind::BlockedOnOffload;
    if (!blocked && manager_->offload_stats().quarantined == 0) return acquire;
    manager_->collect_offloads(true);  // the swap-out ends and its pages come back first
  }
}

SwapInOutcome RequestDriver::swap_in_prefix(const ActiveSequence& sequence, std::size_t prompt_tokens) {
  SwapInOutcome outcome;
  if (!manager_->has_offload_engine()) return outcome;
  // What one attempt pins in G1 and fetches from the tier (nothing to fetch: done).
  std::function<g1::SwapInPlan()> plan;
  std::vector<PositionalLineageHash> keys;
  if (manager_->has_groups()) {
    // Every group's blocks of the fixed point over G1 and the tier.
    plan = [&] {
      ++outcome.manager_calls;
      return manager_->group_swap_in_plan(sequence, prompt_tokens);
    };
  } else {
    // The blocks right after the G1 prefix, of the prompt's full blocks.
    const std::size_t block_size = manager_->block_size();
    const std::size_t full = std::min(prompt_tokens / block_size, sequence.full_block_count());
    keys = manager_->tier_keys(sequence, full);
    plan = [&, block_size, full] {
      const std::size_t skip = manager_->get_prefill_cost(sequence).cached_tokens / block_size;
      if (skip >= full) return g1::SwapInPlan{};
      return g1::SwapInPlan{.tokens = full * block_size,
                            .pin = {keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(skip)},
                            .fetch = {keys.begin() + static_cast<std::ptrdiff_t>(skip), keys.end()}};
    };
  }
  // With groups a swap-in that stopped short (more blocks than G2 can land
  // at once) goes on in further rounds while each brings blocks: a hit is
  // only as long as every group's blocks of it.
  const int rounds = manager_->has_groups() ? 16 : 1;
  int blocked = 0;
  for (int round = 0; round < rounds;) {
    const g1::SwapInPlan keys_now = plan();
    if (keys_now.fetch.empty()) return outcome;
    auto pins = manager_->try_pin_g1_prefix(keys_now.pin);
    if (!pins) return outcome;
    const g1::SwapInStart start = manager_->try_batch_swap_in(keys_now.fetch, pins);
    outcome.manager_calls += 2;
    if (start.status == g1::SwapInStatus::BlockedOnG1Offload) {
      if (++blocked == 2) return outcome;  // a swap-out ahead of it: collected, tried once more
      manager_->collect_offloads(true);
      continue;
    }
    if (start.status != g1::SwapInStatus::Scheduled) return outcome;
    const std::size_t registered = manager_->register_completed_swap_in(start.swap_in_id).registered;
    ++outcome.manager_calls;
    outcome.registered += registered;
    outcome.from_lower += std::min(start.from_lower, registered);
    outcome.from_external += std::min(start.from_external, std::min(start.from_lower, registered));
    if (registered == 0 || start.count == keys_now.fetch.size()) return outcome;
    ++round;
  }
  return outcome;
}

Admission RequestDriver::admit(g1::OwnerId owner, ActiveSequence& sequence, std::size_t prompt_tokens,
                               std::size_t chunk_tokens) {
  Admission admission;
  const bool groups = manager_->has_groups();
  const std::size_t block_size = manager_->block_size();
  const bool tiered_groups = groups && manager_->has_offload_engine();
  const std::size_t before = tiered_groups ? manager_->get_prefill_cost(sequence).cached_tokens : 0;
  const SwapInOutcome swap_in = swap_in_prefix(sequence, prompt_tokens);
  admission.swapped_in_pages = swap_in.registered;
  admission.swapped_in = swap_in.registered;
  admission.swapped_in_from_lower = swap_in.from_lower;
  admission.swapped_in_from_external = swap_in.from_external;
  admission.manager_calls = swap_in.manager_calls;
  const std::size_t cached = manager_->get_prefill_cost(sequence).cached_tokens;
  if (tiered_groups) {
    // The blocks the swap-in added to the groups' hit; each lower tier's share of its pages.
    admission.swapped_in = cached > before ? (cached - before) / block_size : 0;
    const auto share = [&](std::size_t pages) {
      return swap_in.registered == 0 ? 0 : (admission.swapped_in * pages + swap_in.registered / 2) / swap_in.registered;
    };
    admission.swapped_in_from_lower = share(swap_in.from_lower);
    admission.swapped_in_from_external = std::min(share(swap_in.from_external), admission.swapped_in_from_lower);
  }
  // With groups the hit is the groups' fixed point over every token (a
  // preempted request's generated ones too, as vLLM's get_computed_blocks):
  // a shorter length need not be a hit in a window or Mamba group, so the
  // allocation takes all of it or nothing (allocate_groups).
  admission.cached_blocks =
      manager_->has_groups() ? cached / block_size : std::min(cached / block_size, prompt_tokens / block_size);
  const std::size_t target = std::min(sequence.len(), admission.cached_blocks * block_size + chunk_tokens);
  admission.acquire = allocate_collecting(owner, sequence, target, admission.manager_calls);
  if (admission.acquire.is_ready()) admission.allocated_to = target;
  return admission;
}

}  // namespace kvtier::driver
