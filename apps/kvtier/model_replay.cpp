#include "model_replay.hpp"

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "kvtier/core/errors.hpp"
#include "kvtier/memory/runtime_factory.hpp"
#include "kvtier/model/model_config.hpp"
#include "kvtier/model/model_presets.hpp"
#include "kvtier/replay/group_kv_fill.hpp"
#include "model_info.hpp"
#include "replay_report.hpp"
#include "result_table.hpp"

namespace kvtier::cli {
namespace {

/// One form of the model (hybrid, or forced to one group) as a replay's settings.
struct ModelForm {
  model::ModelDescription description;
  ModelGeometry geometry;
  std::uint32_t capacity = 0;
};

ModelForm form_of(model::ModelDescription description, double gib) {
  ModelGeometry geometry = description.geometry();
  const std::uint64_t pages = model::pages_in(geometry, gib);
  if (pages < 2 || pages > 0xFFFFFFF0ULL) {
    throw ConfigError(std::to_string(gib) + " GiB hold " + std::to_string(pages) + " pages of " +
                      std::to_string(geometry.page_bytes()) + " bytes of " + description.name);
  }
  return ModelForm{.description = std::move(description),
                   .geometry = std::move(geometry),
                   .capacity = static_cast<std::uint32_t>(pages)};
}

/// The longest request a pool of one full-attention group holds alone (the
/// replay keeps a page spare past the last token).
std::size_t single_group_tokens(const ModelForm& form) {
  return (std::size_t{form.capacity} - 2) * form.geometry.groups().front().spec.block_size;
}

/// The bytes of a pool page in memory (none: the model's real page): --check-page-bytes, raised so that
/// every attention group's K/V fits in its small form, or its attention is never checked (a Mamba state
/// raises Qwen3-Next's attention block past what 4 KiB holds of one small head).
std::optional<std::uint64_t> memory_page_bytes(const ModelForm& form, const ModelReplayOptions& options) {
  if (!form.geometry.has_null_page() || options.check_page_bytes == 0) return std::nullopt;
  std::uint64_t bytes = options.check_page_bytes;
  for (const ResolvedGroup& group : form.geometry.groups()) {
    bytes = std::max(bytes, replay::smallest_check_page_bytes(group));
  }
  return (bytes + 63) / 64 * 64;  // the session takes multiples of 8
}

replay::ReplayConfig config_for(const ModelForm& form, const ModelReplayOptions& options, replay::ReplayConfig base,
                                std::size_t max_model_len) {
  base.session.manager.capacity = form.capacity;
  if (form.geometry.has_null_page()) {
    base.session.manager.groups = form.description.groups;
    base.session.manager.block_size_fixed = false;  // vLLM raises the attention block to cover a Mamba state
  } else {
    // One plain full-attention group: the replay's own pages (--layers, --kv-heads, --head-dim) with the
    // model's page count, so its K/V writes and attention check stay affordable.
    base.session.manager.groups.clear();
    base.session.manager.block_size = form.geometry.groups().front().spec.block_size;
  }
  if (const auto bytes = memory_page_bytes(form, options)) base.session.group_page_bytes = *bytes;
  base.max_model_len = max_model_len;
  return base;
}

nlohmann::ordered_json comparison(const replay::ReplayReport& hybrid, const replay::ReplayReport& single,
                                  const ModelForm& hybrid_form, const ModelForm& single_form) {
  const auto ratio = [](double a, double b) { return b > 0.0 ? a / b : 0.0; };
  return {{"pages", ratio(hybrid_form.capacity, single_form.capacity)},
          {"mean_running", ratio(hybrid.mean_running(), single.mean_running())},
          {"peak_running", ratio(double(hybrid.peak_running), double(single.peak_running))},
          {"virtual_time", ratio(hybrid.virtual_ms, single.virtual_ms)},
          {"preemptions_hybrid", hybrid.preemptions},
          {"preemptions_no_hybrid", single.preemptions}};
}

/// One form's replay over config.instances instances (each its own session;
/// with --shared-tier they share G4): the combined report, and its JSON with
/// the instances' own beside it.
std::pair<replay::ReplayReport, nlohmann::ordered_json> replay_form(memory::Runtime& runtime,
                                                                    const replay::ReplayConfig& config,
                                                                    const std::vector<replay::TraceRequest>& requests,
                                                                    const std::string& workload,
                                                                    const std::string& runtime_name) {
  const std::vector<replay::ReplayReport> reports = replay::replay_instances(runtime, config, requests);
  replay::ReplayReport report = replay::combine(reports);
  nlohmann::ordered_json json = report_json(report, config, workload, runtime_name);
  if (reports.size() > 1) {
    json["per_instance"] = nlohmann::ordered_json::array();
    for (const replay::ReplayReport& r : reports) {
      json["per_instance"].push_back(report_json(r, config, workload, runtime_name));
    }
  }
  return {std::move(report), std::move(json)};
}

}  // namespace

int run_model_replay(const ModelReplayOptions& options, replay::ReplayConfig base, memory::Runtime& runtime,
                     const std::vector<replay::TraceRequest>& requests, const std::string& workload) {
  const ModelInfoOptions info{.model = options.model,
                              .model_config = options.model_config,
                              .gpu_memory_gb = options.gpu_memory_gb,
                              .no_hybrid = options.no_hybrid,
                              .kv_cache_dtype = options.kv_cache_dtype};
  const model::ModelDescription described = load_described_model(info);
  std::optional<ModelForm> single;
  if (options.no_hybrid || options.compare) {
    try {
      single = form_of(model::without_hybrid(described), options.gpu_memory_gb);
    } catch (const ConfigError&) {
      if (options.no_hybrid) throw;  // a recurrent state has no single-group form
    }
  }
  const ModelForm hybrid = form_of(described, options.gpu_memory_gb);
  // Nothing to compare where one group is already the model's only form (an MLA model).
  const bool compare = !options.no_hybrid && single && hybrid.geometry.has_null_page() &&
                       single->geometry.describe() != hybrid.geometry.describe();
  // vLLM refuses to start when one request of max_model_len does not fit the
  // pool: the default is the model's, lowered to what the single-group pool
  // holds when it runs too, so both serve the same requests.
  std::size_t max_model_len = options.max_model_len.value_or(described.max_model_len);
  if (max_model_len == 0) max_model_len = kMaxSequenceTokens;
  if (!options.max_model_len) {
    if (options.no_hybrid || compare) max_model_len = std::min(max_model_len, single_group_tokens(*single));
    if (!hybrid.geometry.has_null_page()) max_model_len = std::min(max_model_len, single_group_tokens(hybrid));
  }
  const nlohmann::json model_description = describe_model(info);
  nlohmann::ordered_json out;
  out["model"] = model_description;
  out["max_model_len"] = max_model_len;
  out["check_page_bytes"] = options.check_page_bytes;
  const std::optional<std::uint64_t> in_memory = memory_page_bytes(hybrid, options);
  out["memory_page_bytes"] = in_memory ? nlohmann::ordered_json(*in_memory) : nlohmann::ordered_json(nullptr);
  print_model(model_description);
  std::string pages = "pages in memory: the replay's geometry (--layers, --kv-heads, --head-dim)";
  if (hybrid.geometry.has_null_page() && !options.no_hybrid) {
    pages = !in_memory ? std::string("pages in memory: the model's")
                       : "pages in memory: " + std::to_string(*in_memory) + " bytes each (the model's page count" +
                             (*in_memory > options.check_page_bytes ? ", raised from --check-page-bytes so every "
                                                                      "attention group's K/V fits"
                                                                    : std::string()) +
                             "; --check-page-bytes 0 for its real pages)";
  }
  std::cout << "  max_model_len " << max_model_len << " tokens; " << pages << "\n\n";
  const std::string runtime_name = memory::runtime_kind_name(runtime.kind());
  const ModelForm& first = options.no_hybrid ? *single : hybrid;
  const replay::ReplayConfig first_config = config_for(first, options, base, max_model_len);
  auto [report, report_out] = replay_form(runtime, first_config, requests, workload, runtime_name);
  out[options.no_hybrid ? "no_hybrid" : "hybrid"] = std::move(report_out);
  print_report(out[options.no_hybrid ? "no_hybrid" : "hybrid"]);
  std::size_t mismatches = report.mismatches + report.attention_mismatches;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array({out[options.no_hybrid ? "no_hybrid" : "hybrid"]});
  if (compare) {
    const replay::ReplayConfig single_config = config_for(*single, options, base, max_model_len);
    auto [baseline, baseline_out] = replay_form(runtime, single_config, requests, workload, runtime_name);
    out["no_hybrid"] = std::move(baseline_out);
    std::cout << "\n--no-hybrid (one full-attention group, vLLM's --disable-hybrid-kv-cache-manager):\n";
    print_report(out["no_hybrid"]);
    rows.push_back(out["no_hybrid"]);
    mismatches += baseline.mismatches + baseline.attention_mismatches;
    out["hybrid_over_no_hybrid"] = comparison(report, baseline, hybrid, *single);
    const auto& c = out["hybrid_over_no_hybrid"];
    std::cout << "\nhybrid / --no-hybrid: " << c["pages"].get<double>() << "x the pages (" << hybrid.capacity << " vs "
              << single->capacity << "), " << c["mean_running"].get<double>() << "x the requests running on average ("
              << report.mean_running() << " vs " << baseline.mean_running() << "), " << c["peak_running"].get<double>()
              << "x at most (" << report.peak_running << " vs " << baseline.peak_running << "), "
              << c["virtual_time"].get<double>() << "x the virtual time; preemptions " << report.preemptions << " vs "
              << baseline.preemptions << "\n";
  }
  if (!options.json.empty()) write_json(options.json, out);
  if (!options.csv.empty()) write_csv(options.csv, rows);
  return mismatches == 0 ? 0 : 1;
}

}  // namespace kvtier::cli
