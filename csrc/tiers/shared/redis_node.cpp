#include "kvtier/tiers/shared/redis_node.hpp"

#include <hiredis/hiredis.h>
#include <sys/time.h>

namespace kvtier::tiers::shared {
namespace {

timeval to_timeval(std::chrono::milliseconds ms) {
  return timeval{.tv_sec = static_cast<time_t>(ms.count() / 1000),
                 .tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000)};
}

}  // namespace

void RedisReplyFree::operator()(redisReply* reply) const noexcept { freeReplyObject(reply); }

RedisNode::RedisNode(RedisEndpoint endpoint, std::chrono::milliseconds timeout, std::chrono::milliseconds retry_after,
                     RedisAuth auth)
    : endpoint_(std::move(endpoint)), auth_(std::move(auth)), timeout_(timeout), retry_after_(retry_after) {}

RedisNode::~RedisNode() {
  if (context_ != nullptr) redisFree(context_);
}

void RedisNode::fail(std::string why) {
  if (context_ != nullptr) redisFree(context_);
  context_ = nullptr;
  last_error_ = std::move(why);
  ++failures_;
  next_try_ = std::chrono::steady_clock::now() + retry_after_;
}

bool RedisNode::connect() {
  if (context_ != nullptr) return true;
  if (std::chrono::steady_clock::now() < next_try_) return false;
  const timeval timeout = to_timeval(timeout_);
  context_ = redisConnectWithTimeout(endpoint_.host.c_str(), endpoint_.port, timeout);
  if (context_ == nullptr) {
    fail("cannot allocate a hiredis context");
    return false;
  }
  if (context_->err != 0) {
    fail(context_->errstr);
    return false;
  }
  // Every read and write is bounded too: a stopped node is a miss, not a hang.
  if (redisSetTimeout(context_, timeout) != REDIS_OK) {
    fail("cannot set the socket timeout");
    return false;
  }
  if (!auth_.password.empty() && !authenticate()) return false;
  last_error_.clear();
  return true;
}

bool RedisNode::authenticate() {
  std::vector<const char*> argv{"AUTH"};
  std::vector<std::size_t> argvlen{4};
  if (!auth_.user.empty()) {
    argv.push_back(auth_.user.data());
    argvlen.push_back(auth_.user.size());
  }
  argv.push_back(auth_.password.data());
  argvlen.push_back(auth_.password.size());
  RedisReplyPtr reply(
      static_cast<redisReply*>(redisCommandArgv(context_, static_cast<int>(argv.size()), argv.data(), argvlen.data())));
  if (reply == nullptr) {
    fail(context_->err != 0 ? context_->errstr : "no reply to AUTH");
    return false;
  }
  if (reply->type == REDIS_REPLY_ERROR) {  // the server's words (WRONGPASS ...), never the password
    fail("AUTH refused: " + std::string(reply->str, reply->len));
    return false;
  }
  return true;
}

std::vector<RedisReplyPtr> RedisNode::pipeline(std::span<const RedisCommand> commands) {
  const bool reused = context_ != nullptr;
  std::vector<RedisReplyPtr> replies = send(commands);
  // A connection that served before may have died since (the node
  // restarted): one more try on a fresh one before it counts as down.
  if (reused && !replies.empty() && replies.front() == nullptr) {
    next_try_ = {};
    --failures_;
    replies = send(commands);
  }
  return replies;
}

std::vector<RedisReplyPtr> RedisNode::send(std::span<const RedisCommand> commands) {
  std::vector<RedisReplyPtr> replies(commands.size());
  if (commands.empty() || !connect()) return replies;
  std::vector<const char*> argv;
  std::vector<std::size_t> argvlen;
  for (const RedisCommand& command : commands) {
    argv.clear();
    argvlen.clear();
    for (const std::string_view arg : command.args) {
      argv.push_back(arg.data());
      argvlen.push_back(arg.size());
    }
    if (redisAppendCommandArgv(context_, static_cast<int>(argv.size()), argv.data(), argvlen.data()) != REDIS_OK) {
      fail(context_->errstr);
      return replies;
    }
  }
  for (RedisReplyPtr& reply : replies) {
    void* raw = nullptr;
    if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) {
      fail(context_->err != 0 ? context_->errstr : "no reply");
      return replies;
    }
    reply.reset(static_cast<redisReply*>(raw));
  }
  return replies;
}

}  // namespace kvtier::tiers::shared
