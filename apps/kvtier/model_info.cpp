#include "model_info.hpp"

#include <iostream>

#include "kvtier/core/errors.hpp"
#include "kvtier/model/model_config.hpp"
#include "kvtier/model/model_presets.hpp"

namespace kvtier::cli {

model::ModelDescription load_described_model(const ModelInfoOptions& options) {
  if (!options.model.empty() && !options.model_config.empty()) {
    throw ConfigError("--model and --model-config name one model: give one of them");
  }
  const model::ModelDescription described =
      options.model.empty() ? model::load_model_config(options.model_config) : model::preset(options.model);
  return model::with_kv_cache_dtype(described, options.kv_cache_dtype);
}

nlohmann::json describe_model(const ModelInfoOptions& options) {
  model::ModelDescription described = load_described_model(options);
  if (options.no_hybrid) described = model::without_hybrid(described);
  const ModelGeometry geometry = described.geometry();
  nlohmann::json groups = nlohmann::json::array();
  for (const ResolvedGroup& group : geometry.groups()) {
    nlohmann::json g = {{"kind", group_kind_name(group.spec.kind)},     {"layers", group.spec.layers},
                        {"block_size", group.spec.block_size},          {"page_bytes", group.page_bytes},
                        {"padded_page_bytes", group.padded_page_bytes}, {"format", group.format().describe()}};
    if (group.spec.sliding_window != 0) g["sliding_window"] = group.spec.sliding_window;
    if (group.spec.attention_chunk_size != 0) g["attention_chunk_size"] = group.spec.attention_chunk_size;
    if (group.spec.kind == GroupKind::Mamba) {
      g["state_bytes"] = group.spec.state_bytes;
      g["conv_state_bytes"] = group.spec.conv_state_bytes;
    }
    groups.push_back(std::move(g));
  }
  const std::uint64_t pages = model::pages_in(geometry, options.gpu_memory_gb);
  nlohmann::json out = {{"name", described.name},
                        {"source", described.source},
                        {"layers", described.layer_summary},
                        {"groups", std::move(groups)},
                        {"page_bytes", geometry.page_bytes()},
                        {"hash_block_size", geometry.hash_block_size()},
                        {"scheduler_block_size", geometry.scheduler_block_size()},
                        {"null_page", geometry.has_null_page()},
                        {"kv_cache_dtype", options.kv_cache_dtype},
                        {"gpu_memory_gb", options.gpu_memory_gb},
                        {"pages", pages}};
  if (!options.no_hybrid) {
    try {
      const ModelGeometry single = model::without_hybrid(described).geometry();
      if (geometry.has_null_page()) {
        out["single_group"] = {{"page_bytes", single.page_bytes()},
                               {"pages", model::pages_in(single, options.gpu_memory_gb)},
                               {"block_size", single.groups()[0].spec.block_size}};
      }
    } catch (const ConfigError&) {
      out["single_group"] = nullptr;  // a recurrent state has no single-group form
    }
  }
  return out;
}

void print_model(const nlohmann::json& model) {
  std::cout << "model:    " << model["name"].get<std::string>() << " (" << model["layers"].get<std::string>() << "; "
            << model["source"].get<std::string>() << ")\n";
  for (const auto& g : model["groups"]) {
    std::cout << "  group:  " << g["kind"].get<std::string>();
    if (g.contains("sliding_window")) std::cout << " W " << g["sliding_window"].get<std::uint64_t>();
    if (g.contains("attention_chunk_size")) std::cout << " C " << g["attention_chunk_size"].get<std::uint64_t>();
    std::cout << ", " << g["format"].get<std::string>() << ", " << g["layers"].get<std::uint64_t>() << " layers, block "
              << g["block_size"].get<std::uint64_t>() << " tokens, page " << g["page_bytes"].get<std::uint64_t>()
              << " bytes (padded to " << g["padded_page_bytes"].get<std::uint64_t>() << ")\n";
  }
  std::cout << "  pool:   " << model["pages"].get<std::uint64_t>() << " pages of "
            << model["page_bytes"].get<std::uint64_t>() << " bytes in " << model["gpu_memory_gb"].get<double>()
            << " GiB" << (model["null_page"].get<bool>() ? " (one is the null page)" : "") << "; hash unit "
            << model["hash_block_size"].get<std::uint64_t>() << ", scheduler unit "
            << model["scheduler_block_size"].get<std::uint64_t>() << " tokens\n";
  if (model.contains("single_group") && !model["single_group"].is_null()) {
    std::cout << "  --no-hybrid: " << model["single_group"]["pages"].get<std::uint64_t>() << " pages of "
              << model["single_group"]["page_bytes"].get<std::uint64_t>() << " bytes\n";
  }
}

}  // namespace kvtier::cli
