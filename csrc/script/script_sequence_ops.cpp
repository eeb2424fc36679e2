// Script operations driven by an ActiveSequence: creation, allocation,
// decode, release, prefill cost and the destination (disaggregated) flow.
#include "kvtier/core/errors.hpp"
#include "script_state.hpp"

namespace kvtier::script {

ScriptRunner::State::ScriptSequence& ScriptRunner::State::sequence(const Fields& f, const char* name) {
  const std::string id = f.string(name);
  const auto it = sequences_.find(id);
  if (it == sequences_.end()) f.fail("unknown sequence '" + id + "'");
  return it->second;
}

void ScriptRunner::State::label_partials(ScriptSequence& entry, const std::string& id) {
  for (const UniqueBlock& b : entry.sequence.blocks()) {
    if (b.is_full() || label_by_partial_.contains(b.uuid())) continue;
    const std::string label = id + "#" + std::to_string(entry.partials_labelled++);
    label_by_partial_.emplace(b.uuid(), label);
    partial_by_label_.emplace(label, b.uuid());
  }
}

Json ScriptRunner::State::op_sequence(const Fields& f) {
  const std::string id = f.string("id");
  if (sequences_.contains(id)) f.fail("sequence '" + id + "' already exists");
  std::vector<TokenId> tokens;
  if (f.has("tokens")) {
    tokens = *f.optional_tokens("tokens");
  } else if (f.has("token_range")) {
    const auto range = f.u64_list_or_empty("token_range");
    if (range.size() != 2 || range[0] > range[1] || range[1] > 0xFFFFFFFFULL) {
      f.fail("field 'token_range' must be [first, end) with first <= end");
    }
    for (std::uint64_t t = range[0]; t < range[1]; ++t) tokens.push_back(static_cast<TokenId>(t));
  } else {
    f.fail("a sequence needs 'tokens' or 'token_range'");
  }
  if (tokens.empty()) f.fail("a sequence needs at least one prompt token");
  const g1::OwnerId id_owner = owner(f);
  ActiveSequence sequence(std::move(tokens),
                          ActiveSequenceConfig{.block_size = manager_->block_size(),
                                               .max_output_tokens = f.u64_or("max_output", 0),
                                               .enable_prefix_caching = manager_->enable_prefix_caching(),
                                               .emit_token_ids = f.boolean_or("emit_token_ids", false),
                                               .planned_output = f.optional_tokens("planned_output").value_or(
                                                   std::vector<TokenId>{})});
  ScriptSequence& entry =
      sequences_.emplace(id, ScriptSequence{.sequence = std::move(sequence), .owner = id_owner}).first->second;
  label_partials(entry, id);
  Json blocks = Json::array();
  for (std::size_t i = 0; i < entry.sequence.blocks().size(); ++i) {
    const UniqueBlock& b = entry.sequence.blocks()[i];
    Json item;
    if (b.is_full()) {
      item["hash"] = b.hash().value();
      item["local"] = entry.sequence.local_hash(i).value();
    } else {
      item["partial"] = partial_label(b.uuid());
    }
    blocks.push_back(std::move(item));
  }
  Json out;
  out["blocks"] = std::move(blocks);
  return out;
}

Json ScriptRunner::State::op_allocate(const Fields& f) {
  ScriptSequence& entry = sequence(f);
  const std::uint64_t tokens = f.u64("tokens");
  if (tokens > entry.sequence.len()) f.fail("cannot allocate past the sequence length");
  const auto use = entry.sequence.prepare_allocation(tokens);
  if (!use) {
    entry.sequence.commit_allocation(std::max<std::size_t>(tokens, entry.sequence.num_allocated_tokens()));
    return acquire_json(g1::G1Acquire::ready(0));
  }
  const g1::G1Acquire acquire = manager_->process_for_request(entry.owner, *use, f.u64_or("reuse", 0));
  if (acquire.is_ready()) entry.sequence.commit_allocation(tokens);
  return acquire_json(acquire);
}

Json ScriptRunner::State::op_generate(const Fields& f) {
  const std::string id = f.string("sequence");
  ScriptSequence& entry = sequence(f);
  if (!f.has("token") && !entry.sequence.has_planned_output()) {
    f.fail("generate needs 'token' once the planned output is used up");
  }
  const ActiveSequence backup = entry.sequence;
  const std::vector<MoveBlock> signals =
      f.has("token") ? entry.sequence.push(f.as_token(f.raw("token"), "field 'token'")) : entry.sequence.generate();
  Json names = Json::array();
  for (const MoveBlock& signal : signals) names.push_back(signal_name(signal));
  Json out;
  out["signals"] = names;
  out["result"] = "ready";
  for (std::size_t i = 0; i < signals.size(); ++i) {
    g1::G1Acquire acquire;
    try {
      acquire = manager_->process_for_request(entry.owner, signals[i], 0);
    } catch (...) {
      if (i == 0) entry.sequence = backup;  // nothing reached the manager: undo the token too
      throw;
    }
    if (!acquire.is_ready()) {
      // The token stays; its block could not be allocated (the caller frees or preempts).
      out["result"] = "capacity_exhausted";
      label_partials(entry, id);
      return out;
    }
  }
  label_partials(entry, id);
  const bool released = !signals.empty() && std::holds_alternative<DerefSignal>(signals.back());
  entry.sequence.commit_allocation(released ? 0 : entry.sequence.len());
  return out;
}

Json ScriptRunner::State::op_free(const Fields& f) {
  ScriptSequence& entry = sequence(f);
  if (const auto deref = entry.sequence.free_signal()) manager_->process_for_request(entry.owner, *deref, 0);
  entry.sequence.reset_with_signal();
  return Json::object();
}

Json ScriptRunner::State::op_prefill_cost(const Fields& f) {
  const g1::PrefillCost cost = manager_->get_prefill_cost(sequence(f).sequence);
  Json out;
  out["new_blocks"] = cost.new_blocks;
  out["new_tokens"] = cost.new_tokens;
  out["cached_tokens"] = cost.cached_tokens;
  out["active_cached_tokens"] = cost.active_cached_tokens;
  return out;
}

Json ScriptRunner::State::op_reserve_destination(const Fields& f) {
  const std::string name = f.string("id");
  if (destinations_.contains(name)) f.fail("destination reservation '" + name + "' already exists");
  ScriptSequence& entry = sequence(f);
  const auto reservation = manager_->reserve_destination_at(entry.owner, entry.sequence);
  Json out;
  out["result"] = reservation ? "ready" : "capacity_exhausted";
  if (reservation) {
    out["transferable_prompt_tokens"] = reservation->transferable_prompt_tokens;
    destinations_.emplace(name, ScriptDestination{*reservation, f.string("sequence")});
  }
  return out;
}

Json ScriptRunner::State::op_activate_destination(const Fields& f) {
  const std::string name = f.string("reservation");
  const auto it = destinations_.find(name);
  if (it == destinations_.end()) f.fail("unknown destination reservation '" + name + "'");
  g1::DestinationReservation reservation = it->second.reservation;
  manager_->activate_destination(std::move(reservation));
  ActiveSequence& seq = sequences_.at(it->second.sequence).sequence;
  seq.commit_allocation(seq.num_input_tokens());
  destinations_.erase(it);
  return Json::object();
}

Json ScriptRunner::State::op_cancel_destination(const Fields& f) {
  const std::string name = f.string("reservation");
  const auto it = destinations_.find(name);
  if (it == destinations_.end()) f.fail("unknown destination reservation '" + name + "'");
  g1::DestinationReservation reservation = it->second.reservation;
  manager_->cancel_destination(std::move(reservation));
  destinations_.erase(it);
  return Json::object();
}

}  // namespace kvtier::script
