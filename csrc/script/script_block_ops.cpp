// Script operations on blocks and owners: use, deref, promote, finalize, the
// decode reservation, and the read/write ops on the owner's pages.
#include <xxhash.h>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"
#include "kvtier/session/disk_tier_factory.hpp"
#include "script_state.hpp"

namespace kvtier::script {
namespace {

g1::OwnerId existing_owner(const std::map<std::string, g1::OwnerId>& owners, const g1::G1Manager& manager,
                           const Fields& f) {
  const std::string label = f.string("owner");
  const auto it = owners.find(label);
  KVTIER_EXPECTS(it != owners.end() && manager.has_owner(it->second), "unknown owner '" + label + "'");
  return it->second;
}

/// Page ids, `null` where the null page stands.
Json page_list(std::span<const PageId> pages, std::optional<PageId> null_page = std::nullopt) {
  Json list = Json::array();
  for (PageId page : pages) list.push_back(page == null_page ? Json(nullptr) : Json(page.value()));
  return list;
}

}  // namespace

UseSignal ScriptRunner::State::use_signal(const Fields& f) {
  UseSignal use;
  use.blocks = blocks(f, "blocks");
  for (std::uint64_t local : f.u64_list_or_empty("local_hashes")) use.local_hashes.emplace_back(local);
  if (f.has("plhs")) {
    const auto& plhs = f.raw("plhs");
    if (!plhs.is_array()) f.fail("field 'plhs' must be a list");
    for (const auto& item : plhs) use.plhs.push_back(plh(f, item, "every entry of 'plhs'"));
  } else {
    for (const UniqueBlock& b : use.blocks) {
      if (b.is_full()) use.plhs.emplace_back(b.hash(), std::nullopt, 0);
    }
  }
  use.token_ids = f.optional_token_lists("token_ids");
  if (f.has("parent")) use.parent = block(f, f.raw("parent"), "field 'parent'");
  return use;
}

Json ScriptRunner::State::op_use(const Fields& f, bool decode) {
  const g1::OwnerId id = owner(f);
  const UseSignal use = use_signal(f);
  const std::uint64_t reuse = f.u64_or("reuse", 0);
  if (!decode) return acquire_json(manager_->process_for_request(id, use, reuse));
  if (reuse != 0) f.fail("decode_use cannot reuse a prefix");
  const std::string name = f.string("reservation");
  const auto it = decode_reservations_.find(name);
  if (it == decode_reservations_.end()) f.fail("unknown decode reservation '" + name + "'");
  return acquire_json(manager_->process_decode_signal_for_request(id, use, it->second));
}

Json ScriptRunner::State::op_deref(const Fields& f) {
  const g1::OwnerId id = existing_owner(owners_, *manager_, f);
  manager_->process_for_request(id, DerefSignal{blocks(f, "blocks")});
  return Json::object();
}

Json ScriptRunner::State::op_promote(const Fields& f) {
  const g1::OwnerId id = existing_owner(owners_, *manager_, f);
  const std::string label = f.string("partial");
  const auto it = partial_by_label_.find(label);
  KVTIER_EXPECTS(it != partial_by_label_.end(), "partial block not found: '" + label + "'");
  const SequenceHash hash(f.u64("hash"));
  PromoteSignal promote{
      .uuid = it->second,
      .hash = hash,
      .parent = f.has("parent") ? std::optional<SequenceHash>(SequenceHash(f.u64("parent"))) : std::nullopt,
      .local = LocalBlockHash(f.u64_or("local", 0)),
      .plh = f.has("plh") ? plh(f, f.raw("plh"), "field 'plh'") : PositionalLineageHash(hash, std::nullopt, 0),
      .token_ids = f.optional_tokens("token_ids")};
  manager_->process_for_request(id, promote);
  return Json::object();
}

Json ScriptRunner::State::op_finalize(const Fields& f) {
  const g1::OwnerId id = existing_owner(owners_, *manager_, f);
  const std::uint64_t before = f.u64("before");
  const std::uint64_t after = f.u64("after");
  if (!f.has("sequence")) {
    manager_->finalize_computed_prefix(id, before, after);
    return Json::object();
  }
  ScriptSequence& entry = sequence(f);
  if (entry.owner != id) f.fail("sequence '" + f.string("sequence") + "' belongs to another owner");
  driver().finalize(id, entry.sequence, before, after);
  label_partials(entry, f.string("sequence"));
  return Json::object();
}

Json ScriptRunner::State::op_reserve_decode(const Fields& f) {
  const std::string name = f.string("id");
  if (decode_reservations_.contains(name)) f.fail("decode reservation '" + name + "' already exists");
  const auto reservation = manager_->reserve_decode_blocks(f.u64("count"));
  Json out;
  out["result"] = reservation ? "ready" : "capacity_exhausted";
  if (reservation) decode_reservations_.emplace(name, *reservation);
  return out;
}

Json ScriptRunner::State::op_release_decode(const Fields& f) {
  const std::string name = f.string("reservation");
  const auto it = decode_reservations_.find(name);
  if (it == decode_reservations_.end()) f.fail("unknown decode reservation '" + name + "'");
  g1::DecodeReservation reservation = it->second;
  manager_->release_decode_reservation(std::move(reservation));
  decode_reservations_.erase(it);
  return Json::object();
}

Json ScriptRunner::State::op_stats(const Fields&) {
  const g1::G1Metrics metrics = manager_->metrics();
  Json out;
  out["active"] = metrics.active_blocks;
  out["active_refs"] = metrics.active_block_refs;
  out["inactive"] = metrics.inactive_blocks;
  out["active_perc"] = metrics.active_perc();
  out["capacity"] = manager_->max_capacity();
  out["block_size"] = manager_->block_size();
  out["dp_rank"] = manager_->dp_rank();
  if (manager_->geometry() != nullptr) {
    Json groups = Json::array();
    for (const g1::GroupUsage& group : manager_->group_usage()) {
      groups.push_back({{"active", group.active}, {"inactive", group.inactive}});
    }
    out["groups"] = std::move(groups);
  }
  const g1::OffloadStats offload = manager_->offload_stats();
  out["host_used"] = offload.tier.used;
  out["host_capacity"] = offload.tier.capacity;
  out["offloads_in_flight"] = offload.tier.in_flight;
  out["quarantined"] = offload.quarantined;
  for (const auto& [name, value] : session_->lower_tier_counters()) out[name] = value;
  return out;
}

Json ScriptRunner::State::op_cached(const Fields& f) {
  Json cached = Json::array();
  const auto& hashes = f.raw("hashes");
  if (!hashes.is_array()) f.fail("field 'hashes' must be a list");
  for (const auto& hash : hashes) cached.push_back(manager_->is_cached(SequenceHash(f.as_u64(hash, "every hash"))));
  Json out;
  out["cached"] = std::move(cached);
  return out;
}

Json ScriptRunner::State::op_block_table(const Fields& f) {
  Json out;
  const g1::OwnerId owner = existing_owner(owners_, *manager_, f);
  const std::uint64_t group = f.u64_or("group", 0);
  if (group >= manager_->group_count()) {
    f.fail("group " + std::to_string(group) + " is not one of the manager's " +
           std::to_string(manager_->group_count()) + " groups");
  }
  out["pages"] = page_list(manager_->block_table(owner, group), manager_->null_page());
  return out;
}

std::uint64_t ScriptRunner::State::pattern_identity(const UniqueBlock& block) const {
  if (block.is_full()) return session::Session::pattern_identity(block);
  const std::string label = partial_label(block.uuid());
  return XXH3_64bits(label.data(), label.size());
}

std::vector<std::uint64_t> ScriptRunner::State::pattern_identities(g1::OwnerId owner) const {
  std::vector<std::uint64_t> identities;
  for (const UniqueBlock& b : manager_->owned_blocks(owner)) identities.push_back(pattern_identity(b));
  return identities;
}

const ActiveSequence* ScriptRunner::State::find_sequence_of(g1::OwnerId owner) const {
  for (const auto& [name, entry] : sequences_) {
    if (entry.owner == owner) return &entry.sequence;
  }
  return nullptr;
}

std::optional<g1::GroupPatterns> ScriptRunner::State::owner_patterns(const std::string& label) const {
  const auto id = owner_id(label);
  if (!id || !manager_->has_owner(*id)) return std::nullopt;
  const ActiveSequence* sequence = find_sequence_of(*id);
  if (sequence == nullptr) return std::nullopt;
  g1::GroupPatterns all;
  for (std::size_t g = 0; g < manager_->group_count(); ++g) {
    const g1::GroupPatterns group = manager_->group_patterns(*id, *sequence, g);
    all.pages.insert(all.pages.end(), group.pages.begin(), group.pages.end());
    all.identities.insert(all.identities.end(), group.identities.begin(), group.identities.end());
  }
  return all;
}

std::vector<PageId> ScriptRunner::State::mismatched_patterns(std::span<const PageId> pages,
                                                             std::span<const std::uint64_t> identities) const {
  return session_->pool().find_pattern_mismatches(pages, identities);
}

const ActiveSequence& ScriptRunner::State::sequence_of(const Fields& f, g1::OwnerId owner) const {
  if (const ActiveSequence* sequence = find_sequence_of(owner)) return *sequence;
  f.fail("a manager with KV cache groups names its blocks by the owner's sequence: owner '" + f.string("owner") +
         "' has none");
}

Json ScriptRunner::State::write_groups(const Fields& f, g1::OwnerId owner) {
  Json written = Json::array();
  for (std::size_t g = 0; g < manager_->group_count(); ++g) {
    const g1::GroupPatterns patterns = manager_->group_patterns(owner, sequence_of(f, owner), g);
    session_->pool().fill_pattern(patterns.pages, patterns.identities);
    for (const PageId page : patterns.pages) written.push_back(page.value());
  }
  Json out;
  out["written"] = std::move(written);
  return out;
}

Json ScriptRunner::State::verify_groups(const Fields& f, g1::OwnerId owner) {
  std::size_t verified = 0;
  Json mismatches = Json::array();
  for (std::size_t g = 0; g < manager_->group_count(); ++g) {
    const g1::GroupPatterns patterns = manager_->group_patterns(owner, sequence_of(f, owner), g);
    verified += patterns.pages.size();
    for (const PageId page : session_->pool().find_pattern_mismatches(patterns.pages, patterns.identities)) {
      mismatches.push_back(page.value());
    }
  }
  Json out;
  out["verified"] = verified;
  out["mismatches"] = std::move(mismatches);
  return out;
}

Json ScriptRunner::State::op_write(const Fields& f) {
  const g1::OwnerId id = existing_owner(owners_, *manager_, f);
  if (manager_->has_groups()) return write_groups(f, id);
  const auto pages = manager_->block_table(id);
  session_->pool().fill_pattern(pages, pattern_identities(id));
  Json out;
  out["written"] = page_list(pages);
  return out;
}

std::vector<PageId> ScriptRunner::State::mismatched_pages(std::span<const PageId> pages,
                                                          std::span<const UniqueBlock> blocks) const {
  KVTIER_EXPECTS(pages.size() == blocks.size(), "verify needs one block per page");
  std::vector<std::uint64_t> identities;
  identities.reserve(blocks.size());
  for (const UniqueBlock& b : blocks) identities.push_back(pattern_identity(b));
  return session_->pool().find_pattern_mismatches(pages, identities);
}

Json ScriptRunner::State::op_verify(const Fields& f) {
  const g1::OwnerId id = existing_owner(owners_, *manager_, f);
  if (manager_->has_groups()) return verify_groups(f, id);
  const auto pages = manager_->block_table(id);
  Json out;
  out["verified"] = pages.size();
  out["mismatches"] = page_list(mismatched_pages(pages, manager_->owned_blocks(id)));
  return out;
}

}  // namespace kvtier::script
