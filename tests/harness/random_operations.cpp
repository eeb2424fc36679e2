#include "harness/random_operations.hpp"

#include <algorithm>
#include <tuple>

#include "kvtier/g1/g1_manager.hpp"

namespace kvtier::harness {
namespace {

constexpr std::uint64_t kChains = 3;
constexpr std::uint64_t kChainLength = 10;

std::uint64_t chain_hash(std::uint64_t chain, std::uint64_t index) { return chain * 1000 + index; }

}  // namespace

RandomOperations::RandomOperations(const TrialConfig& config) : config_(config), rng_(config.seed) {}

std::string RandomOperations::fresh_name(char prefix) {
  std::string name(1, prefix);  // built in place: GCC 12 warns falsely on "p" + std::to_string
  name += std::to_string(next_name_++);
  return name;
}

RandomOperations::Json RandomOperations::plh(std::uint64_t hash) {
  const std::uint64_t index = hash % 1000;
  Json out;
  out["hash"] = hash;
  out["parent"] = index > 1 ? Json(hash - 1) : Json(nullptr);
  out["position"] = index - 1;
  return out;
}

std::string RandomOperations::owner_label(const script::ScriptRunner& runner) {
  if (chance(85)) {
    // Raw ops on a sequence's owner mostly break that sequence: keep them rare.
    std::vector<std::string> holders;
    for (const auto& owner : owners_) {
      if (!table_of(runner, owner).empty()) holders.push_back(owner);
    }
    for (const auto& owner : sequence_owners_) {
      if ((holders.empty() || chance(10)) && !table_of(runner, owner).empty()) holders.push_back(owner);
    }
    if (!holders.empty()) return one_of(holders);
  }
  if (!sequence_owners_.empty() && chance(25)) return one_of(sequence_owners_);
  return one_of(owners_);
}

std::string RandomOperations::sequence_name(bool generable) {
  std::vector<std::string> names;
  for (const auto& [name, state] : live_) {
    if (!generable || state.allocated == state.length) names.push_back(name);
  }
  if (names.empty() || chance(4)) return sequences_.empty() || chance(30) ? "nosuch" : one_of(sequences_);
  return one_of(names);
}

std::string RandomOperations::reservation_name(std::vector<std::string>& names, const char* prefix) {
  if (names.empty() || chance(5)) return std::string(prefix) + "none";
  return one_of(names);
}

bool RandomOperations::worth_trying(const std::vector<std::string>& names) { return !names.empty() || chance(15); }

std::vector<RandomOperations::Json> RandomOperations::table_of(const script::ScriptRunner& runner,
                                                               const std::string& owner) const {
  std::vector<Json> blocks;
  const auto id = runner.owner_id(owner);
  if (!id || !runner.manager()->has_owner(*id)) return blocks;
  if (runner.manager()->has_groups()) {  // pages per group, no block identities: group 0's stand for the table
    for (const PageId page : runner.manager()->block_table(*id, 0)) blocks.push_back(Json(page.value()));
    return blocks;
  }
  for (const UniqueBlock& b : runner.manager()->owned_blocks(*id)) {
    blocks.push_back(b.is_full() ? Json(b.hash().value()) : Json(runner.partial_label(b.uuid())));
  }
  return blocks;
}

RandomOperations::Json RandomOperations::use(const script::ScriptRunner& runner) {
  Json op;
  op["op"] = "use";
  op["owner"] = owner_label(runner);
  const std::uint64_t chain = pick(kChains);
  const std::uint64_t first = 1 + pick(kChainLength - 1);
  const std::uint64_t count = std::min<std::uint64_t>(pick(4), kChainLength + 1 - first);
  Json blocks = Json::array();
  Json locals = Json::array();
  Json plhs = Json::array();
  Json tokens = Json::array();
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint64_t hash = chain_hash(chain, first + i);
    blocks.push_back(hash);
    locals.push_back(hash + 7);
    plhs.push_back(plh(hash));
    tokens.push_back(Json(std::vector<std::uint32_t>(config_.block_size, static_cast<std::uint32_t>(hash))));
  }
  if (chance(35)) {
    // A partial tail: mostly a fresh label; sometimes one that is live (refused).
    const auto table = table_of(runner, one_of(owners_));
    if (!table.empty() && table.back().is_string() && chance(30)) {
      blocks.push_back(table.back());
    } else {
      blocks.push_back(fresh_name('p'));
    }
  }
  op["blocks"] = blocks;
  if (chance(80)) op["local_hashes"] = locals;
  // Every hash keeps its one lineage hash (as real hashes do): omitting plhs
  // would give root PLHs that disagree with the chain's.
  if (chance(5) && !plhs.empty()) plhs.erase(plhs.end() - 1);  // misaligned: refused
  op["plhs"] = plhs;
  if (first > 1 && chance(80)) op["parent"] = chain_hash(chain, first - 1);
  if (chance(15)) {
    if (chance(20) && !tokens.empty()) tokens.back().push_back(1);  // one token too many: refused
    op["token_ids"] = tokens;
  }
  if (count > 0 && chance(10)) op["reuse"] = 1 + pick(count);
  return op;
}

RandomOperations::Json RandomOperations::deref(const script::ScriptRunner& runner) {
  Json op;
  op["op"] = "deref";
  op["owner"] = owner_label(runner);
  const auto table = table_of(runner, op["owner"].get<std::string>());
  Json blocks = Json::array();
  if (!table.empty() && chance(85)) {
    const std::size_t count = 1 + pick(table.size());
    for (std::size_t i = 0; i < count; ++i) blocks.push_back(table[table.size() - 1 - i]);
  } else {
    blocks.push_back(chain_hash(pick(kChains), 1 + pick(kChainLength)));
  }
  op["blocks"] = blocks;
  return op;
}

RandomOperations::Json RandomOperations::promote(const script::ScriptRunner& runner) {
  Json op;
  op["op"] = "promote";
  op["owner"] = owner_label(runner);
  const auto table = table_of(runner, op["owner"].get<std::string>());
  const bool has_partial = !table.empty() && table.back().is_string();
  op["partial"] = has_partial ? table.back() : Json(fresh_name('p'));
  std::uint64_t hash = chain_hash(pick(kChains), 1 + pick(kChainLength));
  if (table.size() >= 2 && table[table.size() - 2].is_number() && chance(70)) {
    const std::uint64_t parent = table[table.size() - 2].get<std::uint64_t>();
    if (parent % 1000 < kChainLength) hash = parent + 1;  // the chain's next block
    op["parent"] = parent;
  }
  op["hash"] = hash;
  op["local"] = hash + 7;
  op["plh"] = plh(hash);
  if (chance(10)) op["token_ids"] = std::vector<std::uint32_t>(config_.block_size + (chance(30) ? 1 : 0), 5);
  return op;
}

RandomOperations::Json RandomOperations::finalize(const script::ScriptRunner& runner) {
  Json op;
  op["op"] = "finalize";
  const bool with_sequence = !sequences_.empty() && chance(40);
  std::size_t index = 0;
  if (with_sequence) {
    index = pick(sequences_.size());
    op["owner"] = sequence_owners_[index];
  } else {
    op["owner"] = owner_label(runner);
  }
  const std::size_t blocks = table_of(runner, op["owner"].get<std::string>()).size();
  const std::uint64_t before = pick(blocks + 1) * config_.block_size;
  const std::uint64_t after = before + pick(blocks + 2) * config_.block_size;
  op["before"] = chance(5) ? after + 1 : before;
  op["after"] = after;
  if (with_sequence) op["sequence"] = sequences_[index];
  return op;
}

RandomOperations::Json RandomOperations::sequence() {
  Json op;
  op["op"] = "sequence";
  const std::string id = fresh_name('s');
  const std::string owner = chance(90) ? "r" + id : one_of(owners_);
  op["id"] = id;
  op["owner"] = owner;
  const std::uint64_t start = 64 * pick(3);  // three prompts that share prefixes
  op["token_range"] = {start, start + 1 + pick(4 * config_.block_size)};
  op["max_output"] = pick(3 * config_.block_size);
  if (chance(20)) op["emit_token_ids"] = true;
  sequences_.push_back(id);
  sequence_owners_.push_back(owner);
  return op;
}

RandomOperations::Json RandomOperations::chain_keys(std::uint64_t chain, std::uint64_t first,
                                                    std::uint64_t count) const {
  Json keys = Json::array();
  for (std::uint64_t i = 0; i < count && first + i <= kChainLength; ++i) {
    const std::uint64_t hash = chain_hash(chain, first + i);
    keys.push_back(config_.backend == "kvbm" ? plh(hash) : Json(hash));
  }
  return keys;
}

RandomOperations::Json RandomOperations::offload(const script::ScriptRunner& runner) {
  // Mostly start where something is: a block resident in G2 (swap-in) or in G1 (pins).
  const auto resident = [&](bool host) {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> found;  // chain, index
    for (std::uint64_t chain = 0; chain < kChains; ++chain) {
      for (std::uint64_t index = 1; index <= kChainLength; ++index) {
        const SequenceHash hash(chain_hash(chain, index));
        if (host ? runner.manager()->is_host_cached(hash) : runner.manager()->is_cached(hash)) {
          found.emplace_back(chain, index);
        }
      }
    }
    return found;
  };
  Json op;
  const std::uint64_t roll = pick(100);
  if (roll < 30) {
    op["op"] = "wait_offload";
  } else if (roll < 38) {
    op["op"] = "host_cached";
    op["hashes"] = {chain_hash(pick(kChains), 1 + pick(kChainLength))};
  } else if (roll < 50) {
    op["op"] = "pin_prefix";
    op["id"] = chance(5) && !pins_.empty() ? one_of(pins_) : fresh_name('q');  // a label in use: refused
    const auto in_g1 = resident(false);
    if (chance(25)) {
      op["plhs"] = Json::array();
    } else if (!in_g1.empty() && chance(75)) {
      const auto [chain, index] = one_of(in_g1);
      const std::uint64_t first = 1 + pick(index);
      op["plhs"] = chain_keys(chain, first, index - first + 1);
    } else {
      op["plhs"] = chain_keys(pick(kChains), 1, 1 + pick(3));
    }
  } else if (roll < 72) {
    // A chain's blocks after a prefix: the prefix pinned in G1, the rest from G2.
    const auto in_g2 = resident(true);
    std::uint64_t chain = pick(kChains);
    std::uint64_t first = 1 + pick(4);
    if (!in_g2.empty() && chance(80)) std::tie(chain, first) = one_of(in_g2);
    op["op"] = "swap_in";
    op["id"] = fresh_name('w');
    op["plhs"] = chain_keys(chain, first, 1 + pick(4));
    if (!pins_.empty() && chance(60)) op["pins"] = one_of(pins_);
  } else if (roll < 86) {
    op["op"] = "register_swap_in";
    op["id"] = swap_ins_.empty() || chance(5) ? "wnone" : one_of(swap_ins_);
  } else if (roll < 95) {
    op["op"] = "cancel_swap_in";
    op["id"] = swap_ins_.empty() || chance(5) ? "wnone" : one_of(swap_ins_);
  } else {
    op["op"] = "inject_fault";
    op["copy_batch"] = 1 + pick(3);
  }
  return op;
}

std::string RandomOperations::malformed() {
  static const std::vector<std::string> kLines = {
      R"({"op":"use","owner":"a","blocks":[1])",
      R"([1,2,3])",
      R"({"op":42})",
      R"({"op":"use","owner":"a","blocks":[-3]})",
      "{\"op\":\"use\",\"owner\":\"a\xff\",\"blocks\":[1]}",
      R"({"op":"nope"})",
      R"({"op":"use","owner":"a","blocks":[1],"x":1e999})",
      R"({"op":"sequence","id":"big","owner":"a","token_range":[0,4294967295]})",
      R"({"op":"use","owner":"a","blocks":["A#9"]})",
      R"({"op":"stats","junk":"\u0000"})",
      std::string("{\"op\":\"stats\"}\0tail", 19),
      R"({"op":"reserve_decode","id":"x","count":-1})",
      R"({"op":"init","capacity":4,"block_size":4})",
  };
  return one_of(kLines);
}

std::string RandomOperations::next_grouped(const script::ScriptRunner& runner) {
  if (config_.host_blocks > 0 && chance(12)) return offload(runner).dump();
  Json op;
  const std::uint64_t roll = pick(100);
  if (roll < 14) {
    op = sequence();
  } else if (roll < 34) {
    op["op"] = "allocate";
    op["sequence"] = sequence_name();
    const auto live = live_.find(op["sequence"].get<std::string>());
    const std::uint64_t len = live == live_.end() ? 1 : live->second.length;
    op["tokens"] = chance(70) ? len : pick(len + 2);
    // A reuse the hit allows now and then, more often one it does not.
    if (chance(25)) op["reuse"] = pick(4);
  } else if (roll < 50) {
    op["op"] = "finalize";
    op["sequence"] = sequence_name();
    const auto live = live_.find(op["sequence"].get<std::string>());
    const std::uint64_t allocated = live == live_.end() ? 0 : live->second.allocated;
    const auto index = std::find(sequences_.begin(), sequences_.end(), op["sequence"].get<std::string>());
    op["owner"] = index == sequences_.end() ? one_of(owners_) : sequence_owners_[index - sequences_.begin()];
    op["before"] = 0;
    op["after"] = chance(80) ? allocated : pick(allocated + 3);
  } else if (roll < 66) {
    op["op"] = "generate";
    op["sequence"] = sequence_name(chance(90));
    if (chance(95)) op["token"] = pick(1000);
  } else if (roll < 71) {
    op["op"] = chance(60) ? "free" : "drop";
    op["sequence"] = sequence_name();
  } else if (roll < 76) {
    op["op"] = "prefill_cost";
    op["sequence"] = sequence_name();
  } else if (roll < 80) {
    op["op"] = "stats";
  } else if (roll < 93) {
    op["op"] = chance(60) ? "write" : (chance(50) ? "verify" : "block_table");
    op["owner"] = sequence_owners_.empty() || chance(5) ? one_of(owners_) : one_of(sequence_owners_);
    if (op["op"] == "block_table") op["group"] = pick(4);
  } else if (roll < 96) {
    op = use(runner);  // refused: a manager with groups takes no signals
  } else {
    return malformed();
  }
  return op.dump();
}

std::string RandomOperations::next(const script::ScriptRunner& runner) {
  if (!config_.groups.empty()) return next_grouped(runner);
  Json op;
  if (config_.host_blocks > 0 && chance(12)) return offload(runner).dump();
  const std::uint64_t roll = pick(100);
  if (roll < 17) {
    op = use(runner);
  } else if (roll < 30) {
    op = deref(runner);
  } else if (roll < 35) {
    op = promote(runner);
  } else if (roll < 41) {
    op = finalize(runner);
  } else if (roll < 46) {
    op = sequence();
  } else if (roll < 53) {
    op["op"] = "allocate";
    op["sequence"] = sequence_name();
    const auto live = live_.find(op["sequence"].get<std::string>());
    const std::uint64_t len = live == live_.end() ? 1 : live->second.length;
    const std::uint64_t roll_tokens = pick(100);
    op["tokens"] = roll_tokens < 60 ? len : roll_tokens < 88 ? pick(len + 1) : len + 1 + pick(3);
  } else if (roll < 66) {
    op["op"] = "generate";
    op["sequence"] = sequence_name(chance(90));
    if (chance(95)) op["token"] = pick(1000);
  } else if (roll < 69) {
    op["op"] = chance(60) ? "free" : "drop";
    op["sequence"] = sequence_name();
  } else if (roll < 71) {
    op["op"] = "prefill_cost";
    op["sequence"] = sequence_name();
  } else if (roll < 74) {
    op["op"] = "reserve_decode";
    op["id"] = fresh_name('d');
    op["count"] = pick(4);
  } else if (roll < 78 && worth_trying(decode_reservations_)) {
    op["op"] = "decode_use";
    op["owner"] = owner_label(runner);
    op["reservation"] = reservation_name(decode_reservations_, "d");
    op["blocks"] = {fresh_name('p')};
  } else if (roll < 80 && worth_trying(decode_reservations_)) {
    op["op"] = "release_decode";
    op["reservation"] = reservation_name(decode_reservations_, "d");
  } else if (roll < 82) {
    op["op"] = "reserve_destination";
    op["id"] = fresh_name('t');
    op["sequence"] = sequence_name();
  } else if (roll < 85 && worth_trying(destinations_)) {
    op["op"] = chance(60) ? "activate_destination" : "cancel_destination";
    op["reservation"] = reservation_name(destinations_, "t");
  } else if (roll < 87) {
    op["op"] = chance(50) ? "stats" : "cached";
    if (op["op"] == "cached") op["hashes"] = {chain_hash(pick(kChains), 1 + pick(kChainLength))};
  } else if (roll < 94) {
    op["op"] = chance(75) ? "write" : (chance(50) ? "verify" : "block_table");
    op["owner"] = owner_label(runner);
  } else if (roll < 98 && (config_.host_blocks > 0 || chance(10))) {
    op = offload(runner);
  } else {
    return malformed();
  }
  return op.dump();
}

void RandomOperations::observe(const std::string& line, const nlohmann::ordered_json& answer) {
  if (!answer.value("ok", false)) return;
  const auto op = nlohmann::json::parse(line, nullptr, false);
  if (!op.is_object() || !op.contains("op")) return;
  const std::string name = op["op"];
  const auto erase = [](std::vector<std::string>& names, const std::string& gone) { std::erase(names, gone); };
  if (name == "sequence") {
    live_[op["id"]].length = op["token_range"][1].get<std::uint64_t>() - op["token_range"][0].get<std::uint64_t>();
  } else if (name == "allocate" && answer.value("result", "") == "ready") {
    SequenceState& state = live_[op["sequence"]];
    state.allocated = std::max(state.allocated, op["tokens"].get<std::uint64_t>());
  } else if (name == "generate") {
    SequenceState& state = live_[op["sequence"]];
    ++state.length;
    const auto& signals = answer.at("signals");
    const bool released = !signals.empty() && signals.back() == "deref";
    if (answer.value("result", "") == "ready") state.allocated = released ? 0 : state.length;
  } else if (name == "free") {
    live_[op["sequence"]].allocated = 0;
  } else if (name == "drop") {
    live_.erase(op["sequence"].get<std::string>());
  } else if (name == "reserve_decode" && answer.value("result", "") == "ready") {
    decode_reservations_.push_back(op["id"]);
  } else if (name == "release_decode") {
    erase(decode_reservations_, op["reservation"]);
  } else if (name == "reserve_destination" && answer.value("result", "") == "ready") {
    destinations_.push_back(op["id"]);
    destination_sequences_[op["id"]] = op["sequence"];
  } else if (name == "pin_prefix" && answer.value("result", "") == "pinned") {
    pins_.push_back(op["id"]);
  } else if (name == "swap_in") {
    if (op.contains("pins")) erase(pins_, op["pins"]);  // consumed by every answer
    if (answer.value("result", "") == "scheduled") swap_ins_.push_back(op["id"]);
  } else if (name == "register_swap_in" || name == "cancel_swap_in") {
    erase(swap_ins_, op["id"]);
  } else if (name == "activate_destination" || name == "cancel_destination") {
    erase(destinations_, op["reservation"]);
    if (name == "activate_destination") {
      SequenceState& state = live_[destination_sequences_[op["reservation"]]];
      state.allocated = state.length;  // the prompt: nothing was generated before activation here
    }
  }
}

}  // namespace kvtier::harness
