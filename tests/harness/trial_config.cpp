#include "harness/trial_config.hpp"

#include <nlohmann/json.hpp>
#include <random>
#include <vector>

namespace kvtier::harness {

TrialConfig TrialConfig::from_seed(std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ 0x9E3779B97F4A7C15ULL);
  const auto pick = [&](std::uint64_t n) { return static_cast<std::uint32_t>(rng() % n); };
  TrialConfig config;
  config.seed = seed;
  config.backend = pick(2) == 0 ? "native" : "kvbm";
  static const char* const kEvictions[] = {"lineage", "lru", "multi_lru"};
  config.eviction = kEvictions[pick(3)];
  config.capacity = 2 + pick(11);
  config.block_size = 2 + pick(4);
  config.prefix_caching = pick(5) != 0;
  config.layout_kind = pick(2) == 0 ? "page-major" : "layer-major";
  static const char* const kDtypes[] = {"bf16", "fp16", "fp32", "fp8"};
  config.dtype = kDtypes[pick(4)];
  if (pick(3) != 0) {
    config.host_blocks = 1 + pick(8);
    config.offload_batch = 1 + pick(3);
    config.verify_swaps = pick(2) == 0;
  }
  // Drawn last, so the trials without groups stay what their seeds always made.
  if (config.backend == "native" && pick(3) == 0) {
    const std::uint32_t bs = config.block_size;
    const nlohmann::json full = {{"kind", "full_attention"}};
    const nlohmann::json window = {{"kind", "sliding_window"}, {"sliding_window", 1 + bs + pick(2 * bs)}};
    const nlohmann::json chunked = {{"kind", "chunked_local_attention"}, {"attention_chunk_size", bs * (1 + pick(3))}};
    static const char* const kModes[] = {"none", "align", "all"};
    const nlohmann::json mamba = {
        {"kind", "mamba"}, {"mamba_mode", kModes[pick(3)]}, {"layout", {{"state_bytes", 8 + pick(64)}}}};
    const std::vector<nlohmann::json> combos{{full, window},  {full, chunked},      {full, mamba},
                                             {window, mamba}, {full, full, window}, {full, window, mamba}};
    config.groups = combos[pick(combos.size())].dump();
    config.capacity += 2 * pick(8);  // room for every group's pages
  }
  // kvtier's history-aware orders (docs/policies.md) take half the KVBM trials; drawn
  // after everything else, so the other fields of every seed stay what they were.
  if (config.backend == "kvbm" && pick(2) == 0) {
    static const char* const kLeafOrders[] = {"lru2", "lfu_da", "arc", "s3fifo", "adaptive"};
    config.eviction = kLeafOrders[pick(5)];
  }
  return config;
}

std::string TrialConfig::init_line() const {
  nlohmann::ordered_json init;
  init["op"] = "init";
  init["backend"] = backend;
  if (backend == "kvbm") init["eviction"] = eviction;
  init["capacity"] = capacity;
  init["block_size"] = block_size;
  init["prefix_caching"] = prefix_caching;
  init["device"] = "host";
  init["seed"] = seed;
  if (host_blocks > 0) {
    init["host_blocks"] = host_blocks;
    init["offload_batch"] = offload_batch;
    init["verify_swaps"] = verify_swaps;
  }
  init["layout"] = {{"layers", 1}, {"kv_heads", 1}, {"head_dim", 8}, {"dtype", dtype}, {"kind", layout_kind}};
  if (!groups.empty()) init["groups"] = nlohmann::ordered_json::parse(groups);
  return init.dump();
}

std::string TrialConfig::describe() const {
  return "seed " + std::to_string(seed) + ": " + backend + (backend == "kvbm" ? "/" + eviction : "") + ", capacity " +
         std::to_string(capacity) + ", block size " + std::to_string(block_size) + ", caching " +
         (prefix_caching ? "on" : "off") + ", " + layout_kind + " " + dtype +
         (host_blocks > 0 ? ", G2 " + std::to_string(host_blocks) + " blocks (batch " + std::to_string(offload_batch) +
                                (verify_swaps ? ", verified)" : ")")
                          : "") +
         (groups.empty() ? "" : ", groups " + groups);
}

}  // namespace kvtier::harness
