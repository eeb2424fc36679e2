#pragma once
// Presets of real models (docs/models.md cites each one's published
// config.json): the fields of their config.json that decide the KV cache,
// read by read_model_config like any other config.
#include <string>
#include <vector>

#include "kvtier/model/model_config.hpp"

namespace kvtier::model {

/// "llama-3.1-8b", "gpt-oss-20b", "gpt-oss-120b", "gemma-3-27b",
/// "llama-4-scout", "qwen3-next-80b-a3b", "nemotron-h-8b", "deepseek-v3".
std::vector<std::string> preset_names();
/// The preset's description; ConfigError for an unknown name (listing the presets).
ModelDescription preset(const std::string& name);

}  // namespace kvtier::model
