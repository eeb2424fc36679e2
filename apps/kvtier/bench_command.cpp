#include "bench_command.hpp"

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_policy.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/measure/allocator_cycle.hpp"
#include "kvtier/measure/disk_measurement.hpp"
#include "kvtier/measure/hybrid_cycle.hpp"
#include "kvtier/measure/request_streams.hpp"
#include "kvtier/measure/shared_measurement.hpp"
#include "kvtier/measure/swap_measurement.hpp"
#include "kvtier/memory/runtime_factory.hpp"
#include "kvtier/tiers/shared/redis_url.hpp"
#include "option_checks.hpp"
#include "result_table.hpp"

namespace kvtier::cli {
namespace {

constexpr std::size_t kMaxSwapBatchBytes = std::size_t{256} << 20;

struct AllocOptions {
  std::string stream = "all";  // shared_half | mooncake | all
  std::string trace = KVTIER_DEFAULT_TRACE;
  std::size_t rounds = 5;
  std::string json;
  std::string csv;
};

struct SwapOptions {
  std::string device = "auto";
  std::vector<std::size_t> page_bytes{4 << 10, 16 << 10, 64 << 10, 256 << 10, 2 << 20};
  std::size_t batch = 256;
  std::vector<std::string> paths{"batched", "staged", "per_page"};
  std::string direction = "both";  // out | in | both
  std::size_t iterations = 5;
  std::string json;
  std::string csv;
};

struct DiskOptions {
  std::string dir;  // empty: a fresh directory under the system's temporary directory
  std::vector<std::size_t> page_bytes{16 << 10, 64 << 10, 256 << 10};
  std::vector<unsigned> queue_depths{1, 8, 32, 64};
  std::size_t megabytes = 128;  // payload per measurement
  std::size_t iterations = 3;
  std::string sync = "none";
  std::string json;
  std::string csv;
};

struct SharedOptions {
  std::vector<std::string> urls;  // the store to measure (required)
  std::vector<std::size_t> page_bytes{16 << 10, 64 << 10, 256 << 10};
  std::vector<std::size_t> batches{1, 16, 64};
  std::size_t megabytes = 64;  // payload per measurement
  std::size_t iterations = 3;
  std::string json;
  std::string csv;
};

/// The fraction of the tight floor issue 36 asks of an allocator (null: none asked).
nlohmann::ordered_json floor_target(const std::string& allocator) {
  if (allocator == "native") return 0.5;
  if (allocator == "kvbm/lru") return 0.35;
  return nullptr;
}

/// One row of `bench alloc`: a cycle's rates, its fraction of the floor and what is asked of it.
nlohmann::ordered_json cycle_row(const measure::AllocatorCycleResult& r) {
  return {{"allocator", r.allocator},
          {"stream", r.stream},
          {"blocks", r.blocks},
          {"rounds", r.rounds},
          {"blocks_per_s", r.blocks_per_second},
          {"floor_blocks_per_s", r.floor_blocks_per_second},
          {"fraction_of_floor", r.fraction_of_floor},
          {"target", floor_target(r.allocator)},
          {"metadata_B_per_page", r.metadata_bytes_per_page},
          {"events_per_round", r.events_per_round},
          {"token_id_cost", nullptr}};
}

void write_outputs(const nlohmann::ordered_json& rows, const std::string& json, const std::string& csv) {
  print_table(std::cout, rows);
  if (!json.empty()) write_json(json, rows);
  if (!csv.empty()) write_csv(csv, rows);
}

int run_alloc(const AllocOptions& o) {
  if (o.stream != "all" && o.stream != "shared_half" && o.stream != "mooncake") {
    throw ConfigError("stream must be shared_half, mooncake or all");
  }
  std::vector<measure::RequestStream> streams;
  if (o.stream != "mooncake") streams.push_back(measure::shared_half_stream(1000, 2048, 16, 64, 16384));
  if (o.stream != "shared_half") {
    if (std::filesystem::exists(o.trace)) {
      streams.push_back(measure::trace_stream(o.trace, 300, 16, 16, 64 * 1024));
    } else if (o.stream == "mooncake") {
      throw ConfigError("no trace at " + o.trace + " (--trace)");
    } else {
      std::cerr << "kvtier bench alloc: no trace at " << o.trace << "; the mooncake stream is skipped\n";
    }
  }
  const std::pair<g1::G1Backend, g1::EvictionBackend> allocators[] = {
      {g1::G1Backend::Native, g1::EvictionBackend::Lineage},
      {g1::G1Backend::Kvbm, g1::EvictionBackend::Lru},
      {g1::G1Backend::Kvbm, g1::EvictionBackend::MultiLru},
      {g1::G1Backend::Kvbm, g1::EvictionBackend::Lineage}};
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const auto& plain : streams) {
    // Each stream as it is, then with token ids in every Use and Stored event:
    // `token_id_cost` is the share of the cycle they take.
    const measure::RequestStream with_ids = measure::with_token_ids(plain);
    std::map<std::string, double> plain_rates;
    for (const measure::RequestStream* stream : {&plain, &with_ids}) {
      for (const auto& [backend, eviction] : allocators) {
        const auto r = measure::measure_allocator_cycle(*stream, backend, eviction, o.rounds);
        nlohmann::ordered_json row = cycle_row(r);
        if (stream == &plain) {
          plain_rates[r.allocator] = r.blocks_per_second;
        } else {
          row["token_id_cost"] = 1.0 - r.blocks_per_second / plain_rates.at(r.allocator);
        }
        rows.push_back(std::move(row));
      }
    }
    // The same stream through two KV cache groups (full + 128-token window), beside the same floor.
    const auto h = measure::measure_hybrid_cycle(plain, measure::full_and_sliding_groups(), o.rounds);
    rows.push_back(cycle_row(h));
  }
  write_outputs(rows, o.json, o.csv);
  return 0;
}

int run_swap(const SwapOptions& o) {
  if (o.direction != "out" && o.direction != "in" && o.direction != "both") {
    throw ConfigError("direction must be out, in or both");
  }
  if (o.batch == 0) throw ConfigError("batch must be at least 1");
  std::vector<measure::SwapPath> paths;
  for (const std::string& name : o.paths) paths.push_back(measure::parse_swap_path(name));
  const auto runtime = memory::make_runtime(memory::parse_runtime_choice(o.device));
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const bool swap_out : {true, false}) {
    if ((swap_out && o.direction == "in") || (!swap_out && o.direction == "out")) continue;
    for (const measure::SwapPath path : paths) {
      if (path == measure::SwapPath::Engine && !swap_out) continue;  // the engine path is swap-out only
      for (const std::size_t page : o.page_bytes) {
        // Large pages: fewer of them, so a batch stays within 256 MiB.
        const std::size_t batch =
            std::max<std::size_t>(1, std::min(o.batch, kMaxSwapBatchBytes / std::max<std::size_t>(page, 1)));
        const auto p = measure::measure_swap(*runtime, page, batch, path, swap_out, o.iterations);
        rows.push_back({{"runtime", memory::runtime_kind_name(runtime->kind())},
                        {"direction", swap_out ? "out" : "in"},
                        {"path", measure::swap_path_name(path)},
                        {"page_bytes", p.page_bytes},
                        {"batch", p.batch},
                        {"iterations", p.iterations},
                        {"GBps", p.gbps},
                        {"ceiling_GBps", p.ceiling_gbps},
                        {"of_ceiling", p.of_ceiling()}});
      }
    }
  }
  write_outputs(rows, o.json, o.csv);
  return 0;
}

int run_disk(const DiskOptions& o) {
  if (!measure::disk_measurement_available()) {
    throw ConfigError("this kvtier was built without liburing: no disk tier to measure");
  }
  if (o.megabytes == 0) throw ConfigError("megabytes must be at least 1");
  const std::filesystem::path dir =
      o.dir.empty() ? std::filesystem::temp_directory_path() / ("kvtier-bench-disk-" + std::to_string(::getpid()))
                    : std::filesystem::path(o.dir);
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const std::size_t page : o.page_bytes) {
    for (const unsigned depth : o.queue_depths) {
      if (depth == 0) throw ConfigError("a queue depth must be at least 1");
      const auto p = measure::measure_disk(dir, page, depth, o.megabytes << 20, o.iterations, o.sync == "batch");
      rows.push_back({{"page_bytes", p.page_bytes},
                      {"queue_depth", p.queue_depth},
                      {"blocks", p.blocks},
                      {"iterations", p.iterations},
                      {"direct_io", p.direct_io},
                      {"write_GBps", p.write_gbps},
                      {"ceiling_write_GBps", p.ceiling_write_gbps},
                      {"write_of_ceiling", p.write_of_ceiling},
                      {"read_GBps", p.read_gbps},
                      {"ceiling_read_GBps", p.ceiling_read_gbps},
                      {"read_of_ceiling", p.read_of_ceiling},
                      {"keyed_write_GBps", p.keyed_write_gbps},
                      {"keyed_write_of_unkeyed", p.keyed_write_of_unkeyed()},
                      {"keyed_read_GBps", p.keyed_read_gbps},
                      {"keyed_read_of_unkeyed", p.keyed_read_of_unkeyed()},
                      {"verified_reads", p.verified_reads},
                      {"sync", o.sync},
                      {"syncs", p.syncs}});
    }
  }
  if (o.dir.empty()) std::filesystem::remove_all(dir);
  std::cout << "kvtier bench disk: " << dir.string()
            << (rows.front()["direct_io"].get<bool>() ? " (O_DIRECT)" : " (buffered: the file system refuses O_DIRECT)")
            << "; ceiling: one sequential 8 MiB-request write, then read, of the same bytes; keyed: the store "
               "under a tier key (HMAC-SHA256 of every record); ratios: medians of each iteration's ratio\n"
            << "targets: write >= " << measure::DiskPoint::kWriteTarget
            << " and read >= " << measure::DiskPoint::kReadTarget
            << " of the ceiling at 64 KiB pages, queue depth 32 and up\n";
  write_outputs(rows, o.json, o.csv);
  return 0;
}

int run_shared(const SharedOptions& o) {
  if (!measure::shared_measurement_available()) {
    throw ConfigError("this kvtier was built without hiredis: no shared tier to measure");
  }
  if (o.urls.empty()) throw ConfigError("--shared-tier names the store to measure");
  if (o.megabytes == 0) throw ConfigError("megabytes must be at least 1");
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const std::size_t page : o.page_bytes) {
    for (const std::size_t batch : o.batches) {
      const auto p = measure::measure_shared(o.urls, page, batch, o.megabytes << 20, o.iterations);
      rows.push_back({{"page_bytes", p.page_bytes},
                      {"batch", p.batch},
                      {"blocks", p.blocks},
                      {"iterations", p.iterations},
                      {"put_GBps", p.put_gbps},
                      {"ceiling_put_GBps", p.ceiling_put_gbps},
                      {"put_of_ceiling", p.put_of_ceiling},
                      {"get_GBps", p.get_gbps},
                      {"ceiling_get_GBps", p.ceiling_get_gbps},
                      {"get_of_ceiling", p.get_of_ceiling},
                      {"put_batch_ms", p.put_batch_ms},
                      {"get_batch_ms", p.get_batch_ms},
                      {"ceiling_get_batch_ms", p.ceiling_get_batch_ms},
                      {"verify_copy_batch_ms", p.verify_copy_batch_ms},
                      {"verified_ceiling_of_ceiling", p.verified_ceiling_of_ceiling},
                      {"keyed_put_GBps", p.keyed_put_gbps},
                      {"keyed_put_of_unkeyed", p.keyed_put_of_unkeyed()},
                      {"keyed_get_GBps", p.keyed_get_gbps},
                      {"keyed_get_of_unkeyed", p.keyed_get_of_unkeyed()},
                      {"verified_reads", p.verified_reads}});
    }
  }
  std::string urls;
  for (const std::string& url : o.urls) {
    if (!urls.empty()) urls += ',';
    urls += tiers::shared::redacted_redis_url(url);
  }
  std::cout << "kvtier bench shared: " << urls
            << "; ceiling: raw pipelined SET, then GET, of values of the same size, a batch per pipeline; keyed: the "
               "store under a tier key (HMAC-SHA256 of every value); verify_copy: XXH3 and the copy into a page of "
               "the raw GETs' payloads, what a verified fetch adds on the client; verified_ceiling_of_ceiling: raw / "
               "(raw + verify_copy), the most such a fetch can reach here; ratios: medians of each iteration's ratio\n"
            << "targets: fetch >= " << measure::SharedPoint::kGetTarget
            << " of raw GET at batches of 16 and up, >= " << measure::SharedPoint::kGetTargetBatchOne
            << " at batch 1; publish >= " << measure::SharedPoint::kPutTarget << " of raw SET\n";
  write_outputs(rows, o.json, o.csv);
  return 0;
}

template <class Run, class Options>
void on_run(CLI::App* cmd, std::shared_ptr<Options> o, Run run, int& exit_code, const char* name) {
  cmd->callback([o, run, &exit_code, name] {
    try {
      exit_code = run(*o);
    } catch (const std::exception& error) {
      std::cerr << "kvtier bench " << name << ": " << error.what() << '\n';
      exit_code = 2;
    }
  });
}

}  // namespace

void add_bench_command(CLI::App& app, int& exit_code) {
  CLI::App* bench = app.add_subcommand("bench",
                                       "Measure the allocator cycle, swap, disk or shared-store bandwidth, or cache "
                                       "policies, against same-run baselines");
  bench->require_subcommand(1);

  auto a = std::make_shared<AllocOptions>();
  CLI::App* alloc = bench->add_subcommand(
      "alloc", "Request-cycle throughput of every backend and policy as a fraction of a minimal allocator (same run)");
  alloc->add_option("--stream", a->stream, "shared_half | mooncake | all")->capture_default_str();
  alloc->add_option("--trace", a->trace, "the Mooncake trace the mooncake stream reads")->capture_default_str();
  alloc->add_option("--rounds", a->rounds, "alternated backend/floor rounds (medians)")->capture_default_str();
  alloc->add_option("--json", a->json, "write the rows as JSON to this file")->check(non_empty());
  alloc->add_option("--csv", a->csv, "write the rows as CSV to this file")->check(non_empty());
  on_run(alloc, a, run_alloc, exit_code, "alloc");

  auto s = std::make_shared<SwapOptions>();
  CLI::App* swap = bench->add_subcommand(
      "swap", "Swap bandwidth between scattered G1 pages and pinned G2 pages, next to the link's ceiling (same run)");
  swap->add_option("--device", s->device, "auto | host | cuda")->capture_default_str();
  swap->add_option("--page-bytes", s->page_bytes, "page sizes (multiples of 256)")
      ->delimiter(',')
      ->capture_default_str();
  swap->add_option("--batch", s->batch, "pages per copy (fewer for large pages: at most 256 MiB)")
      ->capture_default_str();
  swap->add_option("--paths", s->paths, "per_page | batched | staged | engine")->delimiter(',')->capture_default_str();
  swap->add_option("--direction", s->direction, "out | in | both")->capture_default_str();
  swap->add_option("--iterations", s->iterations, "alternations of the path and the ceiling")->capture_default_str();
  swap->add_option("--json", s->json, "write the rows as JSON to this file")->check(non_empty());
  swap->add_option("--csv", s->csv, "write the rows as CSV to this file")->check(non_empty());
  on_run(swap, s, run_swap, exit_code, "swap");

  auto d = std::make_shared<DiskOptions>();
  CLI::App* disk = bench->add_subcommand(
      "disk",
      "G3 write and read bandwidth per page size and queue depth, next to the file system's sequential "
      "O_DIRECT ceiling (same run)");
  disk->add_option("--dir", d->dir, "a directory on the file system to measure (default: a fresh temporary one)")
      ->check(non_empty());
  disk->add_option("--page-bytes", d->page_bytes, "page sizes (multiples of 64)")
      ->delimiter(',')
      ->capture_default_str();
  disk->add_option("--queue-depths", d->queue_depths, "I/O operations in flight")
      ->delimiter(',')
      ->capture_default_str();
  disk->add_option("--megabytes", d->megabytes, "payload per measurement")->capture_default_str();
  disk->add_option("--iterations", d->iterations, "alternations of the store and the ceiling (medians)")
      ->capture_default_str();
  disk->add_option("--disk-sync", d->sync,
                   "none | batch: the store counts a block stored once an fdatasync covered it, and the ceiling's "
                   "write ends with one")
      ->check(CLI::IsMember({"none", "batch"}))
      ->capture_default_str();
  disk->add_option("--json", d->json, "write the rows as JSON to this file")->check(non_empty());
  disk->add_option("--csv", d->csv, "write the rows as CSV to this file")->check(non_empty());
  on_run(disk, d, run_disk, exit_code, "disk");

  auto sh = std::make_shared<SharedOptions>();
  CLI::App* shared = bench->add_subcommand(
      "shared",
      "G4 publish and fetch bandwidth and batch latency per page size and batch, next to raw pipelined SET/GET of "
      "the same value sizes on the same store (same run)");
  shared->add_option("--shared-tier", sh->urls, "the store: redis://HOST:PORT, or cluster seeds (comma-separated)")
      ->delimiter(',')
      ->required();
  shared->add_option("--page-bytes", sh->page_bytes, "page sizes (multiples of 64)")
      ->delimiter(',')
      ->capture_default_str();
  shared->add_option("--batches", sh->batches, "blocks per publish burst, lookup and read")
      ->delimiter(',')
      ->capture_default_str();
  shared->add_option("--megabytes", sh->megabytes, "payload per measurement")->capture_default_str();
  shared->add_option("--iterations", sh->iterations, "alternations of the store and the ceiling (medians)")
      ->capture_default_str();
  shared->add_option("--json", sh->json, "write the rows as JSON to this file")->check(non_empty());
  shared->add_option("--csv", sh->csv, "write the rows as CSV to this file")->check(non_empty());
  on_run(shared, sh, run_shared, exit_code, "shared");

  add_bench_policy_command(*bench, exit_code);
}

}  // namespace kvtier::cli
