// Script operations driven by an ActiveSequence: creation, allocation,
// decode, release, prefill cost and the destination (disaggregated) flow.
#include <xxhash.h>

#include <algorithm>

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
  const auto blocks = entry.sequence.blocks();
  std::erase_if(entry.labelled, [&](const Uuid& uuid) {
    const bool still_partial = std::any_of(blocks.begin(), blocks.end(),
                                           [&](const UniqueBlock& b) { return b.is_partial() && b.uuid() == uuid; });
    if (!still_partial) forget_label(uuid);  // promoted: its label names nothing any more
    return !still_partial;
  });
  for (const UniqueBlock& b : blocks) {
    if (b.is_full() || label_by_partial_.contains(b.uuid())) continue;
    add_label(id + "#" + std::to_string(entry.partials_labelled++), b.uuid());
    entry.labelled.push_back(b.uuid());
  }
}

Json ScriptRunner::State::op_sequence(const Fields& f) {
  // One short line must not ask for gigabytes: bound before building anything.
  constexpr std::uint64_t kMaxSequenceTokens = std::uint64_t{1} << 22;
  const std::string id = f.string("id");
  if (sequences_.contains(id)) f.fail("sequence '" + id + "' already exists");
  if (manager_->has_groups() && owner_id(f.string("owner")) && find_sequence_of(*owner_id(f.string("owner")))) {
    f.fail("owner '" + f.string("owner") + "' has a sequence: a manager with KV cache groups keeps one per owner");
  }
  const std::uint64_t max_output = f.u64_or("max_output", 0);
  if (max_output > kMaxSequenceTokens) f.fail("max_output must be at most " + std::to_string(kMaxSequenceTokens));
  std::vector<TokenId> tokens;
  if (f.has("tokens")) {
    tokens = *f.optional_tokens("tokens");
  } else if (f.has("token_range")) {
    const auto range = f.u64_list_or_empty("token_range");
    if (range.size() != 2 || range[0] > range[1] || range[1] > 0xFFFFFFFFULL) {
      f.fail("field 'token_range' must be [first, end) with first <= end");
    }
    if (range[1] - range[0] > kMaxSequenceTokens) {
      f.fail("a sequence holds at most " + std::to_string(kMaxSequenceTokens) + " prompt tokens");
    }
    for (std::uint64_t t = range[0]; t < range[1]; ++t) tokens.push_back(static_cast<TokenId>(t));
  } else {
    f.fail("a sequence needs 'tokens' or 'token_range'");
  }
  if (tokens.empty()) f.fail("a sequence needs at least one prompt token");
  if (tokens.size() > kMaxSequenceTokens)
    f.fail("a sequence holds at most " + std::to_string(kMaxSequenceTokens) + " prompt tokens");
  auto planned_output = f.optional_tokens("planned_output").value_or(std::vector<TokenId>{});
  const bool emit_token_ids = f.boolean_or("emit_token_ids", false);
  const g1::OwnerId id_owner = owner(f);
  ActiveSequence sequence(std::move(tokens),
                          ActiveSequenceConfig{.block_size = manager_->block_size(),
                                               .max_output_tokens = max_output,
                                               .enable_prefix_caching = manager_->enable_prefix_caching(),
                                               .emit_token_ids = emit_token_ids,
                                               .planned_output = std::move(planned_output),
                                               .seed = XXH3_64bits_withSeed(id.data(), id.size(), seed_)});
  ScriptSequence& entry =
      sequences_
          .emplace(id,
                   ScriptSequence{
                       .sequence = std::move(sequence), .owner = id_owner, .partials_labelled = 0, .labelled = {}})
          .first->second;
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
  // The script's `reuse` is what the caller says (0 by default), never guessed.
  return acquire_json(driver().allocate(entry.owner, entry.sequence, tokens, f.u64_or("reuse", 0)));
}

Json ScriptRunner::State::op_generate(const Fields& f) {
  const std::string id = f.string("sequence");
  ScriptSequence& entry = sequence(f);
  if (!f.has("token") && !entry.sequence.has_planned_output()) {
    f.fail("generate needs 'token' once the planned output is used up");
  }
  const std::optional<TokenId> token =
      f.has("token") ? std::optional<TokenId>(f.as_token(f.raw("token"), "field 'token'")) : std::nullopt;
  driver::DecodeStep step;
  try {
    step = driver().decode(entry.owner, entry.sequence, token);
  } catch (const ContractError& error) {
    f.fail("sequence '" + id + "': " + error.what());
  }
  label_partials(entry, id);
  Json names = Json::array();
  for (const MoveBlock& signal : step.signals) names.push_back(signal_name(signal));
  Json out;
  out["signals"] = names;
  // On capacity_exhausted the token and the signals before the stopped Use
  // stay applied; `allocate` retries the block before the next generate.
  out["result"] = acquire_json(step.acquire).at("result");
  if (step.acquire.kind == g1::G1Acquire::Kind::BlockedOnOffload) out["offload"] = step.acquire.offload_id;
  out["applied"] = step.applied;
  return out;
}

Json ScriptRunner::State::op_free(const Fields& f) {
  ScriptSequence& entry = sequence(f);
  driver().release(entry.owner, entry.sequence);
  return Json::object();
}

Json ScriptRunner::State::op_drop(const Fields& f) {
  const std::string id = f.string("sequence");
  ScriptSequence& entry = sequence(f);
  for (const auto& [name, destination] : destinations_) {
    if (destination.sequence == id) {
      f.fail("sequence '" + id + "' has destination reservation '" + name + "': activate or cancel it first");
    }
  }
  driver().release(entry.owner, entry.sequence);
  for (const Uuid& uuid : entry.labelled) forget_label(uuid);
  sequences_.erase(id);
  return Json::object();
}

Json ScriptRunner::State::op_prefill_cost(const Fields& f) {
  const g1::PrefillCost cost = manager_->get_prefill_cost(sequence(f).sequence);
  Json out;
  out["new_blocks"] = cost.new_blocks;
  out["new_tokens"] = cost.new_tokens;
  out["cached_tokens"] = cost.cached_tokens;
  out["active_cached_tokens"] = cost.active_cached_tokens;
  if (manager_->has_groups()) out["uncached_common_prefix_tokens"] = cost.uncached_common_prefix_tokens;
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
