#include "kvtier/measure/policy_stack_run.hpp"

#include <algorithm>
#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/memory/host_runtime.hpp"
#include "kvtier/replay/replayer.hpp"

namespace kvtier::measure {

StackHits run_policy_in_stack(const std::vector<replay::TraceRequest>& requests, const OnlinePolicy& policy,
                              std::size_t capacity, const PolicyStack& stack) {
  if (capacity == 0 || capacity > 0xFFFFFFF0U) throw ConfigError("a policy needs a capacity of 1 to 2^32-16 blocks");
  if (stack.host_blocks == 0) throw ConfigError("a tier stack starts with G2: host blocks > 0");
  constexpr std::size_t kBlock = replay::kTraceBlockTokens;
  std::vector<replay::TraceRequest> held = requests;
  for (replay::TraceRequest& r : held) {
    r.timestamp_ms = 0.0;  // one request at a time, in order
    r.output_length = 0;
    if (r.hash_ids.size() > capacity) {
      r.hash_ids.resize(capacity);
      r.input_length = capacity * kBlock;
    }
  }
  replay::ReplayConfig config;
  config.session.manager = g1::G1ManagerConfig{.capacity = static_cast<std::uint32_t>(capacity),
                                               .block_size = static_cast<std::uint32_t>(kBlock),
                                               .dp_rank = 0,
                                               .backend = policy.backend,
                                               .enable_prefix_caching = true,
                                               .eviction = policy.eviction,
                                               .native_eviction = policy.native_eviction};
  // Small pages: the figures are blocks; the bytes still move and are checked.
  config.session.geometry = KvGeometry{.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype = KvDtype::Bf16};
  config.session.device = memory::RuntimeChoice::Host;
  config.session.host_blocks = stack.host_blocks;
  config.session.g2_admission = stack.g2_admission;
  std::filesystem::path dir;
  if (stack.disk_blocks > 0) {
    dir = stack.disk_dir / (policy.name + "-" + std::to_string(capacity));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    config.session.disk = session::DiskTierSettings{.path = dir, .blocks = stack.disk_blocks};
    config.session.g3_admission = stack.g3_admission;
  }
  config.max_running = 1;
  config.token_budget = capacity * kBlock;
  config.output_tokens = 0;
  config.attention_check_every = 0;
  memory::HostRuntime runtime;
  const replay::ReplayReport report = replay::replay(runtime, config, held);
  if (!dir.empty()) std::filesystem::remove_all(dir);
  return StackHits{.g1 = report.g1_hit_blocks,
                   .g2 = report.g2_hit_blocks,
                   .g3 = report.g3_hit_blocks,
                   .g2_bytes_written = report.swap_out_bytes,
                   .g2_bytes_read = report.swap_in_bytes,
                   .g3_bytes_written = report.g3_bytes_written,
                   .g3_bytes_read = report.g3_bytes_read,
                   .mismatches = report.mismatches};
}

}  // namespace kvtier::measure
