#pragma once
// One connection to one Redis node (hiredis, blocking with bounded
// timeouts): pipelines of commands, and a node that failed is left alone for
// a while instead of being waited on again by every call.
#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvtier/tiers/shared/redis_url.hpp"

struct redisContext;
struct redisReply;

namespace kvtier::tiers::shared {

/// One command's arguments, binary-safe; the views live through the call.
struct RedisCommand {
  std::vector<std::string_view> args;
};

struct RedisReplyFree {
  void operator()(redisReply* reply) const noexcept;
};
using RedisReplyPtr = std::unique_ptr<redisReply, RedisReplyFree>;

class RedisNode {
 public:
  /// Every connection authenticates as `auth` (AUTH) before its first
  /// command when auth has a password; a refusal fails the connection.
  RedisNode(RedisEndpoint endpoint, std::chrono::milliseconds timeout, std::chrono::milliseconds retry_after,
            RedisAuth auth = {});
  ~RedisNode();
  RedisNode(const RedisNode&) = delete;
  RedisNode& operator=(const RedisNode&) = delete;

  const RedisEndpoint& endpoint() const noexcept { return endpoint_; }
  /// Sends `commands` as one pipeline and reads every reply, in order. A
  /// command the node did not answer (refused, reset, timed out) has a null
  /// reply; the connection is then dropped and not tried again for
  /// retry_after (its commands fail at once meanwhile).
  std::vector<RedisReplyPtr> pipeline(std::span<const RedisCommand> commands);
  /// Why the last connection failed ("" while it works).
  const std::string& last_error() const noexcept { return last_error_; }
  /// Connection failures since this node was made.
  std::uint64_t failures() const noexcept { return failures_; }

 private:
  bool connect();
  bool authenticate();
  std::vector<RedisReplyPtr> send(std::span<const RedisCommand> commands);
  void fail(std::string why);

  RedisEndpoint endpoint_;
  RedisAuth auth_;
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds retry_after_;
  redisContext* context_ = nullptr;
  std::chrono::steady_clock::time_point next_try_{};
  std::string last_error_;
  std::uint64_t failures_ = 0;
};

}  // namespace kvtier::tiers::shared
