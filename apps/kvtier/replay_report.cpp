#include "replay_report.hpp"

#include <algorithm>
#include <iostream>
#include <sstream>

#include "kvtier/g1/eviction_policy.hpp"
#include "kvtier/tiers/shared/redis_url.hpp"

namespace kvtier::cli {
namespace {

/// The G3 lines of the report; empty without a disk tier.
std::string disk_lines(const nlohmann::ordered_json& j) {
  if (j["disk_blocks"].get<std::uint32_t>() == 0) return "";
  std::ostringstream out;
  out << "G3 disk:       " << j["g3_recovered_blocks"] << " blocks found at start, " << j["g3_blocks_written"]
      << " written (" << j["g3_bytes_written"] << " bytes, " << j["g3_write_GBps"].get<double>() << " GB/s), "
      << j["g3_blocks_read"] << " read and verified (" << j["g3_bytes_read"] << " bytes, "
      << j["g3_read_GBps"].get<double>() << " GB/s)\n"
      << "G3 at start:   " << j["g3_slots_torn"] << " torn slots, " << j["g3_slots_superseded"] << " superseded, "
      << j["g3_slots_unauthenticated"] << " unauthenticated, " << j["g3_dropped_on_shrink"]
      << " blocks dropped for a smaller capacity, " << j["g3_discarded_by_reformat"] << " discarded by a reformat\n"
      << "G3 faults:     " << j["g3_checksum_failures"] << " checksum failures (" << j["g3_authentication_failures"]
      << " refused by the tier key), " << j["g3_io_failures"] << " I/O failures, " << j["g3_demotions_refused"]
      << " demotions refused for room, " << j["g3_parked_slots"] << " slots parked (file system full)\n";
  return out.str();
}

/// The offline optimum beside the hit rates (replay_bounds.hpp): at this G1
/// size for G1's hits, at the whole stack's for the hits in all, or why not.
std::string bound_line(const nlohmann::ordered_json& j) {
  if (!j.contains("bound_g1_hit_rate")) return "";
  std::ostringstream out;
  out << "bound:         ";
  if (!j["bound_g1_hit_rate"].is_null()) {
    out << "G1 " << 100.0 * j["bound_g1_hit_rate"].get<double>() << "% with " << j["bound_g1_blocks"] << " pages";
    if (!j["bound_stack_hit_rate"].is_null() && j["bound_stack_blocks"] != j["bound_g1_blocks"]) {
      out << ", in all " << 100.0 * j["bound_stack_hit_rate"].get<double>() << "% with the stack's "
          << j["bound_stack_blocks"];
    }
    out << " (the offline optimum on this run's blocks, in its order: no run hits more; docs/replay.md)";
    if (!j["bound_note"].is_null()) out << "; ";
  }
  if (!j["bound_note"].is_null()) out << j["bound_note"].get<std::string>();
  out << "\n";
  return out.str();
}

/// Why no sequence's attention was checked: a check that did not run is not a pass.
std::string attention_not_run(const replay::ReplayReport& r, const replay::ReplayConfig& config) {
  if (config.attention_check_every == 0 || config.attention_check_sequences == 0) {
    return "not run: --attention-every 0";
  }
  if (!r.groups.empty() && std::none_of(r.groups.begin(), r.groups.end(),
                                        [](const replay::GroupReplayCounts& g) { return g.check == "kv"; })) {
    return "not run: no attention group's K/V fits the pages in memory (--check-page-bytes)";
  }
  return "not run: no scheduler step at a multiple of --attention-every had a request with K/V in its pages";
}

/// The attention check's line, or why it did not run.
std::string attention_line(const nlohmann::ordered_json& j) {
  std::ostringstream out;
  out << "attention:     ";
  if (!j["attention_note"].is_null()) {
    out << j["attention_note"].get<std::string>() << "\n";
    return out.str();
  }
  out << j["attention_sequences"] << " sequences in " << j["attention_checks"]
      << " decode steps of paged attention through device block tables, " << j["attention_mismatches"]
      << " mismatches\n";
  return out.str();
}

/// The tiers' admission and G2's order, when any is not the default.
std::string admission_line(const nlohmann::ordered_json& j) {
  const bool all = j["g2_admission"] == "all" && j["g3_admission"] == "all" && j["g4_admission"] == "all";
  if (all && j["g2_eviction"].is_null()) return "";
  std::ostringstream out;
  out << "admission:     G2 " << j["g2_admission"].get<std::string>() << " (" << j["g2_admission_declined"]
      << " declined), G3 " << j["g3_admission"].get<std::string>() << " (" << j["g3_admission_declined"]
      << " declined), G4 " << j["g4_admission"].get<std::string>() << " (" << j["g4_admission_declined"]
      << " declined); G2 order " << (j["g2_eviction"].is_null() ? "the spec's" : j["g2_eviction"].get<std::string>())
      << "\n";
  return out.str();
}

/// The G4 lines of the report; empty without a shared tier.
std::string shared_lines(const nlohmann::ordered_json& j) {
  if (j["shared_tier"].is_null()) return "";
  std::ostringstream out;
  out << "G4 shared:     " << j["g4_blocks_published"] << " blocks published (" << j["g4_already_present"]
      << " there already, " << j["g4_publishes_refused"] << " refused for room), " << j["g4_blocks_fetched"]
      << " fetched and verified (" << j["g4_bytes_fetched"] << " bytes, " << j["g4_fetch_GBps"].get<double>()
      << " GB/s) in " << j["g4_lookups"] << " lookups\n"
      << "G4 faults:     " << j["g4_checksum_failures"] << " checksum failures (" << j["g4_authentication_failures"]
      << " refused by the tier key, " << j["g4_oversized"] << " oversized), " << j["g4_other_version"]
      << " of another version kept, " << j["g4_values_missing"] << " values gone, " << j["g4_errors"] << " errors, "
      << j["g4_answered"] << " commands answered"
      << (j["g4_read_only"].get<std::size_t>() > 0 ? "; writes refused (read-only user)" : "") << "\n";
  return out.str();
}

/// One line per KV cache group of a manager with groups.
std::string group_lines(const nlohmann::ordered_json& j) {
  if (!j.contains("groups")) return "";
  std::ostringstream out;
  std::size_t i = 0;
  for (const auto& g : j["groups"]) {
    out << "group " << i++ << ":       " << g["kind"].get<std::string>() << " (block " << g["block_size"]
        << "): " << g["hit_pages"] << " pages hit (" << 100.0 * g["hit_rate"].get<double>()
        << "% of the pages its tables took), " << g["stored_blocks"] << " blocks cached, " << g["removed_blocks"]
        << " evicted; " << g["pages_written"] << " pages written (" << g["check"].get<std::string>() << "), "
        << g["pages_verified"] << " hit pages verified, " << g["mismatches"] << " mismatches";
    if (g["check"] == "kv") {
      out << "; attention " << g["attention_sequences"] << " sequences, " << g["attention_mismatches"] << " mismatches";
    }
    out << "\n";
  }
  return out.str();
}

/// One line per instance of `--instances N`.
std::string instance_lines(const nlohmann::ordered_json& j) {
  if (!j.contains("per_instance")) return "";
  std::ostringstream out;
  std::size_t i = 0;
  for (const auto& r : j["per_instance"]) {
    out << "instance " << i++ << ":    " << r["requests"] << " requests, hit rate "
        << 100.0 * r["hit_rate"].get<double>() << "% (G1 " << r["g1_hit_blocks"] << ", G2 " << r["g2_hit_blocks"]
        << ", G4 " << r["g4_hit_blocks"] << " of " << r["prompt_blocks"] << "), " << r["g4_blocks_published"]
        << " published, " << r["mismatches"] << " mismatches, " << r["attention_mismatches"]
        << " attention mismatches\n";
  }
  return out.str();
}

}  // namespace

nlohmann::ordered_json report_json(const replay::ReplayReport& r, const replay::ReplayConfig& config,
                                   const std::string& workload, const std::string& runtime) {
  nlohmann::ordered_json out;
  out["workload"] = workload;
  out["runtime"] = runtime;
  out["backend"] = g1::backend_name(config.session.manager.backend);
  const g1::G1ManagerConfig& manager = config.session.manager;
  out["g1_order"] = manager.backend == g1::G1Backend::Kvbm ? g1::eviction_backend_name(manager.eviction)
                    : manager.native_eviction              ? g1::eviction_backend_name(*manager.native_eviction)
                                                           : "lru";
  out["capacity"] = config.session.manager.capacity;
  out["host_blocks"] = config.session.host_blocks;
  out["disk_path"] = config.session.disk ? nlohmann::ordered_json(config.session.disk->path.string())
                                         : nlohmann::ordered_json(nullptr);
  out["disk_blocks"] = config.session.disk ? config.session.disk->blocks : 0;
  out["tier_key"] = config.session.effective_tier_key_file().has_value();
  std::string shared_urls;  // as --shared-tier takes them: comma-separated
  if (config.session.shared) {
    for (const std::string& url : config.session.shared->urls) {
      if (!shared_urls.empty()) shared_urls += ',';
      shared_urls += tiers::shared::redacted_redis_url(url);
    }
  }
  out["shared_tier"] = config.session.shared ? nlohmann::ordered_json(shared_urls) : nlohmann::ordered_json(nullptr);
  out["instances"] = config.instances;
  out["route"] = config.route == replay::RouteMode::RoundRobin ? "round_robin" : "hash";
  out["block_size"] = config.session.manager.block_size;
  out["requests"] = r.requests;
  out["rejected_requests"] = r.rejected_requests;
  out["prompt_tokens"] = r.prompt_tokens;
  out["generated_tokens"] = r.generated_tokens;
  out["steps"] = r.steps;
  out["mean_running"] = r.mean_running();
  out["peak_running"] = r.peak_running;
  out["prompt_blocks"] = r.prompt_blocks;
  out["g1_hit_blocks"] = r.g1_hit_blocks;
  out["g2_hit_blocks"] = r.g2_hit_blocks;
  out["g1_hit_rate"] = r.g1_hit_rate();
  out["g2_hit_rate"] = r.g2_hit_rate();
  out["g3_hit_blocks"] = r.g3_hit_blocks;
  out["g3_hit_rate"] = r.g3_hit_rate();
  out["g4_hit_blocks"] = r.g4_hit_blocks;
  out["g4_hit_rate"] = r.g4_hit_rate();
  out["hit_rate"] = r.hit_rate();
  out["preemptions"] = r.preemptions;
  out["evictions"] = r.evictions;
  out["swap_outs"] = r.swap_outs;
  out["swap_ins"] = r.swap_ins;
  out["swap_out_bytes"] = r.swap_out_bytes;
  out["swap_in_bytes"] = r.swap_in_bytes;
  out["swap_out_GBps"] = r.swap_out_gbps;
  out["swap_in_GBps"] = r.swap_in_gbps;
  out["failed_copies"] = r.failed_copies;
  out["g2_admission"] = offload::tier_admission_name(config.session.g2_admission);
  out["g3_admission"] = offload::tier_admission_name(config.session.g3_admission);
  out["g4_admission"] = offload::tier_admission_name(config.session.g4_admission);
  out["g2_eviction"] = config.session.g2_eviction
                           ? nlohmann::ordered_json(g1::eviction_backend_name(*config.session.g2_eviction))
                           : nlohmann::ordered_json(nullptr);
  out["g2_admission_declined"] = r.g2_admission_declined;
  out["g3_admission_declined"] = r.g3_admission_declined;
  out["g4_admission_declined"] = r.g4_admission_declined;
  out["g3_recovered_blocks"] = r.g3_recovered_blocks;
  out["g3_blocks_written"] = r.g3_blocks_written;
  out["g3_blocks_read"] = r.g3_blocks_read;
  out["g3_bytes_written"] = r.g3_bytes_written;
  out["g3_bytes_read"] = r.g3_bytes_read;
  out["g3_write_GBps"] = r.g3_write_gbps;
  out["g3_read_GBps"] = r.g3_read_gbps;
  out["g3_checksum_failures"] = r.g3_checksum_failures;
  out["g3_io_failures"] = r.g3_io_failures;
  out["g3_demotions_refused"] = r.g3_demotions_refused;
  out["g3_authentication_failures"] = r.g3_authentication_failures;
  out["g3_slots_torn"] = r.g3_slots_torn;
  out["g3_slots_superseded"] = r.g3_slots_superseded;
  out["g3_slots_unauthenticated"] = r.g3_slots_unauthenticated;
  out["g3_dropped_on_shrink"] = r.g3_dropped_on_shrink;
  out["g3_discarded_by_reformat"] = r.g3_discarded_by_reformat;
  out["g3_parked_slots"] = r.g3_parked_slots;
  out["g4_blocks_published"] = r.g4_blocks_published;
  out["g4_already_present"] = r.g4_already_present;
  out["g4_publishes_refused"] = r.g4_publishes_refused;
  out["g4_blocks_fetched"] = r.g4_blocks_fetched;
  out["g4_bytes_fetched"] = r.g4_bytes_fetched;
  out["g4_fetch_GBps"] = r.g4_fetch_gbps;
  out["g4_lookups"] = r.g4_lookups;
  out["g4_values_missing"] = r.g4_values_missing;
  out["g4_checksum_failures"] = r.g4_checksum_failures;
  out["g4_errors"] = r.g4_errors;
  out["g4_authentication_failures"] = r.g4_authentication_failures;
  out["g4_other_version"] = r.g4_other_version;
  out["g4_oversized"] = r.g4_oversized;
  out["g4_answered"] = r.g4_answered;
  out["g4_read_only"] = r.g4_read_only;
  out["allocator_ops"] = r.allocator_ops;
  out["kv_tokens_written"] = r.kv_tokens_written;
  out["kv_bytes_written"] = r.kv_bytes_written;
  out["pages_verified"] = r.pages_verified;
  out["mismatches"] = r.mismatches;
  out["attention_checks"] = r.attention_checks;
  out["attention_sequences"] = r.attention_sequences;
  out["attention_mismatches"] = r.attention_mismatches;
  out["attention_note"] = nullptr;
  if (r.attention_sequences == 0) out["attention_note"] = attention_not_run(r, config);
  out["first_bad_page"] =
      r.first_bad_page ? nlohmann::ordered_json(*r.first_bad_page) : nlohmann::ordered_json(nullptr);
  if (!r.groups.empty()) {
    nlohmann::ordered_json groups = nlohmann::ordered_json::array();
    for (const replay::GroupReplayCounts& g : r.groups) {
      groups.push_back(
          {{"kind", g.kind},
           {"block_size", g.block_size},
           {"hit_pages", g.hit_pages},
           {"fresh_pages", g.fresh_pages},
           {"hit_rate", g.hit_pages + g.fresh_pages > 0
                            ? static_cast<double>(g.hit_pages) / static_cast<double>(g.hit_pages + g.fresh_pages)
                            : 0.0},
           {"stored_blocks", g.stored_blocks},
           {"removed_blocks", g.removed_blocks},
           {"pages_written", g.pages_written},
           {"pages_verified", g.pages_verified},
           {"mismatches", g.mismatches},
           {"check", g.check},
           {"attention_sequences", g.attention_sequences},
           {"attention_mismatches", g.attention_mismatches}});
    }
    out["groups"] = std::move(groups);
  }
  out["virtual_ms"] = r.virtual_ms;
  out["wall_seconds"] = r.wall_seconds;
  return out;
}

void print_report(const nlohmann::ordered_json& j) {
  const double wall = j["wall_seconds"].get<double>();
  const auto per_second = [&](double n) { return wall > 0 ? n / wall : 0.0; };
  std::cout << "kvtier replay: " << j["workload"].get<std::string>() << " on " << j["runtime"].get<std::string>()
            << ", " << j["backend"].get<std::string>() << " backend, " << j["capacity"] << " G1 pages"
            << (j["host_blocks"].get<std::uint32_t>() > 0 ? ", " + j["host_blocks"].dump() + " G2 pages" : "")
            << (j["disk_blocks"].get<std::uint32_t>() > 0
                    ? ", " + j["disk_blocks"].dump() + " G3 blocks in " + j["disk_path"].get<std::string>()
                    : "")
            << (j["shared_tier"].is_null() ? "" : ", G4 shared at " + j["shared_tier"].get<std::string>())
            << (j["instances"].get<std::uint32_t>() > 1
                    ? "; " + j["instances"].dump() + " instances, route " + j["route"].get<std::string>()
                    : "")
            << "\n"
            << "requests:      " << j["requests"] << " (" << j["prompt_tokens"] << " prompt tokens, "
            << j["generated_tokens"] << " generated) in " << j["steps"] << " steps, "
            << j["virtual_ms"].get<double>() / 1000.0 << " s of virtual time"
            << (j["rejected_requests"].get<std::size_t>() > 0
                    ? "; " + j["rejected_requests"].dump() + " refused (longer than max_model_len, or than all of G1)"
                    : "")
            << "\n"
            << "concurrency:   " << j["mean_running"].get<double>() << " requests running on average, "
            << j["peak_running"] << " at most\n"
            << "prefix hits:   G1 " << j["g1_hit_blocks"] << " of " << j["prompt_blocks"] << " prompt blocks ("
            << 100.0 * j["g1_hit_rate"].get<double>() << "%), G2 " << j["g2_hit_blocks"] << " ("
            << 100.0 * j["g2_hit_rate"].get<double>() << "%)"
            << (j["disk_blocks"].get<std::uint32_t>() > 0
                    ? ", G3 " + j["g3_hit_blocks"].dump() + " (" +
                          std::to_string(100.0 * j["g3_hit_rate"].get<double>()) + "%)"
                    : "")
            << (j["shared_tier"].is_null() ? ""
                                           : ", G4 " + j["g4_hit_blocks"].dump() + " (" +
                                                 std::to_string(100.0 * j["g4_hit_rate"].get<double>()) + "%)")
            << "; in all " << 100.0 * j["hit_rate"].get<double>() << "%\n"
            << bound_line(j) << "G1:            " << j["evictions"] << " evictions, " << j["preemptions"]
            << " preemptions\n"
            << "offload:       " << j["swap_outs"] << " blocks out (" << j["swap_out_bytes"] << " bytes), "
            << j["swap_ins"] << " back in (" << j["swap_in_bytes"] << " bytes), " << j["failed_copies"]
            << " failed copies; achieved " << j["swap_out_GBps"].get<double>() << " GB/s out, "
            << j["swap_in_GBps"].get<double>() << " GB/s in (floors: copy ends are seen at polls)\n"
            << admission_line(j) << disk_lines(j) << shared_lines(j) << instance_lines(j) << group_lines(j)
            << "K/V writes:    " << j["kv_tokens_written"]
            << (j.contains("groups") ? " tokens computed, their blocks' pages written with their patterns ("
                                     : " tokens through write_kv (")
            << j["kv_bytes_written"] << " bytes)\n"
            << "allocator:     " << j["allocator_ops"] << " operations, "
            << per_second(j["allocator_ops"].get<double>())
            << " per second of wall time (page writes and checks included)\n"
            << "integrity:     " << j["pages_verified"] << " reused pages verified, " << j["mismatches"]
            << " mismatches" << (j["first_bad_page"].is_null() ? "" : ", first bad page " + j["first_bad_page"].dump())
            << "\n"
            << attention_line(j) << "wall time:     " << wall << " s\n";
}

}  // namespace kvtier::cli
