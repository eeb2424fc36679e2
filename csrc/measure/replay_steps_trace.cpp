#include "kvtier/measure/replay_steps_trace.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "kvtier/core/errors.hpp"

namespace kvtier::measure {

PrefixTreeTrace replay_steps_trace(const std::vector<replay::TraceRequest>& requests,
                                   const std::vector<replay::PrefixStep>& steps, std::size_t block_tokens) {
  if (block_tokens == 0 || replay::kTraceBlockTokens % block_tokens != 0) {
    throw ConfigError("a block of " + std::to_string(block_tokens) + " tokens does not divide the trace's " +
                      std::to_string(replay::kTraceBlockTokens));
  }
  const std::size_t per_id = replay::kTraceBlockTokens / block_tokens;
  // The ids' own tree: a node per distinct run of ids from the start, so the
  // same id after another prefix is another node (its tokens follow others).
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::uint32_t> child;
  std::vector<std::uint32_t> id_parent;
  std::vector<std::uint32_t> id_depth;
  std::vector<std::vector<std::uint32_t>> chains(requests.size());  // each request's nodes, built when first seen
  const auto chain_of = [&](std::size_t r) -> const std::vector<std::uint32_t>& {
    std::vector<std::uint32_t>& chain = chains[r];
    if (!chain.empty() || requests[r].hash_ids.empty()) return chain;
    std::uint32_t parent = kNoParentBlock;
    for (const std::uint64_t id : requests[r].hash_ids) {
      auto [it, fresh] = child.try_emplace({parent, id}, static_cast<std::uint32_t>(id_parent.size()));
      if (fresh) {
        id_depth.push_back(parent == kNoParentBlock ? 0 : id_depth[parent] + 1);
        id_parent.push_back(parent);
      }
      chain.push_back(it->second);
      parent = it->second;
    }
    return chain;
  };
  PrefixTreeTrace trace;
  trace.requests.reserve(steps.size());
  trace.counted.reserve(steps.size());
  for (const replay::PrefixStep& step : steps) {
    if (step.request >= requests.size()) {
      throw ConfigError("a replay step names request " + std::to_string(step.request) + " of " +
                        std::to_string(requests.size()));
    }
    const std::vector<std::uint32_t>& chain = chain_of(step.request);
    if (step.blocks > chain.size() * per_id) {
      throw ConfigError("a replay step asks for " + std::to_string(step.blocks) + " blocks of request " +
                        std::to_string(step.request) + ", which has " + std::to_string(chain.size() * per_id));
    }
    std::vector<std::uint32_t> blocks(step.blocks);
    for (std::size_t j = 0; j < step.blocks; ++j) {
      blocks[j] = static_cast<std::uint32_t>(chain[j / per_id] * per_id + j % per_id);
    }
    trace.requests.push_back(std::move(blocks));
    trace.counted.push_back(step.counted);
  }
  // Block (node, k) is dense id node * per_id + k; its parent is the block before it.
  const std::size_t nodes = id_parent.size();
  trace.parent.resize(nodes * per_id);
  trace.depth.resize(nodes * per_id);
  trace.hash_id.resize(nodes * per_id);
  for (std::size_t n = 0; n < nodes; ++n) {
    for (std::size_t k = 0; k < per_id; ++k) {
      const std::size_t b = n * per_id + k;
      trace.parent[b] = k > 0                            ? static_cast<std::uint32_t>(b - 1)
                        : id_parent[n] == kNoParentBlock ? kNoParentBlock
                                                         : static_cast<std::uint32_t>((id_parent[n] + 1) * per_id - 1);
      trace.depth[b] = static_cast<std::uint32_t>(id_depth[n] * per_id + k);
      trace.hash_id[b] = b;
    }
  }
  return trace;
}

}  // namespace kvtier::measure
