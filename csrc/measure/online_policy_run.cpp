#include "kvtier/measure/online_policy_run.hpp"

#include <algorithm>
#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/move_block.hpp"
#include "kvtier/replay/trace.hpp"

namespace kvtier::measure {

std::vector<OnlinePolicy> online_policies() {
  using g1::EvictionBackend;
  using g1::G1Backend;
  std::vector<OnlinePolicy> policies{{"lru", G1Backend::Native, EvictionBackend::Lineage, std::nullopt}};
  constexpr EvictionBackend kLeafOrders[] = {EvictionBackend::Lru2, EvictionBackend::LfuDa, EvictionBackend::Arc,
                                             EvictionBackend::S3Fifo, EvictionBackend::Adaptive};
  for (const EvictionBackend order : kLeafOrders) {
    policies.push_back({g1::eviction_backend_name(order), G1Backend::Native, EvictionBackend::Lineage, order});
  }
  for (const EvictionBackend order : {EvictionBackend::Lineage, EvictionBackend::Lru, EvictionBackend::MultiLru}) {
    policies.push_back({std::string("kvbm_") + g1::eviction_backend_name(order), G1Backend::Kvbm, order, std::nullopt});
  }
  for (const EvictionBackend order : kLeafOrders) {
    policies.push_back({std::string("kvbm_") + g1::eviction_backend_name(order), G1Backend::Kvbm, order, std::nullopt});
  }
  return policies;
}

OnlinePolicy online_policy(const std::string& name) {
  std::string known;
  for (const OnlinePolicy& policy : online_policies()) {
    if (policy.name == name) return policy;
    known += (known.empty() ? "" : ", ") + policy.name;
  }
  throw ConfigError("unknown policy '" + name + "' (expected one of " + known + ")");
}

TraceBlocks trace_blocks(const PrefixTreeTrace& trace, std::uint32_t block_tokens) {
  TraceBlocks out{.block_tokens = block_tokens, .block = {}, .local = {}, .plh = {}};
  const std::size_t n = trace.unique_blocks();
  out.block.reserve(n);
  out.local.reserve(n);
  out.plh.reserve(n);
  if (block_tokens < 2 || block_tokens > replay::kTraceBlockTokens) {
    throw ConfigError("a trace block holds 2 to 512 tokens, not " + std::to_string(block_tokens));
  }
  BlockHashes hashes[1];
  for (std::size_t b = 0; b < n; ++b) {  // dense ids are numbered parent first
    // The replay's own tokens of this id: equal blocks, equal hashes, in either.
    const std::vector<TokenId> tokens = replay::synthesize_prompt(replay::TraceRequest{
        .timestamp_ms = 0.0, .input_length = block_tokens, .output_length = 0, .hash_ids = {trace.hash_id[b]}});
    const std::uint32_t parent = trace.parent[b];
    const std::optional<SequenceHash> parent_hash =
        parent == kNoParentBlock ? std::nullopt : std::optional<SequenceHash>(out.block[parent].hash());
    hash_full_blocks(tokens, block_tokens, parent_hash, hashes);
    out.block.push_back(UniqueBlock::full(hashes[0].sequence));
    out.local.push_back(hashes[0].local);
    out.plh.emplace_back(hashes[0].sequence, parent_hash, trace.depth[b]);
  }
  return out;
}

PolicyHits run_online_policy(const PrefixTreeTrace& trace, const TraceBlocks& blocks, const OnlinePolicy& policy,
                             std::size_t capacity) {
  if (capacity == 0) throw ConfigError("a policy needs a capacity of at least one block");
  g1::G1Manager manager(g1::G1ManagerConfig{.capacity = static_cast<std::uint32_t>(capacity),
                                            .block_size = blocks.block_tokens,
                                            .dp_rank = 0,
                                            .backend = policy.backend,
                                            .enable_prefix_caching = true,
                                            .eviction = policy.eviction,
                                            .native_eviction = policy.native_eviction});
  PolicyHits out{.hits = 0, .prompt_blocks = trace.prompt_blocks()};
  UseSignal use;
  DerefSignal deref;
  std::uint64_t next_owner = 1;
  for (const auto& request : trace.requests) {
    std::size_t prefix = 0;
    while (prefix < request.size() && manager.is_cached(blocks.block[request[prefix]].hash())) ++prefix;
    out.hits += prefix;
    const std::size_t held = std::min(request.size(), capacity);
    use.blocks.clear();
    use.local_hashes.clear();
    use.plhs.clear();
    for (std::size_t i = 0; i < held; ++i) {
      use.blocks.push_back(blocks.block[request[i]]);
      use.local_hashes.push_back(blocks.local[request[i]]);
      use.plhs.push_back(blocks.plh[request[i]]);
    }
    deref.blocks.assign(use.blocks.rbegin(), use.blocks.rend());
    const g1::OwnerId owner(next_owner++);
    const std::size_t reuse = policy.backend == g1::G1Backend::Native ? std::min(prefix, held) : 0;
    if (!manager.process_for_request(owner, use, reuse).is_ready()) {
      throw InvariantError("policy " + policy.name + ": a request of " + std::to_string(held) +
                           " blocks found no room in " + std::to_string(capacity) + " pages with nothing held");
    }
    manager.finalize_computed_prefix(owner, 0, held * blocks.block_tokens);
    manager.process_for_request(owner, deref);
  }
  return out;
}

}  // namespace kvtier::measure
