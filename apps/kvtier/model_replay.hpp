#pragma once
// `kvtier replay --model NAME | --model-config FILE --gpu-memory-gb G`: the
// trace on a real model's KV cache groups, its pool as many pages as G GiB
// hold, beside the same model forced to one full-attention group (vLLM's
// --disable-hybrid-kv-cache-manager, `--no-hybrid`): how many requests each
// holds at once, and every group's byte checks (docs/models.md).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvtier/memory/runtime.hpp"
#include "kvtier/replay/replayer.hpp"

namespace kvtier::cli {

struct ModelReplayOptions {
  std::string model;         // a preset name
  std::string model_config;  // or a Hugging Face config.json
  double gpu_memory_gb = 8.0;
  bool no_hybrid = false;               // only the single-group form
  bool compare = true;                  // also the single-group form, when the model has one
  std::string kv_cache_dtype = "auto";  // vLLM's --kv-cache-dtype
  /// Bytes of a pool page in memory for a manager with groups (the page
  /// count stays the model's); 0: the model's real page.
  std::uint64_t check_page_bytes = 4096;
  std::optional<std::size_t> max_model_len;  // default: the model's, lowered to what the pool holds
  std::string json;
  std::string csv;
  bool wanted() const { return !model.empty() || !model_config.empty(); }
};

/// Runs the replay (and the comparison) with `base`'s settings but the
/// pool, groups, max_model_len and attention check the model decides;
/// prints the model, each report and the ratios. Exit status: 0, or 1 on
/// any mismatch. ConfigError for settings a model replay cannot take.
int run_model_replay(const ModelReplayOptions& options, replay::ReplayConfig base, memory::Runtime& runtime,
                     const std::vector<replay::TraceRequest>& requests, const std::string& workload);

}  // namespace kvtier::cli
