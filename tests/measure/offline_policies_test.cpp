// The offline bound against brute force (every resident set a policy could
// keep after each request, on small traces), and never below FIFO or any
// online policy kvtier runs; the prefix-tree reading of traces; capacities.
#include "kvtier/measure/offline_policies.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <filesystem>
#include <map>
#include <random>

#include "kvtier/core/errors.hpp"
#include "kvtier/measure/online_policy_run.hpp"
#include "kvtier/measure/policy_comparison.hpp"
#include "kvtier/measure/prefix_tree_trace.hpp"

namespace kvtier::measure {
namespace {

/// The best total hits over every choice of what stays after each request:
/// any subset, of at most `capacity` blocks, of what was resident plus the
/// request's blocks. Exponential: a dozen blocks at most.
std::size_t exhaustive_optimum(const PrefixTreeTrace& trace, std::size_t capacity) {
  std::map<std::uint32_t, std::size_t> best{{0U, 0U}};  // resident set -> most hits so far
  for (std::size_t r = 0; r < trace.requests.size(); ++r) {
    const auto& request = trace.requests[r];
    std::uint32_t request_mask = 0;
    for (const std::uint32_t b : request) request_mask |= 1U << b;
    std::map<std::uint32_t, std::size_t> next;
    for (const auto& [resident, hits] : best) {
      std::size_t prefix = 0;
      while (trace.counts(r) && prefix < request.size() && (resident >> request[prefix] & 1U) != 0) ++prefix;
      const std::uint32_t all = resident | request_mask;
      for (std::uint32_t kept = all;; kept = (kept - 1) & all) {
        if (static_cast<std::size_t>(std::popcount(kept)) <= capacity) {
          auto& slot = next[kept];
          slot = std::max(slot, hits + prefix);
        }
        if (kept == 0) break;
      }
    }
    best = std::move(next);
  }
  std::size_t most = 0;
  for (const auto& [resident, hits] : best) most = std::max(most, hits);
  return most;
}

/// `requests` root-to-node paths in a random tree of `nodes` ids (id 0..nodes-1).
PrefixTreeTrace random_trace(std::mt19937& rng, std::size_t nodes, std::size_t requests) {
  std::vector<std::int64_t> parent(nodes, -1);
  for (std::size_t n = 1; n < nodes; ++n) {
    const std::size_t p = std::uniform_int_distribution<std::size_t>(0, n)(rng);  // p == n: a new root
    parent[n] = p == n ? -1 : static_cast<std::int64_t>(p);
  }
  std::vector<std::vector<std::uint64_t>> paths;
  for (std::size_t r = 0; r < requests; ++r) {
    std::vector<std::uint64_t> path;
    for (auto n = static_cast<std::int64_t>(std::uniform_int_distribution<std::size_t>(0, nodes - 1)(rng)); n >= 0;
         n = parent[static_cast<std::size_t>(n)]) {
      path.insert(path.begin(), static_cast<std::uint64_t>(n));
    }
    paths.push_back(std::move(path));
  }
  return prefix_tree_trace(paths);
}

TEST(OfflineBound, EqualsTheExhaustiveOptimumOnSmallTraces) {
  std::mt19937 rng(35);
  for (int round = 0; round < 120; ++round) {
    const PrefixTreeTrace trace = random_trace(rng, 4 + round % 7, 5 + round % 4);
    ASSERT_LE(trace.unique_blocks(), 12U);
    for (std::size_t capacity = 1; capacity <= 4; ++capacity) {
      EXPECT_EQ(belady_bound(trace, capacity).hits, exhaustive_optimum(trace, capacity))
          << "round " << round << ", capacity " << capacity;
    }
  }
}

// A replay's bound (docs/replay.md): lookups count, the chunks a request
// computes later only make blocks resident again.
TEST(OfflineBound, EqualsTheExhaustiveOptimumWhenSomeRequestsOnlyInsert) {
  std::mt19937 rng(48);
  for (int round = 0; round < 160; ++round) {
    PrefixTreeTrace trace = random_trace(rng, 4 + round % 7, 6 + round % 5);
    ASSERT_LE(trace.unique_blocks(), 12U);
    trace.counted.resize(trace.requests.size());
    for (std::size_t r = 0; r < trace.requests.size(); ++r) trace.counted[r] = rng() % 3 != 0;
    for (std::size_t capacity = 1; capacity <= 4; ++capacity) {
      EXPECT_EQ(belady_bound(trace, capacity).hits, exhaustive_optimum(trace, capacity))
          << "round " << round << ", capacity " << capacity;
    }
    EXPECT_LE(belady_bound(trace, 2).hits, unbounded_ceiling(trace).hits);
    EXPECT_LE(fifo_floor(trace, 2).hits, belady_bound(trace, 2).hits);
  }
}

TEST(OfflineBound, KeepsTheSharedPrefixOverAOneOffRequest) {
  // [0 1] [5 6 7] [0 1]: with two blocks, LRU loses the shared prefix to the
  // one-off request; the bound bypasses the one-off and hits both blocks.
  const PrefixTreeTrace trace = prefix_tree_trace(std::vector<std::vector<std::uint64_t>>{{0, 1}, {5, 6, 7}, {0, 1}});
  EXPECT_EQ(belady_bound(trace, 2).hits, 2U);
  EXPECT_EQ(fifo_floor(trace, 2).hits, 0U);
  EXPECT_EQ(unbounded_ceiling(trace).hits, 2U);
  EXPECT_EQ(unbounded_ceiling(trace).prompt_blocks, 7U);
}

TEST(OfflineBound, IsNeverBelowFifoOrAnyOnlinePolicy) {
  std::mt19937 rng(36);
  for (int round = 0; round < 40; ++round) {
    const PrefixTreeTrace trace = random_trace(rng, 6 + round % 20, 12 + round % 9);
    const TraceBlocks blocks = trace_blocks(trace, 16);
    for (std::size_t capacity : {1UL, 2UL, 3UL, 5UL, 8UL}) {
      const std::size_t bound = belady_bound(trace, capacity).hits;
      EXPECT_GE(bound, fifo_floor(trace, capacity).hits);
      EXPECT_LE(bound, unbounded_ceiling(trace).hits);
      for (const OnlinePolicy& policy : online_policies()) {
        EXPECT_LE(run_online_policy(trace, blocks, policy, capacity).hits, bound)
            << policy.name << ", round " << round << ", capacity " << capacity;
      }
    }
  }
}

TEST(OfflineBound, IsNeverBelowAnyOnlinePolicyOnTheSharedTrace) {
  const PrefixTreeTrace trace = prefix_tree_trace(replay::read_trace_file(KVTIER_MOONCAKE_TRACE, 400));
  const TraceBlocks blocks = trace_blocks(trace);
  for (std::size_t capacity : {50UL, 400UL, 2000UL}) {
    const PolicyHits bound = belady_bound(trace, capacity);
    EXPECT_GT(bound.hits, 0U);
    for (const OnlinePolicy& policy : online_policies()) {
      EXPECT_LE(run_online_policy(trace, blocks, policy, capacity).hits, bound.hits) << policy.name;
    }
  }
  // Everything fits: the bound is the ceiling, and so is LRU.
  const std::size_t all = trace.unique_blocks();
  EXPECT_EQ(belady_bound(trace, all).hits, unbounded_ceiling(trace).hits);
  EXPECT_EQ(run_online_policy(trace, blocks, online_policy("lru"), all).hits, unbounded_ceiling(trace).hits);
}

TEST(PrefixTreeTrace, NumbersBlocksParentFirstWithDepths) {
  const PrefixTreeTrace trace = prefix_tree_trace(std::vector<std::vector<std::uint64_t>>{{7, 8, 9}, {7, 3}, {}});
  ASSERT_EQ(trace.unique_blocks(), 4U);
  EXPECT_EQ(trace.requests[1], (std::vector<std::uint32_t>{0, 3}));
  EXPECT_EQ(trace.parent[3], 0U);
  EXPECT_EQ(trace.parent[0], kNoParentBlock);
  EXPECT_EQ(trace.depth[2], 2U);
  EXPECT_EQ(trace.hash_id[3], 3U);
  EXPECT_EQ(trace.prompt_blocks(), 5U);
  EXPECT_EQ(trace.longest_request(), 3U);
}

TEST(PrefixTreeTrace, RefusesIdsThatAreNotAPrefixTree) {
  using Paths = std::vector<std::vector<std::uint64_t>>;
  EXPECT_THROW(prefix_tree_trace(Paths{{1, 2}, {3, 2}}), ConfigError);  // 2 after two parents
  EXPECT_THROW(prefix_tree_trace(Paths{{1, 2}, {2}}), ConfigError);     // 2 a root and a child
  EXPECT_THROW(prefix_tree_trace(Paths{{4, 4}}), ConfigError);          // twice in one request
}

TEST(PolicyComparison, CapacitiesAreSharesOrBlockCounts) {
  EXPECT_EQ(parse_capacity("1%", 43924), 439U);
  EXPECT_EQ(parse_capacity("0.3%", 43924), 132U);
  EXPECT_EQ(parse_capacity("0.001%", 100), 1U);
  EXPECT_EQ(parse_capacity("100%", 100), 100U);
  EXPECT_EQ(parse_capacity("1000", 10), 1000U);
  for (const char* bad : {"", "%", "0", "0%", "-1", "1.5", "101%", "nan%", "1e99", "12x"}) {
    EXPECT_THROW(parse_capacity(bad, 100), ConfigError) << bad;
  }
}

TEST(PolicyComparison, RowsGiveEachPolicyBesideTheBoundOfItsCapacity) {
  const PrefixTreeTrace trace =
      prefix_tree_trace(std::vector<std::vector<std::uint64_t>>{{0, 1}, {5, 6, 7}, {0, 1}, {0, 1, 2}});
  const auto rows = compare_policies(trace, {"2", "100%"}, {online_policy("lru"), online_policy("kvbm_lru2")});
  ASSERT_EQ(rows.size(), 10U);
  EXPECT_EQ(rows[0].policy, "bound");
  EXPECT_EQ(rows[1].policy, "ceiling");
  EXPECT_EQ(rows[2].policy, "fifo");
  EXPECT_EQ(rows[3].policy, "lru");
  EXPECT_EQ(rows[3].backend, "native");
  EXPECT_EQ(rows[4].backend, "kvbm");
  EXPECT_EQ(rows[0].capacity_blocks, 2U);
  EXPECT_EQ(rows[5].capacity_blocks, 6U);
  EXPECT_EQ(rows[0].hits.hits, 4U);
  EXPECT_DOUBLE_EQ(rows[0].fraction_of_bound, 1.0);
  EXPECT_DOUBLE_EQ(rows[3].fraction_of_bound, static_cast<double>(rows[3].hits.hits) / 4.0);
  EXPECT_EQ(rows[8].hits.hits, rows[6].hits.hits);  // LRU with room for everything is the ceiling
  EXPECT_THROW(compare_policies(trace, {"0"}, {}), ConfigError);
  EXPECT_THROW(online_policy("belady"), ConfigError);
}

TEST(PolicyComparison, OverATierStackEveryTierCountsAndTheStacksBoundRules) {
  const auto requests = replay::read_trace_file(KVTIER_MOONCAKE_TRACE, 120);
  const auto scratch = std::filesystem::temp_directory_path() / "kvtier-policy-stack-test";
  const PolicyStack stack{.host_blocks = 200, .disk_blocks = 400, .disk_dir = scratch};
  const auto rows =
      compare_policies_in_stack(requests, {"300"}, {online_policy("lru"), online_policy("kvbm_arc")}, stack);
  ASSERT_EQ(rows.size(), 6U);
  EXPECT_EQ(rows[1].policy, "bound_stack");
  const PrefixTreeTrace trace = prefix_tree_trace(requests);
  EXPECT_EQ(rows[1].hits.hits, belady_bound(trace, 300 + 200 + 400).hits);
  for (std::size_t r = 4; r < rows.size(); ++r) {
    ASSERT_TRUE(rows[r].stack.has_value()) << rows[r].policy;
    const StackHits& tiers = *rows[r].stack;
    EXPECT_EQ(rows[r].hits.hits, tiers.g1 + tiers.g2 + tiers.g3);
    EXPECT_LE(rows[r].hits.hits, rows[1].hits.hits) << rows[r].policy;  // never above the stack's bound
    EXPECT_GT(tiers.g2_bytes_written, 0U);
    EXPECT_GT(tiers.g3_bytes_written, 0U);
    EXPECT_EQ(tiers.mismatches, 0U);
  }
  EXPECT_FALSE(rows[0].stack.has_value());
  EXPECT_THROW(compare_policies_in_stack(requests, {"300"}, {online_policy("lru")}, PolicyStack{}), ConfigError);
  std::filesystem::remove_all(scratch);
}

}  // namespace
}  // namespace kvtier::measure
