#include "replay_command.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>

#include "kv_events_options.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/g1/eviction_policy.hpp"
#include "kvtier/memory/runtime_factory.hpp"
#include "kvtier/replay/default_workload.hpp"
#include "kvtier/replay/replayer.hpp"
#include "kvtier/session/session_config.hpp"
#include "kvtier/tiers/shared/redis_url.hpp"
#include "metrics_options.hpp"
#include "option_checks.hpp"
#include "result_table.hpp"

namespace kvtier::cli {
namespace {

/// The session's settings default to the one set every front door shares
/// (session::SessionConfig); the rest are the replay's own.
struct ReplayOptions {
  static inline const session::SessionConfig kSession{};
  std::string trace;  // empty: the built-in workload
  std::string backend = g1::backend_name(kSession.manager.backend);
  std::string eviction = g1::eviction_backend_name(kSession.manager.eviction);
  bool eviction_given = false;  // --eviction is refused with the native backend
  std::string device = "auto";
  std::uint32_t capacity = kSession.manager.capacity;
  double capacity_fraction = 0.0;  // > 0: this fraction of the device's free memory, instead of --capacity
  std::uint32_t host_blocks = kSession.host_blocks;
  std::string disk_path;  // empty: no G3
  std::uint32_t disk_blocks = 0;
  unsigned disk_queue_depth = session::DiskTierSettings{}.queue_depth;
  unsigned disk_backlog = session::DiskTierSettings{}.backlog;
  bool disk_reformat = false;
  std::vector<std::string> shared_tier;  // empty: no G4
  std::string shared_namespace = session::SharedTierSettings{}.key_namespace;
  std::uint32_t shared_ttl = 0;
  std::uint32_t shared_in_flight = session::SharedTierSettings{}.max_in_flight;
  std::uint32_t shared_timeout_ms = session::SharedTierSettings{}.timeout_ms;
  std::uint32_t instances = 1;
  std::string route = "round_robin";
  std::uint32_t block_size = kSession.manager.block_size;
  std::string layout = page_layout_name(kSession.layout);
  std::string dtype = dtype_name(kSession.geometry.dtype);
  std::uint32_t layers = kSession.geometry.layers;  // small pages: the replay checks bytes, not model size
  std::uint32_t kv_heads = kSession.geometry.kv_heads;
  std::uint32_t head_dim = kSession.geometry.head_dim;
  std::uint32_t max_running = 32;
  std::size_t token_budget = 8192;
  std::optional<std::size_t> output_tokens;
  std::size_t max_requests = 0;  // 0: all
  std::string verify = "sample";
  std::uint32_t attention_every = replay::ReplayConfig{}.attention_check_every;
  std::uint32_t attention_sequences = replay::ReplayConfig{}.attention_check_sequences;
  std::string json;
  std::string csv;
  std::vector<std::uint32_t> sweep_capacity;  // non-empty: one replay per G1 capacity
  std::uint64_t seed = 0;
  KvEventsOptions kv_events;
  MetricsOptions metrics;
};

/// A progress bar on stderr, drawn only when stderr is a terminal and at
/// most ten times a second; cleared when done.
class ProgressBar {
 public:
  explicit ProgressBar(std::string label) : label_(std::move(label)), enabled_(isatty(STDERR_FILENO) == 1) {}
  ~ProgressBar() { finish(); }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  /// Clears the bar so the report starts on a clean line.
  void finish() {
    if (drawn_) std::fprintf(stderr, "\r%*s\r", 78, "");
    drawn_ = false;
  }
  void update(std::size_t done, std::size_t total) {
    if (!enabled_ || total == 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (drawn_ && now - last_ < std::chrono::milliseconds(100) && done != total) return;
    last_ = now;
    drawn_ = true;
    constexpr int kWidth = 32;
    const int filled = static_cast<int>(kWidth * done / total);
    std::fprintf(stderr, "\r%s [%.*s%*s] %zu/%zu requests", label_.c_str(), filled, "################################",
                 kWidth - filled, "", done, total);
    std::fflush(stderr);
  }

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_{};
};

nlohmann::ordered_json report_json(const replay::ReplayReport& r, const replay::ReplayConfig& config,
                                   const std::string& workload, const std::string& runtime) {
  nlohmann::ordered_json out;
  out["workload"] = workload;
  out["runtime"] = runtime;
  out["backend"] = g1::backend_name(config.session.manager.backend);
  out["capacity"] = config.session.manager.capacity;
  out["host_blocks"] = config.session.host_blocks;
  out["disk_path"] = config.session.disk ? nlohmann::ordered_json(config.session.disk->path.string())
                                         : nlohmann::ordered_json(nullptr);
  out["disk_blocks"] = config.session.disk ? config.session.disk->blocks : 0;
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
  out["prompt_tokens"] = r.prompt_tokens;
  out["generated_tokens"] = r.generated_tokens;
  out["steps"] = r.steps;
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
  out["allocator_ops"] = r.allocator_ops;
  out["kv_tokens_written"] = r.kv_tokens_written;
  out["kv_bytes_written"] = r.kv_bytes_written;
  out["pages_verified"] = r.pages_verified;
  out["mismatches"] = r.mismatches;
  out["attention_checks"] = r.attention_checks;
  out["attention_sequences"] = r.attention_sequences;
  out["attention_mismatches"] = r.attention_mismatches;
  out["first_bad_page"] =
      r.first_bad_page ? nlohmann::ordered_json(*r.first_bad_page) : nlohmann::ordered_json(nullptr);
  out["virtual_ms"] = r.virtual_ms;
  out["wall_seconds"] = r.wall_seconds;
  return out;
}

/// The G3 lines of the report; empty without a disk tier.
std::string disk_lines(const nlohmann::ordered_json& j) {
  if (j["disk_blocks"].get<std::uint32_t>() == 0) return "";
  std::ostringstream out;
  out << "G3 disk:       " << j["g3_recovered_blocks"] << " blocks found at start, " << j["g3_blocks_written"]
      << " written (" << j["g3_bytes_written"] << " bytes, " << j["g3_write_GBps"].get<double>() << " GB/s), "
      << j["g3_blocks_read"] << " read and verified (" << j["g3_bytes_read"] << " bytes, "
      << j["g3_read_GBps"].get<double>() << " GB/s)\n"
      << "G3 faults:     " << j["g3_checksum_failures"] << " checksum failures, " << j["g3_io_failures"]
      << " I/O failures, " << j["g3_demotions_refused"] << " demotions refused for room\n";
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
      << "G4 faults:     " << j["g4_checksum_failures"] << " checksum failures, " << j["g4_values_missing"]
      << " values gone, " << j["g4_errors"] << " errors\n";
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
            << j["virtual_ms"].get<double>() / 1000.0 << " s of virtual time\n"
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
            << "G1:            " << j["evictions"] << " evictions, " << j["preemptions"] << " preemptions\n"
            << "offload:       " << j["swap_outs"] << " blocks out (" << j["swap_out_bytes"] << " bytes), "
            << j["swap_ins"] << " back in (" << j["swap_in_bytes"] << " bytes), " << j["failed_copies"]
            << " failed copies; achieved " << j["swap_out_GBps"].get<double>() << " GB/s out, "
            << j["swap_in_GBps"].get<double>() << " GB/s in (floors: copy ends are seen at polls)\n"
            << disk_lines(j) << shared_lines(j) << instance_lines(j) << "K/V writes:    " << j["kv_tokens_written"]
            << " tokens through write_kv (" << j["kv_bytes_written"] << " bytes)\n"
            << "allocator:     " << j["allocator_ops"] << " operations, "
            << per_second(j["allocator_ops"].get<double>())
            << " per second of wall time (page writes and checks included)\n"
            << "integrity:     " << j["pages_verified"] << " reused pages verified, " << j["mismatches"]
            << " mismatches" << (j["first_bad_page"].is_null() ? "" : ", first bad page " + j["first_bad_page"].dump())
            << "\n"
            << "attention:     " << j["attention_sequences"] << " sequences in " << j["attention_checks"]
            << " decode steps of paged attention through device block tables, " << j["attention_mismatches"]
            << " mismatches\n"
            << "wall time:     " << wall << " s\n";
}

/// What feeds one instance's metrics: its counts, with its publisher's event
/// totals when it publishes.
std::function<void(const metrics::KvMetrics&, std::optional<double>)> metrics_observer(MetricsOutput& out,
                                                                                       const KvEventsOutput* events,
                                                                                       std::size_t instance) {
  return [&out, events, instance](const metrics::KvMetrics& m, std::optional<double> step_seconds) {
    metrics::KvMetrics with_events = m;
    if (events) {
      with_events.events_dropped = events->events_dropped();
      with_events.events_published = events->events_received() - with_events.events_dropped;
    }
    out.update(with_events, step_seconds, instance);
  };
}

/// One replay per G1 capacity of --sweep-capacity, on the same requests: a
/// table of hit rates (and the other counters), JSON and CSV rows for plots.
int run_sweep(const ReplayOptions& o, replay::ReplayConfig config, memory::Runtime& runtime,
              const std::vector<replay::TraceRequest>& requests, const std::string& workload) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  std::size_t mismatches = 0;
  for (const std::uint32_t capacity : o.sweep_capacity) {
    config.session.manager.capacity = capacity;
    ProgressBar bar("capacity " + std::to_string(capacity));
    config.progress = [&bar](std::size_t done, std::size_t total) { bar.update(done, total); };
    const replay::ReplayReport report = replay::replay(runtime, config, requests);
    bar.finish();
    mismatches += report.mismatches + report.attention_mismatches;
    rows.push_back(report_json(report, config, workload, memory::runtime_kind_name(runtime.kind())));
  }
  nlohmann::ordered_json table = nlohmann::ordered_json::array();
  for (const auto& row : rows) {
    table.push_back({{"capacity", row["capacity"]},
                     {"g1_hit_rate", row["g1_hit_rate"]},
                     {"g2_hit_rate", row["g2_hit_rate"]},
                     {"evictions", row["evictions"]},
                     {"preemptions", row["preemptions"]},
                     {"swap_ins", row["swap_ins"]},
                     {"pages_verified", row["pages_verified"]},
                     {"mismatches", row["mismatches"]},
                     {"attention_mismatches", row["attention_mismatches"]},
                     {"wall_seconds", row["wall_seconds"]}});
  }
  std::cout << "kvtier replay --sweep-capacity: " << workload << ", " << rows.front()["backend"].get<std::string>()
            << " backend, " << config.session.host_blocks << " G2 pages\n";
  print_table(std::cout, table);
  if (!o.json.empty()) write_json(o.json, nlohmann::ordered_json{{"sweep", rows}});
  if (!o.csv.empty()) write_csv(o.csv, rows);
  return mismatches == 0 ? 0 : 1;
}

int run(const ReplayOptions& o) {
  replay::ReplayConfig config;
  config.session.set_backend(o.backend, o.eviction_given ? std::optional<std::string>(o.eviction) : std::nullopt);
  config.session.manager.block_size = o.block_size;
  config.session.geometry = KvGeometry{.layers = o.layers,
                                       .kv_heads = o.kv_heads,
                                       .head_dim = o.head_dim,
                                       .dtype = parse_dtype(o.dtype),
                                       .tokens_per_block = o.block_size};
  config.session.layout = parse_page_layout(o.layout);
  config.session.host_blocks = o.host_blocks;
  if (!o.disk_path.empty()) {
    config.session.disk = session::DiskTierSettings{.path = o.disk_path,
                                                    .blocks = o.disk_blocks,
                                                    .queue_depth = o.disk_queue_depth,
                                                    .backlog = o.disk_backlog,
                                                    .reformat = o.disk_reformat};
  } else if (o.disk_blocks > 0 || o.disk_reformat) {
    throw ConfigError("--disk-blocks and --disk-reformat need --disk-path");
  }
  if (!o.shared_tier.empty()) {
    config.session.shared = session::SharedTierSettings{.urls = o.shared_tier,
                                                        .key_namespace = o.shared_namespace,
                                                        .ttl_seconds = o.shared_ttl,
                                                        .max_in_flight = o.shared_in_flight,
                                                        .timeout_ms = o.shared_timeout_ms};
  }
  config.instances = o.instances;
  config.route = replay::parse_route_mode(o.route);
  config.max_running = o.max_running;
  config.token_budget = o.token_budget;
  config.output_tokens = o.output_tokens;
  config.verify = replay::parse_verify_mode(o.verify);
  config.attention_check_every = o.attention_every;
  config.attention_check_sequences = o.attention_sequences;
  config.seed = o.seed;
  const auto runtime = memory::make_runtime(memory::parse_runtime_choice(o.device));
  config.session.manager.capacity = o.capacity;
  if (o.capacity_fraction > 0.0) {
    if (o.capacity_fraction > 1.0) throw ConfigError("capacity-fraction must be in (0, 1]");
    const std::size_t page = KvLayout(config.session.geometry, config.session.layout, 1).page_bytes();
    const auto pages =
        static_cast<std::size_t>(o.capacity_fraction * static_cast<double>(runtime->device_info().free_bytes)) / page;
    if (pages == 0 || pages > 0xFFFFFFF0U)
      throw ConfigError("capacity-fraction gives " + std::to_string(pages) + " pages");
    config.session.manager.capacity = static_cast<std::uint32_t>(pages);
  }
  const std::size_t limit = o.max_requests == 0 ? std::numeric_limits<std::size_t>::max() : o.max_requests;
  std::vector<replay::TraceRequest> requests =
      o.trace.empty() ? replay::default_workload(o.seed) : replay::read_trace_file(o.trace, limit);
  if (requests.size() > limit) requests.resize(limit);
  if (requests.empty()) throw ConfigError("the trace " + o.trace + " holds no requests");
  const std::string workload =
      o.trace.empty() ? "built-in conversations (seed " + std::to_string(o.seed) + ")" : o.trace;
  const std::string runtime_name = memory::runtime_kind_name(runtime->kind());
  if (!o.sweep_capacity.empty()) {
    if (!o.kv_events.endpoint.empty()) throw ConfigError("--kv-events publishes one replay, not a --sweep-capacity");
    if (o.metrics.port || !o.metrics.file.empty())
      throw ConfigError("--metrics-* report one replay, not a --sweep-capacity");
    if (config.session.disk) throw ConfigError("--disk-path keeps blocks between replays: not with --sweep-capacity");
    if (config.session.shared)
      throw ConfigError("--shared-tier keeps blocks between replays: not with --sweep-capacity");
    if (config.instances > 1) throw ConfigError("--instances replays one configuration: not with --sweep-capacity");
    return run_sweep(o, config, *runtime, requests, workload);
  }
  // Several instances: one publisher per data-parallel rank, on endpoints offset by the rank (vLLM's DP),
  // and every metrics series labelled with its engine.
  std::vector<std::unique_ptr<KvEventsOutput>> rank_events;
  std::unique_ptr<MetricsOutput> instance_metrics;
  if (config.instances > 1) {
    rank_events = open_kv_events_per_rank(o.kv_events, config.session.manager.block_size,
                                          config.session.manager.dp_rank, config.instances);
    instance_metrics = open_metrics(o.metrics, config.instances);
    if (!rank_events.empty() || instance_metrics) config.instance_outputs.resize(config.instances);
    for (std::size_t i = 0; i < rank_events.size(); ++i) {
      config.instance_outputs[i].event_sinks = {rank_events[i]->sink()};
      config.instance_outputs[i].step_end = [p = rank_events[i].get()] { p->flush(); };
    }
    for (std::size_t i = 0; instance_metrics && i < config.instances; ++i) {
      config.instance_outputs[i].observe_metrics =
          metrics_observer(*instance_metrics, rank_events.empty() ? nullptr : rank_events[i].get(), i);
    }
    config.emit_token_ids = !rank_events.empty();
  }
  const auto kv_events = config.instances > 1 ? nullptr
                                              : open_kv_events(o.kv_events, config.session.manager.block_size,
                                                               config.session.manager.dp_rank);
  if (kv_events) {
    config.session.event_sinks.push_back(kv_events->sink());
    config.step_end = [out = kv_events.get()] { out->flush(); };  // one batch per scheduler step
    config.emit_token_ids = true;                                 // vLLM's BlockStored carries them
  }
  const auto metrics = config.instances > 1 ? std::move(instance_metrics) : open_metrics(o.metrics);
  if (metrics && config.instances == 1) config.observe_metrics = metrics_observer(*metrics, kv_events.get(), 0);
  ProgressBar bar("replay");
  config.progress = [&bar](std::size_t done, std::size_t total) { bar.update(done, total); };
  const std::vector<replay::ReplayReport> reports = replay::replay_instances(*runtime, config, requests);
  const replay::ReplayReport report = replay::combine(reports);
  config.progress = nullptr;
  auto json = report_json(report, config, workload, runtime_name);
  if (reports.size() > 1) {
    json["per_instance"] = nlohmann::ordered_json::array();
    for (const replay::ReplayReport& r : reports)
      json["per_instance"].push_back(report_json(r, config, workload, runtime_name));
  }
  bar.finish();
  print_report(json);
  std::cout << std::flush;  // the report is out while KV event sockets linger for late readers
  if (kv_events) std::cout << kv_events->finish() << '\n';
  if (!rank_events.empty()) std::cout << finish_all(rank_events) << '\n';
  if (!o.json.empty()) write_json(o.json, json);
  if (!o.csv.empty()) {  // one row per instance, then the total
    nlohmann::ordered_json rows =
        json.contains("per_instance") ? json["per_instance"] : nlohmann::ordered_json::array();
    nlohmann::ordered_json total = json;
    total.erase("per_instance");
    rows.push_back(std::move(total));
    write_csv(o.csv, rows);
  }
  if (metrics) metrics->finish();
  return report.mismatches + report.attention_mismatches == 0 ? 0 : 1;
}

}  // namespace

void add_replay_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ReplayOptions>();
  CLI::App* cmd = app.add_subcommand("replay", "Replay a request trace (or the built-in workload) on real memory");
  cmd->add_option("--trace", o->trace, "Mooncake-style JSONL trace (default: built-in multi-turn conversations)")
      ->check(non_empty());
  cmd->add_option("--backend", o->backend, "native | kvbm")->capture_default_str();
  auto* eviction = cmd->add_option("--eviction", o->eviction, "kvbm: lineage | lru | multi_lru")->capture_default_str();
  cmd->add_option("--device", o->device, "auto | host | cuda")->capture_default_str();
  auto* capacity = cmd->add_option("--capacity", o->capacity, "G1 pages")->capture_default_str();
  auto* fraction =
      cmd->add_option("--capacity-fraction", o->capacity_fraction, "G1 as this fraction of free device memory")
          ->check(unit_fraction())
          ->excludes(capacity);
  cmd->add_option("--host-blocks", o->host_blocks, "G2 pages of pinned host memory (0: no offload tier)")
      ->capture_default_str();
  cmd->add_option("--disk-path", o->disk_path,
                  "a directory for the G3 disk tier under G2 (kept between runs: a later replay hits it)")
      ->check(non_empty());
  cmd->add_option("--disk-blocks", o->disk_blocks, "G3 capacity in blocks (with --disk-path)");
  cmd->add_option("--disk-queue-depth", o->disk_queue_depth, "G3 I/O operations in flight")->capture_default_str();
  cmd->add_option("--disk-backlog", o->disk_backlog, "G3 writes that may wait for the queue (a slot's buffer each)")
      ->capture_default_str();
  cmd->add_flag("--disk-reformat", o->disk_reformat, "discard a G3 tier of another layout found in --disk-path");
  cmd->add_option("--shared-tier", o->shared_tier,
                  "G4, a store shared by instances: redis://[[USER]:PASSWORD@]HOST:PORT (or KVTIER_REDIS_PASSWORD), or "
                  "several (comma-separated) seeds of a Redis Cluster")
      ->delimiter(',');
  cmd->add_option("--shared-namespace", o->shared_namespace, "the user's part of every G4 key")->capture_default_str();
  cmd->add_option("--shared-ttl", o->shared_ttl, "seconds a G4 value lives (0: until Redis evicts it)")
      ->capture_default_str();
  cmd->add_option("--shared-in-flight", o->shared_in_flight, "G4 publishes queued at most (beyond: not published)")
      ->capture_default_str();
  cmd->add_option("--shared-timeout-ms", o->shared_timeout_ms, "G4: the longest wait for a connect, command or reply")
      ->capture_default_str();
  cmd->add_option("--instances", o->instances, "kvtier instances in this process, sharing the G4 store")
      ->capture_default_str();
  cmd->add_option("--route", o->route, "how requests go to instances: round_robin | hash")->capture_default_str();
  cmd->add_option("--block-size", o->block_size, "tokens per block (divides 512)")->capture_default_str();
  cmd->add_option("--layout", o->layout, "page-major | layer-major")->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "bf16 | fp16 | fp32 | fp8")->capture_default_str();
  cmd->add_option("--layers", o->layers)->capture_default_str();
  cmd->add_option("--kv-heads", o->kv_heads)->capture_default_str();
  cmd->add_option("--head-dim", o->head_dim)->capture_default_str();
  cmd->add_option("--max-running", o->max_running, "requests running at once")->capture_default_str();
  cmd->add_option("--token-budget", o->token_budget, "prompt and decode tokens per step")->capture_default_str();
  cmd->add_option("--output-tokens", o->output_tokens, "every request's output length (0: prefill only)");
  cmd->add_option("--max-requests", o->max_requests, "replay the first N requests (0: all)")->capture_default_str();
  cmd->add_option("--verify", o->verify, "sample | full | off: which reused pages are checked")->capture_default_str();
  cmd->add_option("--attention-every", o->attention_every,
                  "every Nth step, paged attention over running requests is checked against their K/V (0: never)")
      ->capture_default_str();
  cmd->add_option("--attention-sequences", o->attention_sequences, "running requests one attention check reads")
      ->capture_default_str()
      ->check(CLI::Range(1U, 1024U));
  cmd->add_option("--json", o->json, "write the report as JSON to this file (a sweep: {\"sweep\": [reports]})")
      ->check(non_empty());
  cmd->add_option("--csv", o->csv, "write the report as one CSV row (a sweep: one row per capacity)")
      ->check(non_empty());
  cmd->add_option("--sweep-capacity", o->sweep_capacity, "replay once per G1 capacity (pages, comma-separated)")
      ->delimiter(',')
      ->excludes(capacity)
      ->excludes(fraction);
  add_kv_events_options(*cmd, o->kv_events);
  add_metrics_options(*cmd, o->metrics);
  cmd->add_option("--seed", o->seed, "built-in workload and output tokens")->capture_default_str();
  cmd->callback([o, eviction, &exit_code] {
    o->eviction_given = eviction->count() > 0;
    try {
      exit_code = run(*o);
    } catch (const std::exception& error) {
      std::cerr << "kvtier replay: " << error.what() << '\n';
      exit_code = 2;
    }
  });
}

}  // namespace kvtier::cli
