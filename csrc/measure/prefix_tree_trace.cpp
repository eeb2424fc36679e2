#include "kvtier/measure/prefix_tree_trace.hpp"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "kvtier/core/errors.hpp"

namespace kvtier::measure {

std::size_t PrefixTreeTrace::prompt_blocks() const noexcept {
  std::size_t n = 0;
  for (std::size_t r = 0; r < requests.size(); ++r) n += counts(r) ? requests[r].size() : 0;
  return n;
}

std::size_t PrefixTreeTrace::longest_request() const noexcept {
  std::size_t n = 0;
  for (const auto& request : requests) n = std::max(n, request.size());
  return n;
}

PrefixTreeTrace prefix_tree_trace(const std::vector<std::vector<std::uint64_t>>& paths) {
  PrefixTreeTrace trace;
  std::unordered_map<std::uint64_t, std::uint32_t> dense;
  trace.requests.reserve(paths.size());
  for (std::size_t r = 0; r < paths.size(); ++r) {
    std::vector<std::uint32_t> blocks;
    blocks.reserve(paths[r].size());
    std::uint32_t parent = kNoParentBlock;
    for (const std::uint64_t id : paths[r]) {
      auto [it, fresh] = dense.try_emplace(id, static_cast<std::uint32_t>(trace.parent.size()));
      const std::uint32_t block = it->second;
      if (fresh) {
        trace.parent.push_back(parent);
        trace.depth.push_back(parent == kNoParentBlock ? 0 : trace.depth[parent] + 1);
        trace.hash_id.push_back(id);
      } else if (trace.parent[block] != parent) {
        const auto name = [&](std::uint32_t b) {
          return b == kNoParentBlock ? std::string("the start") : "id " + std::to_string(trace.hash_id[b]);
        };
        throw ConfigError("request " + std::to_string(r + 1) + ": hash id " + std::to_string(id) + " follows " +
                          name(parent) + " but followed " + name(trace.parent[block]) +
                          " before: the ids are not a prefix tree");
      }
      blocks.push_back(block);
      parent = block;
    }
    trace.requests.push_back(std::move(blocks));
  }
  return trace;
}

PrefixTreeTrace prefix_tree_trace(const std::vector<replay::TraceRequest>& requests) {
  std::vector<std::vector<std::uint64_t>> paths;
  paths.reserve(requests.size());
  for (const auto& request : requests) paths.push_back(request.hash_ids);
  return prefix_tree_trace(paths);
}

}  // namespace kvtier::measure
