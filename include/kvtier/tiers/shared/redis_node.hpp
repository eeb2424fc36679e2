#pragma once
// One connection to one Redis node (hiredis, blocking with bounded
// timeouts): pipelines of commands under a deadline, replies bounded in size
// before they are read whole, and a node that failed is left alone — for a
// back-off the whole process shares (node_breaker.hpp) — instead of being
// waited on again by every call.
#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvtier/tiers/shared/node_breaker.hpp"
#include "kvtier/tiers/shared/redis_url.hpp"

struct redisContext;
struct redisReply;

namespace kvtier::tiers::shared {

/// One command's arguments, binary-safe; the views live through the call.
/// `formatted`, when set, is the whole command already framed in RESP (what
/// hiredis would send for `args`): it is sent as it is, and `args` (at least
/// the command and its key) only route it.
struct RedisCommand {
  std::vector<std::string_view> args;
  std::string_view formatted{};
};

/// The RESP framing of a command whose one large argument the caller writes
/// in place between `head` and `tail` (a value copied once into the buffer
/// that is sent, not once more into a formatted command): `before` are the
/// arguments ahead of it, `after` those behind it.
struct RespFraming {
  std::string head;
  std::string tail;
};
RespFraming resp_framing(std::span<const std::string_view> before, std::size_t value_bytes,
                         std::span<const std::string_view> after);

/// After a write that sent `sent` bytes of `pieces` from `first` on: the
/// pieces sent whole are skipped and the one it stopped in is cut to what is
/// left; returns the first piece still to send (pieces.size() when done).
std::size_t consume_sent(std::span<iovec> pieces, std::size_t first, std::size_t sent) noexcept;

struct RedisReplyFree {
  void operator()(redisReply* reply) const noexcept;
};
using RedisReplyPtr = std::unique_ptr<redisReply, RedisReplyFree>;

/// What a connection waits for and takes.
struct RedisNodeLimits {
  /// Per connect, and per pipeline at most (a deadline may cut it shorter).
  std::chrono::milliseconds timeout{250};
  /// The first back-off after a failure (then doubling, process-wide).
  std::chrono::milliseconds retry_after{1000};
  /// A reply longer than this (or an array of more than 65536 elements) is
  /// refused before it is read whole: the connection is dropped.
  std::size_t max_reply_bytes = std::size_t{4} << 20;
};

class RedisNode {
 public:
  using Clock = std::chrono::steady_clock;

  /// Every connection authenticates as `auth` (AUTH) before its first
  /// command when auth has a password; a refusal fails the connection.
  RedisNode(RedisEndpoint endpoint, RedisNodeLimits limits, RedisAuth auth = {});
  ~RedisNode();
  RedisNode(const RedisNode&) = delete;
  RedisNode& operator=(const RedisNode&) = delete;

  const RedisEndpoint& endpoint() const noexcept { return endpoint_; }
  /// Sends `commands` as one pipeline and reads every reply, in order, by
  /// `deadline` at the latest. A command the node did not answer (refused,
  /// reset, timed out, a reply too large, the deadline passed, the node
  /// backing off) has a null reply; a connection that failed is dropped.
  std::vector<RedisReplyPtr> pipeline(std::span<const RedisCommand> commands,
                                      Clock::time_point deadline = Clock::time_point::max());
  /// Why the last pipeline failed ("" while it works).
  const std::string& last_error() const noexcept { return last_error_; }
  /// Pipelines that failed since this node was made.
  std::uint64_t failures() const noexcept { return failures_; }

 private:
  enum class Outcome : std::uint8_t {
    Answered,
    Reset,        // the connection closed under us (a restarted node): worth one more try
    Unreachable,  // refused, timed out, garbage or too large: the breaker opens
    Refused,      // AUTH refused: the node is up, this connection is not welcome
    Skipped,      // the deadline passed, or the node is backing off: nothing was sent
  };
  Outcome connect(Clock::time_point deadline);
  Outcome authenticate();
  Outcome send(std::span<const RedisCommand> commands, Clock::time_point deadline, std::vector<RedisReplyPtr>& replies);
  Outcome read_reply(Clock::time_point deadline, RedisReplyPtr& reply);
  /// A pipeline of framed commands only: written to the socket from their own
  /// buffers, which hiredis would first copy into its output buffer (one more
  /// copy of every page a publish sends, into a buffer faulted in anew each batch).
  Outcome write_framed(std::span<const RedisCommand> commands, Clock::time_point deadline);
  /// The context's error in words ("no answer within 250 ms" for a timeout).
  std::string context_error() const;
  Outcome drop(Outcome outcome, std::string why);

  RedisEndpoint endpoint_;
  RedisAuth auth_;
  RedisNodeLimits limits_;
  std::shared_ptr<NodeBreaker> breaker_;
  redisContext* context_ = nullptr;
  Clock::time_point next_try_{};  // after an AUTH refusal: this connection's own back-off
  std::chrono::milliseconds socket_timeout_{0};
  std::string last_error_;
  std::uint64_t failures_ = 0;
};

}  // namespace kvtier::tiers::shared
