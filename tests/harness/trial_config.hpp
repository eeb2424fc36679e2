#pragma once
// One harness trial's settings, all derived from its seed so a failing seed
// names everything needed to reproduce it.
#include <cstdint>
#include <string>

namespace kvtier::harness {

struct TrialConfig {
  std::uint64_t seed = 0;
  std::string backend = "native";    // native | kvbm
  std::string eviction = "lineage";  // kvbm only: lineage | lru | multi_lru | lru2 | lfu_da | arc | s3fifo | adaptive
  std::uint32_t capacity = 8;
  std::uint32_t block_size = 4;
  bool prefix_caching = true;
  std::string layout_kind = "page-major";  // page-major | layer-major
  std::string dtype = "bf16";
  std::uint32_t host_blocks = 0;  // 0: no offload tier
  std::uint32_t offload_batch = 1;
  bool verify_swaps = false;
  /// KV cache groups (model-geometry.md): a JSON list for `init.groups`, or
  /// empty for today's one group. Native only, without an offload tier.
  std::string groups;

  /// Small capacities (so eviction and exhaustion happen often), both
  /// backends, every policy, caching on and off, both layouts, and an
  /// offload tier (small, so G2 evicts too) in most trials; a third of the
  /// native trials without one manage a hybrid model's groups instead.
  static TrialConfig from_seed(std::uint64_t seed);
  /// The script's `init` line for this trial.
  std::string init_line() const;
  /// One line that says what this trial ran, for reports.
  std::string describe() const;
};

}  // namespace kvtier::harness
