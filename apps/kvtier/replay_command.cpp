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
#include "model_replay.hpp"
#include "option_checks.hpp"
#include "replay_bounds.hpp"
#include "replay_report.hpp"
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
  std::string g2_admission = offload::tier_admission_name(kSession.g2_admission);
  std::string g3_admission = offload::tier_admission_name(kSession.g3_admission);
  std::string g4_admission = offload::tier_admission_name(kSession.g4_admission);
  std::string g2_eviction;  // empty: the spec's order for the backend
  std::string g4_demotion = "eager";
  std::string native_eviction;  // empty: vLLM's LRU
  std::string disk_path;        // empty: no G3
  std::uint32_t disk_blocks = 0;
  unsigned disk_queue_depth = session::DiskTierSettings{}.queue_depth;
  unsigned disk_backlog = session::DiskTierSettings{}.backlog;
  std::string disk_sync = "none";
  bool disk_reformat = false;
  std::vector<std::string> shared_tier;  // empty: no G4
  std::string shared_namespace = session::SharedTierSettings{}.key_namespace;
  std::uint32_t shared_ttl = 0;
  std::uint32_t shared_in_flight = session::SharedTierSettings{}.max_in_flight;
  std::uint32_t shared_timeout_ms = session::SharedTierSettings{}.timeout_ms;
  bool shared_tolerate_down = false;  // a store that never answered is not an error
  std::string tier_key_file;          // empty: KVTIER_TIER_KEY_FILE, else none
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
  double time_scale = 1.0;       // arrivals at this multiple of the trace's times (0: all at once)
  std::string verify = "sample";
  std::uint32_t attention_every = replay::ReplayConfig{}.attention_check_every;
  std::uint32_t attention_sequences = replay::ReplayConfig{}.attention_check_sequences;
  std::string json;
  std::string csv;
  std::vector<std::uint32_t> sweep_capacity;  // non-empty: one replay per G1 capacity
  std::uint64_t seed = 0;
  KvEventsOptions kv_events;
  MetricsOptions metrics;
  ModelReplayOptions model;
  bool stop_at_oversized = false;  // today's stop-at-first, for those who want it
  bool max_running_given = false;  // a model replay runs up to 256 (vLLM's max_num_seqs) otherwise
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
    config.record_prefix_steps = wants_prefix_steps(config);
    replay::ReplayReport report = replay::replay(runtime, config, requests);
    bar.finish();
    mismatches += report.mismatches + report.attention_mismatches;
    rows.push_back(report_json(report, config, workload, memory::runtime_kind_name(runtime.kind())));
    std::vector<replay::ReplayReport> one;  // the bound reads its steps; moved, not copied
    one.push_back(std::move(report));
    add_offline_bounds(rows.back(), requests, config, one);
  }
  nlohmann::ordered_json table = nlohmann::ordered_json::array();
  for (const auto& row : rows) {
    table.push_back({{"capacity", row["capacity"]},
                     {"rejected", row["rejected_requests"]},
                     {"g1_hit_rate", row["g1_hit_rate"]},
                     {"bound_g1", row["bound_g1_hit_rate"]},
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
  config.session.g2_admission = offload::parse_tier_admission(o.g2_admission);
  config.session.g3_admission = offload::parse_tier_admission(o.g3_admission);
  config.session.g4_admission = offload::parse_tier_admission(o.g4_admission);
  if (!o.g2_eviction.empty()) config.session.g2_eviction = g1::parse_eviction_backend(o.g2_eviction);
  if (!o.native_eviction.empty()) {
    config.session.manager.native_eviction = g1::parse_eviction_backend(o.native_eviction);
  }
  if (o.g4_demotion != "eager" && o.g4_demotion != "lazy") throw ConfigError("--g4-demotion must be eager or lazy");
  if (o.g4_demotion != "eager" && o.shared_tier.empty()) throw ConfigError("--g4-demotion needs --shared-tier");
  if (!o.disk_path.empty()) {
    config.session.disk = session::DiskTierSettings{.path = o.disk_path,
                                                    .blocks = o.disk_blocks,
                                                    .queue_depth = o.disk_queue_depth,
                                                    .backlog = o.disk_backlog,
                                                    .reformat = o.disk_reformat,
                                                    .sync_batch = o.disk_sync == "batch"};
  } else if (o.disk_blocks > 0 || o.disk_reformat || o.disk_sync != "none") {
    throw ConfigError("--disk-blocks, --disk-reformat and --disk-sync need --disk-path");
  }
  if (!o.shared_tier.empty()) {
    config.session.shared = session::SharedTierSettings{.urls = o.shared_tier,
                                                        .key_namespace = o.shared_namespace,
                                                        .ttl_seconds = o.shared_ttl,
                                                        .max_in_flight = o.shared_in_flight,
                                                        .timeout_ms = o.shared_timeout_ms,
                                                        .publish_on_landing = o.g4_demotion == "eager"};
  }
  if (!o.tier_key_file.empty()) config.session.tier_key_file = o.tier_key_file;
  config.instances = o.instances;
  config.route = replay::parse_route_mode(o.route);
  config.max_running = o.max_running;
  config.refuse_oversized = !o.stop_at_oversized;
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
  for (replay::TraceRequest& r : requests) r.timestamp_ms *= o.time_scale;
  const std::string workload =
      o.trace.empty() ? "built-in conversations (seed " + std::to_string(o.seed) + ")" : o.trace;
  const std::string runtime_name = memory::runtime_kind_name(runtime->kind());
  if (o.model.wanted()) {
    if (!o.kv_events.endpoint.empty() || o.metrics.port || !o.metrics.file.empty()) {
      throw ConfigError("--model replays report on stdout and --json: not with --kv-events or --metrics-*");
    }
    if (!o.sweep_capacity.empty()) throw ConfigError("--model sizes G1 from --gpu-memory-gb: not --sweep-capacity");
    if (!o.max_running_given) config.max_running = 256;
    ModelReplayOptions model = o.model;
    model.json = o.json;
    model.csv = o.csv;
    return run_model_replay(model, config, *runtime, requests, workload);
  }
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
  config.record_prefix_steps = wants_prefix_steps(config);
  const std::vector<replay::ReplayReport> reports = replay::replay_instances(*runtime, config, requests);
  const replay::ReplayReport report = replay::combine(reports);
  config.progress = nullptr;
  auto json = report_json(report, config, workload, runtime_name);
  add_offline_bounds(json, requests, config, reports);
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
  if (report.mismatches + report.attention_mismatches > 0) return 1;
  if (config.session.shared && report.g4_errors > 0 && report.g4_answered == 0 && !o.shared_tolerate_down) {
    std::cerr << "kvtier replay: the shared tier never answered (" << report.g4_errors
              << " commands failed): the run went on without it; --shared-tolerate-down makes that exit 0\n";
    return 3;
  }
  return 0;
}

}  // namespace

void add_replay_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ReplayOptions>();
  CLI::App* cmd = app.add_subcommand("replay", "Replay a request trace (or the built-in workload) on real memory");
  cmd->add_option("--trace", o->trace, "Mooncake-style JSONL trace (default: built-in multi-turn conversations)")
      ->check(non_empty());
  cmd->add_option("--backend", o->backend, "native | kvbm")->capture_default_str();
  auto* eviction =
      cmd->add_option("--eviction", o->eviction,
                      "kvbm: lineage | lru | multi_lru | lru2 | lfu_da | arc | s3fifo | adaptive (docs/policies.md)")
          ->capture_default_str();
  cmd->add_option("--device", o->device, "auto | host | cuda")->capture_default_str();
  auto* capacity = cmd->add_option("--capacity", o->capacity, "G1 pages")->capture_default_str();
  auto* fraction =
      cmd->add_option("--capacity-fraction", o->capacity_fraction, "G1 as this fraction of free device memory")
          ->check(unit_fraction())
          ->excludes(capacity);
  cmd->add_option("--host-blocks", o->host_blocks, "G2 pages of pinned host memory (0: no offload tier)")
      ->capture_default_str();
  cmd->add_option("--g2-admission", o->g2_admission,
                  "what G2 stores of the blocks G1 evicts: all | second_offer (docs/policies.md)")
      ->capture_default_str();
  cmd->add_option("--g3-admission", o->g3_admission, "what G3 stores of the blocks G2 evicts: all | second_offer")
      ->capture_default_str();
  cmd->add_option("--g4-admission", o->g4_admission, "what G4 stores of the blocks G2 evicts: all | second_offer")
      ->capture_default_str();
  cmd->add_option("--native-eviction", o->native_eviction,
                  "the native backend's G1 order: lru2 | lfu_da | arc | s3fifo | adaptive (default: vLLM's LRU)")
      ->check(non_empty());
  cmd->add_option("--g4-demotion", o->g4_demotion,
                  "when G4 is offered a block: eager (as it lands in G2) | lazy (when G2 evicts it)")
      ->capture_default_str();
  cmd->add_option("--g2-eviction", o->g2_eviction,
                  "G2's order: lineage | lru | multi_lru | lru2 | lfu_da | arc | s3fifo | adaptive (default: the "
                  "spec's, lineage on kvbm, lru on native)")
      ->check(non_empty());
  cmd->add_option("--disk-path", o->disk_path,
                  "a directory for the G3 disk tier under G2 (kept between runs: a later replay hits it)")
      ->check(non_empty());
  cmd->add_option("--disk-blocks", o->disk_blocks, "G3 capacity in blocks (with --disk-path)");
  cmd->add_option("--disk-queue-depth", o->disk_queue_depth, "G3 I/O operations in flight")->capture_default_str();
  cmd->add_option("--disk-backlog", o->disk_backlog, "G3 writes that may wait for the queue (a slot's buffer each)")
      ->capture_default_str();
  cmd->add_flag("--disk-reformat", o->disk_reformat, "discard a G3 tier of another layout found in --disk-path");
  cmd->add_option("--disk-sync", o->disk_sync,
                  "when a G3 block counts as stored: none (its write completed) | batch (an fdatasync covered it: "
                  "power-loss durable)")
      ->check(CLI::IsMember({"none", "batch"}))
      ->capture_default_str();
  cmd->add_option("--shared-tier", o->shared_tier,
                  "G4, a store shared by instances: redis://[[USER]:PASSWORD@]HOST:PORT (or KVTIER_REDIS_PASSWORD), or "
                  "several (comma-separated) seeds of a Redis Cluster")
      ->delimiter(',');
  cmd->add_option("--shared-namespace", o->shared_namespace, "the user's part of every G4 key")->capture_default_str();
  cmd->add_option("--shared-ttl", o->shared_ttl, "seconds a G4 value lives (0: until Redis evicts it)")
      ->capture_default_str();
  cmd->add_option("--shared-in-flight", o->shared_in_flight, "G4 publishes queued at most (beyond: not published)")
      ->capture_default_str();
  cmd->add_option("--shared-timeout-ms", o->shared_timeout_ms,
                  "G4: the longest wait for a lookup, connect or reply (a node that fails is then left alone for a "
                  "back-off: 1 s, doubling to 30 s)")
      ->capture_default_str();
  cmd->add_flag("--shared-tolerate-down", o->shared_tolerate_down,
                "exit 0 even when the G4 store never answered (otherwise exit status 3)");
  cmd->add_option("--tier-key-file", o->tier_key_file,
                  "a secret (32+ bytes, mode 600) shared by trusting instances: G3/G4 records carry its HMAC and only "
                  "records with a valid one are served (default: KVTIER_TIER_KEY_FILE)")
      ->check(non_empty());
  cmd->add_option("--instances", o->instances, "kvtier instances in this process, sharing the G4 store")
      ->capture_default_str();
  cmd->add_option("--route", o->route, "how requests go to instances: round_robin | hash")->capture_default_str();
  cmd->add_option("--block-size", o->block_size, "tokens per block (divides 512)")->capture_default_str();
  cmd->add_option("--layout", o->layout, "page-major | layer-major")->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "bf16 | fp16 | fp32 | fp8")->capture_default_str();
  cmd->add_option("--layers", o->layers)->capture_default_str();
  cmd->add_option("--kv-heads", o->kv_heads)->capture_default_str();
  cmd->add_option("--head-dim", o->head_dim)->capture_default_str();
  auto* max_running =
      cmd->add_option("--max-running", o->max_running, "requests running at once (a --model replay: 256)")
          ->capture_default_str();
  cmd->add_option("--token-budget", o->token_budget, "prompt and decode tokens per step")->capture_default_str();
  cmd->add_flag("--stop-at-oversized", o->stop_at_oversized,
                "stop before the replay when a request needs more pages than G1 has (default: refuse it, count it "
                "and go on, as vLLM does)");
  cmd->add_option("--output-tokens", o->output_tokens, "every request's output length (0: prefill only)");
  cmd->add_option("--max-requests", o->max_requests, "replay the first N requests (0: all)")->capture_default_str();
  cmd->add_option("--time-scale", o->time_scale,
                  "arrivals at this multiple of the trace's times (0: all at once, a saturated server as vLLM's "
                  "benchmark --request-rate inf)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
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
  auto* model = cmd->add_option("--model", o->model.model,
                                "a real model's KV cache groups (a preset: kvtier info --model lists them); the pool "
                                "is what --gpu-memory-gb holds, compared with the model forced to one group")
                    ->check(non_empty());
  auto* model_config =
      cmd->add_option("--model-config", o->model.model_config, "the same from a Hugging Face config.json")
          ->check(non_empty())
          ->excludes(model);
  for (CLI::Option* from_model : {model, model_config}) from_model->excludes(capacity)->excludes(fraction);
  cmd->add_option("--gpu-memory-gb", o->model.gpu_memory_gb, "with --model: GiB of KV cache memory")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--no-hybrid", o->model.no_hybrid,
                "with --model: only the model forced to one full-attention group (vLLM's "
                "--disable-hybrid-kv-cache-manager)");
  cmd->add_flag("!--no-compare", o->model.compare, "with --model: skip the --no-hybrid run beside the hybrid one");
  cmd->add_option("--kv-cache-dtype", o->model.kv_cache_dtype,
                  "with --model: the attention groups' page format, as vLLM names it: auto (the model's dtype), "
                  "bfloat16, float16, float32, fp8, "
                  "fp8_per_token_head, int8_per_token_head, nvfp4, fp8_ds_mla (MLA)")
      ->capture_default_str();
  cmd->add_option("--check-page-bytes", o->model.check_page_bytes,
                  "with --model and groups: bytes of each pool page in memory, its patterns checked (0: the model's "
                  "real page)")
      ->capture_default_str();
  cmd->add_option("--max-model-len", o->model.max_model_len,
                  "with --model: longer requests are refused (default: the model's, lowered to what one pool holds)");
  add_kv_events_options(*cmd, o->kv_events);
  add_metrics_options(*cmd, o->metrics);
  cmd->add_option("--seed", o->seed, "built-in workload and output tokens")->capture_default_str();
  cmd->callback([o, eviction, max_running, &exit_code] {
    o->eviction_given = eviction->count() > 0;
    o->max_running_given = max_running->count() > 0;
    try {
      exit_code = run(*o);
    } catch (const std::exception& error) {
      std::cerr << "kvtier replay: " << error.what() << '\n';
      exit_code = 2;
    }
  });
}

}  // namespace kvtier::cli
