#pragma once
// Commands by key over one Redis node or a Redis Cluster: the cluster's slot
// map (CLUSTER SLOTS), each key to the node owning its hash slot, one
// pipeline per node per call, a MOVED reply followed once (the map is asked
// for again), an ASK reply followed once (ASKING first; the map stays), the
// whole call under one deadline. hiredis 0.14 (the Debian client) speaks to
// one node only; this is the routing on top.
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvtier/tiers/shared/redis_node.hpp"
#include "kvtier/tiers/shared/redis_url.hpp"

namespace kvtier::tiers::shared {

inline constexpr std::size_t kClusterSlots = 16384;

/// The hash slot of `key`: CRC16 (XMODEM) of the key, or of its hash tag
/// ("{...}") when it has one, modulo 16384, as Redis Cluster defines it.
std::uint16_t key_slot(std::string_view key) noexcept;

struct RedisClusterConfig {
  /// Seeds: one node, or any nodes of a cluster (the rest is discovered).
  std::vector<RedisEndpoint> seeds;
  /// Every node's credentials (a cluster shares its users).
  RedisAuth auth{};
  RedisNodeLimits limits{};
};

class RedisCluster {
 public:
  explicit RedisCluster(RedisClusterConfig config);

  using Clock = RedisNode::Clock;
  /// Runs each command (its key is args[1]) on the node owning the key's
  /// slot: one pipeline per node, all by `deadline`. A null reply: the node
  /// did not answer (in time), or no node is known for the slot (no seed reachable).
  std::vector<RedisReplyPtr> run(std::span<const RedisCommand> commands,
                                 Clock::time_point deadline = Clock::time_point::max());
  /// True once a seed answered CLUSTER SLOTS with a cluster's map.
  bool clustered() const noexcept { return clustered_; }
  /// Nodes known (seeds and the cluster's masters).
  std::size_t node_count() const noexcept { return nodes_.size(); }
  /// Why the last node that failed did ("" when none has).
  const std::string& last_error() const noexcept { return last_error_; }
  /// MOVED and ASK replies followed.
  std::uint64_t redirections() const noexcept { return redirections_; }

 private:
  std::size_t node_index(const RedisEndpoint& endpoint);
  /// Asks the seeds (then every known node) for the slot map; true when one answered.
  bool discover(Clock::time_point deadline);
  void run_on_nodes(std::span<const RedisCommand> commands, std::span<const std::size_t> which,
                    std::vector<RedisReplyPtr>& replies, Clock::time_point deadline);
  /// Follows ASK replies: ASKING, then the command, on the node named.
  void follow_asks(std::span<const RedisCommand> commands, std::vector<RedisReplyPtr>& replies,
                   Clock::time_point deadline);

  RedisClusterConfig config_;
  std::vector<std::unique_ptr<RedisNode>> nodes_;
  static constexpr std::int32_t kNoNode = -1;
  std::array<std::int32_t, kClusterSlots> slot_owner_;
  bool mapped_ = false;
  bool clustered_ = false;
  bool stale_ = false;  // a MOVED reply was seen: the map is asked for again
  std::chrono::steady_clock::time_point next_discovery_{};
  std::string last_error_;
  std::uint64_t redirections_ = 0;
};

}  // namespace kvtier::tiers::shared
