#include "kvtier/measure/offline_policies.hpp"

#include <deque>
#include <functional>
#include <limits>
#include <set>
#include <tuple>
#include <vector>

namespace kvtier::measure {
namespace {

/// The longest leading run of `blocks` that `resident` holds.
template <class Resident>
std::size_t resident_prefix(const std::vector<std::uint32_t>& blocks, const Resident& resident) {
  std::size_t n = 0;
  while (n < blocks.size() && resident[blocks[n]]) ++n;
  return n;
}

/// next[r][i]: the first request after r whose hits count that uses request
/// r's block i; `never` if none, or if a request that does not count makes
/// the block resident again before it (keeping it until then is worth nothing).
std::vector<std::vector<std::size_t>> next_uses(const PrefixTreeTrace& trace, std::size_t never) {
  std::vector<std::vector<std::size_t>> next(trace.requests.size());
  std::vector<std::size_t> upcoming(trace.unique_blocks(), never);
  for (std::size_t r = trace.requests.size(); r-- > 0;) {
    const auto& blocks = trace.requests[r];
    next[r].resize(blocks.size());
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      next[r][i] = upcoming[blocks[i]];
      upcoming[blocks[i]] = trace.counts(r) ? r : never;
    }
  }
  return next;
}

}  // namespace

PolicyHits belady_bound(const PrefixTreeTrace& trace, std::size_t capacity) {
  constexpr std::size_t kNever = std::numeric_limits<std::size_t>::max();
  const auto next = next_uses(trace, kNever);
  // The victim is the greatest (next use, depth, block): farthest first, the deeper on ties.
  using Key = std::tuple<std::size_t, std::uint32_t, std::uint32_t>;
  std::set<Key, std::greater<>> resident_keys;
  std::vector<std::size_t> key_of(trace.unique_blocks(), kNever);  // kNever: not resident
  std::vector<bool> resident(trace.unique_blocks(), false);
  PolicyHits out{.hits = 0, .prompt_blocks = trace.prompt_blocks()};
  for (std::size_t r = 0; r < trace.requests.size(); ++r) {
    const auto& blocks = trace.requests[r];
    if (trace.counts(r)) out.hits += resident_prefix(blocks, resident);
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      const std::uint32_t b = blocks[i];
      if (resident[b]) resident_keys.erase(Key{key_of[b], trace.depth[b], b});
      key_of[b] = next[r][i];
      resident[b] = true;
      resident_keys.insert(Key{key_of[b], trace.depth[b], b});
    }
    while (resident_keys.size() > capacity) {
      const std::uint32_t victim = std::get<2>(*resident_keys.begin());
      resident_keys.erase(resident_keys.begin());
      resident[victim] = false;
    }
  }
  return out;
}

PolicyHits unbounded_ceiling(const PrefixTreeTrace& trace) {
  std::vector<bool> seen(trace.unique_blocks(), false);
  PolicyHits out{.hits = 0, .prompt_blocks = trace.prompt_blocks()};
  for (std::size_t r = 0; r < trace.requests.size(); ++r) {
    const auto& blocks = trace.requests[r];
    if (trace.counts(r)) out.hits += resident_prefix(blocks, seen);
    for (const std::uint32_t b : blocks) seen[b] = true;
  }
  return out;
}

PolicyHits fifo_floor(const PrefixTreeTrace& trace, std::size_t capacity) {
  std::vector<bool> resident(trace.unique_blocks(), false);
  std::deque<std::uint32_t> queue;  // first insertion order, oldest at the front
  PolicyHits out{.hits = 0, .prompt_blocks = trace.prompt_blocks()};
  for (std::size_t r = 0; r < trace.requests.size(); ++r) {
    const auto& blocks = trace.requests[r];
    if (trace.counts(r)) out.hits += resident_prefix(blocks, resident);
    for (const std::uint32_t b : blocks) {
      if (resident[b]) continue;
      resident[b] = true;
      queue.push_back(b);
    }
    while (queue.size() > capacity) {
      resident[queue.front()] = false;
      queue.pop_front();
    }
  }
  return out;
}

}  // namespace kvtier::measure
