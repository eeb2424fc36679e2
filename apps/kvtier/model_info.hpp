#pragma once
// `kvtier info --model NAME | --model-config FILE --gpu-memory-gb G`: what a
// real model's KV cache groups make of a GPU's memory (docs/models.md).
#include <nlohmann/json.hpp>
#include <string>

#include "kvtier/model/model_config.hpp"

namespace kvtier::cli {

struct ModelInfoOptions {
  std::string model;         // a preset name
  std::string model_config;  // or a Hugging Face config.json
  double gpu_memory_gb = 8.0;
  bool no_hybrid = false;               // vLLM's --disable-hybrid-kv-cache-manager
  std::string kv_cache_dtype = "auto";  // vLLM's --kv-cache-dtype: auto (the model's dtype) or a KvQuant name
  bool wanted() const { return !model.empty() || !model_config.empty(); }
};

/// The model a preset or a config.json describes, with its --kv-cache-dtype
/// applied (not --no-hybrid). ConfigError for both or neither named, or a
/// dtype the model's groups cannot hold.
model::ModelDescription load_described_model(const ModelInfoOptions& options);

/// The model's groups, page bytes with padding, units, and the pool G GiB
/// hold, beside the single-group form's where the model has one.
nlohmann::json describe_model(const ModelInfoOptions& options);
/// The same as text lines.
void print_model(const nlohmann::json& model);

}  // namespace kvtier::cli
