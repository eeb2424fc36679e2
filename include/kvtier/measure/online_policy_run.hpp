#pragma once
// Online cache policies measured where they run: in kvtier's own G1 managers
// (not a simulation of them), fed a prefix-tree trace one request at a time
// with the hit-rate definition of offline_policies.hpp.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "kvtier/core/block_hash.hpp"
#include "kvtier/core/lineage_hash.hpp"
#include "kvtier/core/unique_block.hpp"
#include "kvtier/g1/g1_manager.hpp"
#include "kvtier/measure/offline_policies.hpp"
#include "kvtier/measure/prefix_tree_trace.hpp"

namespace kvtier::measure {

/// A policy by the name reports use: a G1 backend and its eviction order.
struct OnlinePolicy {
  std::string name;
  g1::G1Backend backend = g1::G1Backend::Native;
  g1::EvictionBackend eviction = g1::EvictionBackend::Lineage;  // KVBM's pool
  std::optional<g1::EvictionBackend> native_eviction{};         // the native pool's; nullopt: vLLM's LRU
};

/// Every online policy kvtier has: "lru" (the native backend's vLLM order,
/// the default), the orders of docs/policies.md on the native backend under
/// their own names ("lru2", "lfu_da", "arc", "s3fifo", "adaptive"), and the
/// KVBM backend's pools as "kvbm_<order>" (Dynamo's lineage, lru, multi_lru
/// and the same five).
std::vector<OnlinePolicy> online_policies();
/// The policy of that name; ConfigError naming the known ones otherwise.
OnlinePolicy online_policy(const std::string& name);

/// The trace's blocks as a manager sees them: each dense block one full block
/// of the first `block_tokens` (2..512) of the tokens the replay synthesises
/// for its id (the partial last block counts as one), hashed and chained as
/// requests are. ConfigError for another block size.
struct TraceBlocks {
  std::uint32_t block_tokens = 0;
  std::vector<UniqueBlock> block;
  std::vector<LocalBlockHash> local;
  std::vector<PositionalLineageHash> plh;
};
TraceBlocks trace_blocks(const PrefixTreeTrace& trace, std::uint32_t block_tokens = 512);

/// Replays the trace through a fresh manager of `capacity` pages running the
/// policy: per request the resident prefix (the hits), the Use, the
/// computed prefix, then the Deref (leaf first). A request longer than the
/// capacity uses its first `capacity` blocks: no block deeper can ever be a
/// hit. ConfigError when capacity is 0.
PolicyHits run_online_policy(const PrefixTreeTrace& trace, const TraceBlocks& blocks, const OnlinePolicy& policy,
                             std::size_t capacity);

}  // namespace kvtier::measure
