#include "harness/invariant_checker.hpp"

#include <algorithm>

#include "kvtier/core/errors.hpp"
#include "kvtier/g1/g1_manager.hpp"

namespace kvtier::harness {
namespace {

/// A device event's key: its hash, and its group when the manager has groups
/// (the same tokens are cached once per group).
std::uint64_t event_key(const nlohmann::ordered_json& event, std::uint64_t hash) {
  if (!event.contains("group")) return hash;
  std::uint64_t x = hash + 0x9E3779B97F4A7C15ULL * (event.at("group").get<std::uint64_t>() + 1);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  return x ^ (x >> 27);
}

}  // namespace

std::optional<std::string> InvariantChecker::check(const script::ScriptRunner& runner, const std::string& line,
                                                   const nlohmann::ordered_json& answer) {
  if (auto broken = check_answer(answer)) return broken;
  const bool ok = answer.at("ok").get<bool>();
  if (ok) {
    if (auto broken = check_events(answer.at("events"))) return broken;
  }
  if (runner.manager() == nullptr) return std::nullopt;
  if (auto broken = check_state(runner)) return broken;
  return check_bytes(runner, line, ok);
}

std::optional<std::string> InvariantChecker::check_answer(const nlohmann::ordered_json& answer) {
  if (!answer.is_object() || !answer.contains("ok") || !answer.at("ok").is_boolean()) return "an answer without 'ok'";
  if (answer.at("ok").get<bool>()) {
    if (!answer.contains("events") || !answer.at("events").is_array()) return "a success without an 'events' list";
    return std::nullopt;
  }
  if (!answer.contains("error") || !answer.at("error").is_string()) return "a refusal without an 'error' text";
  if (answer.contains("internal")) {
    return "the library reported a broken invariant: " + answer.at("error").get<std::string>();
  }
  return std::nullopt;
}

std::optional<std::string> InvariantChecker::check_events(const nlohmann::ordered_json& events) {
  for (const auto& event : events) {
    if (event.at("id").get<std::uint64_t>() != next_event_id_) {
      return "event id " + event.at("id").dump() + " where " + std::to_string(next_event_id_) + " was next";
    }
    ++next_event_id_;
    if (event.at("tier") == "host_pinned") {
      if (auto broken = check_host_event(event)) return broken;
      continue;
    }
    if (event.at("tier") != "device") return "an event of tier " + event.at("tier").dump();
    if (event.at("type") == "stored") {
      for (const auto& block : event.at("blocks")) {
        const std::uint64_t hash = event_key(event, block.at("hash").get<std::uint64_t>());
        seen_.insert(hash);
        if (!stored_.insert(hash).second && consistent_) {
          return "Stored of hash " + std::to_string(hash) + " that was stored already";
        }
      }
      if (event.contains("token_ids") && event.at("token_ids").size() != event.at("blocks").size()) {
        return "a Stored event whose token id lists do not align with its blocks";
      }
    } else if (event.at("type") == "removed") {
      if (event.at("hashes").empty()) return "an empty Removed event";
      for (const auto& value : event.at("hashes")) {
        const std::uint64_t hash = event_key(event, value.get<std::uint64_t>());
        seen_.insert(hash);
        if (stored_.erase(hash) == 0 && consistent_) {
          return "Removed of hash " + std::to_string(hash) + " that was not stored";
        }
      }
    } else {
      return "an event of type " + event.at("type").dump();
    }
  }
  return std::nullopt;
}

std::optional<std::string> InvariantChecker::check_host_event(const nlohmann::ordered_json& event) {
  // G2 stores one block per event and removes what it stored: it keys by
  // lineage, so a hash named under two lineage hashes may be held twice.
  if (event.at("type") == "stored") {
    if (event.at("blocks").size() != 1) return "a HostPinned Stored of other than one block";
    const std::uint64_t hash = event.at("blocks").at(0).at("hash").get<std::uint64_t>();
    host_seen_.insert(hash);
    if (!host_stored_.insert(event_key(event, hash)).second && consistent_)
      return "HostPinned Stored of hash " + std::to_string(hash) + " twice";
    ++host_copies_[hash];
    return std::nullopt;
  }
  for (const auto& value : event.at("hashes")) {
    const std::uint64_t hash = value.get<std::uint64_t>();
    host_seen_.insert(hash);
    if (host_stored_.erase(event_key(event, hash)) == 0 && consistent_) {
      return "HostPinned Removed of hash " + std::to_string(hash) + " that G2 did not store";
    }
    if (host_copies_[hash] > 0) --host_copies_[hash];
  }
  return std::nullopt;
}

std::optional<std::string> InvariantChecker::check_state(const script::ScriptRunner& runner) {
  const g1::G1Manager& manager = *runner.manager();
  try {
    manager.audit();
  } catch (const InvariantError& error) {
    return std::string("audit: ") + error.what();
  }
  if (manager.has_groups()) return check_groups(manager);
  for (const std::uint64_t hash : seen_) {
    if (consistent_ && manager.is_cached(SequenceHash(hash)) != stored_.contains(hash)) {
      return "hash " + std::to_string(hash) +
             (stored_.contains(hash) ? " is stored by the events but not cached"
                                     : " is cached but the events removed it");
    }
  }
  for (const std::uint64_t hash : host_seen_) {
    const bool stored = host_copies_[hash] > 0;
    if (consistent_ && manager.is_host_cached(SequenceHash(hash)) != stored) {
      return "hash " + std::to_string(hash) +
             (stored ? " is stored in G2 by the events but not resident"
                     : " is resident in G2 but the events removed it");
    }
  }
  if (!manager.has_offload_engine() && !host_seen_.empty()) return "HostPinned events without an offload tier";
  const g1::G1Metrics metrics = manager.metrics();
  if (metrics.active_blocks + metrics.inactive_blocks > manager.max_capacity())
    return "active + inactive exceed capacity";
  const g1::OffloadStats offload = manager.offload_stats();
  if (offload.tier.used > offload.tier.capacity) return "G2 holds more blocks than its capacity";
  std::size_t entries = 0;
  conflicted_.clear();
  std::map<std::uint32_t, UniqueBlock> holder;  // page -> the block a table lists on it
  for (const g1::OwnerId owner : manager.owners()) {
    const auto pages = manager.block_table(owner);
    const auto blocks = manager.owned_blocks(owner);
    entries += pages.size();
    for (std::size_t i = 0; i < pages.size(); ++i) {
      const auto [it, first] = holder.emplace(pages[i].value(), blocks[i]);
      if (first || (blocks[i].is_full() && it->second == blocks[i])) continue;
      if (consistent_ || blocks[i].is_partial() || it->second.is_partial()) {
        return "page " + std::to_string(pages[i].value()) + " is in two tables, not as one shared full block";
      }
      conflicted_.insert(pages[i].value());
    }
  }
  if (metrics.active_block_refs != entries) {
    return "active_refs " + std::to_string(metrics.active_block_refs) + " differ from the " + std::to_string(entries) +
           " table entries";
  }
  return std::nullopt;
}

std::optional<std::string> InvariantChecker::check_groups(const g1::G1Manager& manager) const {
  // The hybrid invariants: a page lives in one group's tables; two tables
  // share a page only as one cached block (a hit); the null page is never
  // cached, counted or held as a page; the counts agree with the tables.
  const g1::G1Metrics metrics = manager.metrics();
  const auto null_page = manager.null_page();
  if (!null_page) return "a manager with groups keeps no null page";
  std::set<std::uint32_t> cached;
  for (const auto& [page, hash] : manager.registered_blocks()) cached.insert(page.value());
  if (cached.contains(null_page->value())) return "the null page is cached";
  std::map<std::uint32_t, std::size_t> group_of;
  std::set<std::uint32_t> held;
  std::size_t entries = 0;
  for (const g1::OwnerId owner : manager.owners()) {
    for (std::size_t g = 0; g < manager.group_count(); ++g) {
      std::set<std::uint32_t> in_this_table;
      for (const PageId page : manager.block_table(owner, g)) {
        if (page == *null_page) continue;
        ++entries;
        const auto [it, first] = group_of.emplace(page.value(), g);
        if (!first && it->second != g) {
          return "page " + std::to_string(page.value()) + " is in group " + std::to_string(it->second) +
                 "'s and group " + std::to_string(g) + "'s tables";
        }
        if (!in_this_table.insert(page.value()).second) {
          return "page " + std::to_string(page.value()) + " twice in one table";
        }
        if (!held.insert(page.value()).second && !cached.contains(page.value())) {
          return "page " + std::to_string(page.value()) + " is in two tables but not cached (no hit shares it)";
        }
      }
    }
  }
  std::size_t active = 0;
  std::size_t inactive = 0;
  for (const g1::GroupUsage& group : manager.group_usage()) {
    active += group.active;
    inactive += group.inactive;
  }
  if (active != metrics.active_blocks || inactive != metrics.inactive_blocks) return "group usage differs from stats";
  if (active != held.size()) return "active pages differ from the pages the tables hold";
  if (metrics.active_block_refs != entries) return "active_refs differ from the table entries";
  if (active + inactive + 1 > manager.max_capacity()) return "held, cached and the null page exceed the capacity";
  return std::nullopt;
}

std::optional<std::string> InvariantChecker::check_bytes(const script::ScriptRunner& runner, const std::string& line,
                                                         bool ok) {
  const g1::G1Manager& manager = *runner.manager();
  if (manager.has_groups()) return check_group_bytes(runner, line, ok);
  const auto table = [&](const std::string& owner) -> std::optional<Written> {
    const auto id = runner.owner_id(owner);
    if (!id || !manager.has_owner(*id)) return std::nullopt;
    const auto pages = manager.block_table(*id);
    const auto blocks = manager.owned_blocks(*id);
    return Written{{pages.begin(), pages.end()}, {blocks.begin(), blocks.end()}};
  };
  for (auto it = written_.begin(); it != written_.end();) {
    const auto now = table(it->first);
    const bool shared_with_another_identity =
        std::any_of(it->second.pages.begin(), it->second.pages.end(),
                    [&](PageId page) { return conflicted_.contains(page.value()); });
    if (!now || now->pages != it->second.pages || now->blocks != it->second.blocks || shared_with_another_identity) {
      it = written_.erase(it);  // the owner changed: its new pages hold no promise yet
      continue;
    }
    const auto bad = runner.mismatched_pages(now->pages, now->blocks);
    if (!bad.empty()) {
      return "owner " + it->first + "'s page " + std::to_string(bad.front().value()) +
             " no longer holds what the owner wrote, though its table is unchanged";
    }
    ++it;
  }
  if (ok) {
    const auto op = nlohmann::json::parse(line, nullptr, false);
    if (op.is_object() && op.value("op", "") == "write") {
      if (auto now = table(op.at("owner").get<std::string>())) written_[op.at("owner")] = std::move(*now);
    }
  }
  return std::nullopt;
}

std::optional<std::string> InvariantChecker::check_group_bytes(const script::ScriptRunner& runner,
                                                               const std::string& line, bool ok) {
  // What an owner wrote still verifies while its pages and their patterns are
  // unchanged (a page it shares by a hit holds the same pattern for both).
  for (auto it = group_written_.begin(); it != group_written_.end();) {
    const auto now = runner.owner_patterns(it->first);
    if (!now || now->pages != it->second.pages || now->identities != it->second.identities) {
      it = group_written_.erase(it);
      continue;
    }
    const auto bad = runner.mismatched_patterns(now->pages, now->identities);
    if (!bad.empty()) {
      return "owner " + it->first + "'s page " + std::to_string(bad.front().value()) +
             " no longer holds what the owner wrote, though its pages are unchanged";
    }
    ++it;
  }
  if (ok) {
    const auto op = nlohmann::json::parse(line, nullptr, false);
    if (op.is_object() && op.value("op", "") == "write") {
      if (auto now = runner.owner_patterns(op.at("owner").get<std::string>())) {
        group_written_[op.at("owner")] = std::move(*now);
      }
    }
  }
  return std::nullopt;
}

}  // namespace kvtier::harness
