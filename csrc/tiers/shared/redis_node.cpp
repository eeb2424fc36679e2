#include "kvtier/tiers/shared/redis_node.hpp"

#include <hiredis/hiredis.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>

namespace kvtier::tiers::shared {

RespFraming resp_framing(std::span<const std::string_view> before, std::size_t value_bytes,
                         std::span<const std::string_view> after) {
  const auto bulk = [](std::string& out, std::string_view arg) {
    out += '$';
    out += std::to_string(arg.size());
    out += "\r\n";
    out += arg;
    out += "\r\n";
  };
  // Appended piece by piece: GCC 12 warns (-Wrestrict, wrongly) on "literal" + std::string.
  RespFraming framing;
  framing.head += '*';
  framing.head += std::to_string(before.size() + 1 + after.size());
  framing.head += "\r\n";
  for (const std::string_view arg : before) bulk(framing.head, arg);
  framing.head += '$';
  framing.head += std::to_string(value_bytes);
  framing.head += "\r\n";
  framing.tail = "\r\n";
  for (const std::string_view arg : after) bulk(framing.tail, arg);
  return framing;
}

std::size_t consume_sent(std::span<iovec> pieces, std::size_t first, std::size_t sent) noexcept {
  for (; first < pieces.size(); ++first) {
    iovec& piece = pieces[first];
    const std::size_t taken = std::min(sent, piece.iov_len);
    piece.iov_base = static_cast<char*>(piece.iov_base) + taken;
    piece.iov_len -= taken;
    sent -= taken;
    if (piece.iov_len > 0) break;  // a write that stopped inside this piece
  }
  return first;
}

namespace {

constexpr int kMaxArrayElements = 65536;

timeval to_timeval(std::chrono::milliseconds ms) {
  return timeval{.tv_sec = static_cast<time_t>(ms.count() / 1000),
                 .tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000)};
}

// hiredis 0.14 has no bound on an array's length: an answer of "*2000000000"
// would allocate its element table before one element arrived. The reader's
// own functions are kept and wrapped; an array past the bound is refused
// (the reader reports an error and the connection is dropped).
std::atomic<redisReplyObjectFunctions*> hiredis_functions{nullptr};

void* create_string(const redisReadTask* task, char* text, size_t length) {
  return hiredis_functions.load()->createString(task, text, length);
}
void* create_array(const redisReadTask* task, int elements) {
  if (elements > kMaxArrayElements) return nullptr;
  return hiredis_functions.load()->createArray(task, elements);
}
void* create_integer(const redisReadTask* task, long long value) {
  return hiredis_functions.load()->createInteger(task, value);
}
void* create_nil(const redisReadTask* task) { return hiredis_functions.load()->createNil(task); }
void free_object(void* reply) { hiredis_functions.load()->freeObject(reply); }

redisReplyObjectFunctions bounded_functions{create_string, create_array, create_integer, create_nil, free_object};

void bound_reader(redisContext* context) {
  if (context->reader->fn == &bounded_functions) return;
  redisReplyObjectFunctions* expected = nullptr;
  hiredis_functions.compare_exchange_strong(expected, context->reader->fn);  // the same defaults for every reader
  context->reader->fn = &bounded_functions;
}

bool is_text(const char* errstr, int error) { return std::strcmp(errstr, std::strerror(error)) == 0; }

}  // namespace

void RedisReplyFree::operator()(redisReply* reply) const noexcept { freeReplyObject(reply); }

RedisNode::RedisNode(RedisEndpoint endpoint, RedisNodeLimits limits, RedisAuth auth)
    : endpoint_(std::move(endpoint)), auth_(std::move(auth)), limits_(limits), breaker_(NodeBreaker::of(endpoint_)) {}

RedisNode::~RedisNode() {
  if (context_ != nullptr) redisFree(context_);
}

std::string RedisNode::context_error() const {
  if (context_ == nullptr) return "no connection";
  if (context_->err == REDIS_ERR_IO &&
      (is_text(context_->errstr, EAGAIN) || is_text(context_->errstr, EWOULDBLOCK) ||
       is_text(context_->errstr, ETIMEDOUT) || is_text(context_->errstr, EINPROGRESS))) {
    return "no answer within " + std::to_string(socket_timeout_.count()) + " ms";
  }
  if (context_->err == REDIS_ERR_EOF) return "the connection was closed";
  return context_->errstr;
}

RedisNode::Outcome RedisNode::drop(Outcome outcome, std::string why) {
  if (context_ != nullptr) redisFree(context_);
  context_ = nullptr;
  socket_timeout_ = std::chrono::milliseconds(0);
  last_error_ = std::move(why);
  return outcome;
}

RedisNode::Outcome RedisNode::connect(Clock::time_point deadline) {
  if (context_ != nullptr) return Outcome::Answered;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  const std::chrono::milliseconds wait = std::min(limits_.timeout, left);
  if (wait.count() <= 0) {
    last_error_ = "not asked: the call's deadline had passed";
    return Outcome::Skipped;
  }
  context_ = redisConnectWithTimeout(endpoint_.host.c_str(), endpoint_.port, to_timeval(wait));
  socket_timeout_ = wait;
  if (context_ == nullptr) return drop(Outcome::Unreachable, "cannot allocate a hiredis context");
  if (context_->err != 0) {
    const std::string why =
        context_->err == REDIS_ERR_IO && (is_text(context_->errstr, ETIMEDOUT) ||
                                          is_text(context_->errstr, EINPROGRESS) || is_text(context_->errstr, EAGAIN))
            ? "cannot connect within " + std::to_string(wait.count()) + " ms"
            : std::string(context_->errstr);
    return drop(Outcome::Unreachable, why);
  }
  // Every read and write is bounded too: a stopped node is a miss, not a hang.
  if (redisSetTimeout(context_, to_timeval(wait)) != REDIS_OK) {
    return drop(Outcome::Unreachable, "cannot set the socket timeout");
  }
  bound_reader(context_);
  if (!auth_.password.empty()) return authenticate();
  return Outcome::Answered;
}

RedisNode::Outcome RedisNode::authenticate() {
  RedisCommand command{.args = {"AUTH"}};
  if (!auth_.user.empty()) command.args.push_back(auth_.user);
  command.args.push_back(auth_.password);
  std::vector<RedisReplyPtr> reply(1);
  const Outcome outcome = send(std::span(&command, 1), Clock::now() + limits_.timeout, reply);
  if (outcome != Outcome::Answered) return outcome;
  if (reply[0]->type == REDIS_REPLY_ERROR) {  // the server's words (WRONGPASS ...), never the password
    return drop(Outcome::Refused, "AUTH refused: " + std::string(reply[0]->str, reply[0]->len));
  }
  return Outcome::Answered;
}

RedisNode::Outcome RedisNode::read_reply(Clock::time_point deadline, RedisReplyPtr& reply) {
  for (;;) {
    void* raw = nullptr;
    if (redisGetReplyFromReader(context_, &raw) != REDIS_OK) {
      return drop(Outcome::Unreachable, "a reply kvtier refuses (malformed, or an array over " +
                                            std::to_string(kMaxArrayElements) + " elements): " + context_->errstr);
    }
    if (raw != nullptr) {
      reply.reset(static_cast<redisReply*>(raw));
      return Outcome::Answered;
    }
    // Not whole yet: what is buffered must stay within one reply's bound.
    if (context_->reader->len - context_->reader->pos > limits_.max_reply_bytes) {
      return drop(Outcome::Unreachable,
                  "a reply over " + std::to_string(limits_.max_reply_bytes) + " bytes: refused before it was read");
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return drop(Outcome::Unreachable, "no whole answer by the call's deadline");
    const std::chrono::milliseconds wait = std::clamp(left, std::chrono::milliseconds(1), limits_.timeout);
    if (wait != socket_timeout_) {
      if (redisSetTimeout(context_, to_timeval(wait)) != REDIS_OK) {
        return drop(Outcome::Unreachable, "cannot set the socket timeout");
      }
      socket_timeout_ = wait;
    }
    if (redisBufferRead(context_) != REDIS_OK) {
      const bool reset = context_->err == REDIS_ERR_EOF ||
                         (context_->err == REDIS_ERR_IO &&
                          (is_text(context_->errstr, ECONNRESET) || is_text(context_->errstr, EPIPE)));
      return drop(reset ? Outcome::Reset : Outcome::Unreachable, context_error());
    }
  }
}

RedisNode::Outcome RedisNode::write_framed(std::span<const RedisCommand> commands, Clock::time_point deadline) {
  std::vector<iovec> pieces;
  pieces.reserve(commands.size());
  for (const RedisCommand& command : commands) {
    pieces.push_back(
        iovec{.iov_base = const_cast<char*>(command.formatted.data()), .iov_len = command.formatted.size()});
  }
  std::size_t first = 0;
  while (first < pieces.size()) {
    if (Clock::now() >= deadline) return drop(Outcome::Unreachable, "the commands were not sent by the deadline");
    msghdr message{};
    message.msg_iov = pieces.data() + first;
    message.msg_iovlen = std::min<std::size_t>(pieces.size() - first, IOV_MAX);
    // MSG_NOSIGNAL: a node that closed the connection is a Reset, not a SIGPIPE.
    const ssize_t sent = ::sendmsg(context_->fd, &message, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {  // the socket timeout passed with nothing taken, as hiredis says
        return drop(Outcome::Unreachable, "no answer within " + std::to_string(socket_timeout_.count()) + " ms");
      }
      const bool reset = errno == EPIPE || errno == ECONNRESET;
      return drop(reset ? Outcome::Reset : Outcome::Unreachable, std::strerror(errno));
    }
    first = consume_sent(pieces, first, static_cast<std::size_t>(sent));
  }
  return Outcome::Answered;
}

RedisNode::Outcome RedisNode::send(std::span<const RedisCommand> commands, Clock::time_point deadline,
                                   std::vector<RedisReplyPtr>& replies) {
  if (const Outcome connected = connect(deadline); connected != Outcome::Answered) return connected;
  // hiredis' output buffer is empty here: every send before wrote it whole or dropped the connection.
  if (std::all_of(commands.begin(), commands.end(), [](const RedisCommand& c) { return !c.formatted.empty(); })) {
    if (const Outcome written = write_framed(commands, deadline); written != Outcome::Answered) return written;
    for (RedisReplyPtr& reply : replies) {
      if (const Outcome read = read_reply(deadline, reply); read != Outcome::Answered) return read;
    }
    return Outcome::Answered;
  }
  std::vector<const char*> argv;
  std::vector<std::size_t> argvlen;
  for (const RedisCommand& command : commands) {
    if (!command.formatted.empty()) {
      if (redisAppendFormattedCommand(context_, command.formatted.data(), command.formatted.size()) != REDIS_OK) {
        return drop(Outcome::Unreachable, context_error());
      }
      continue;
    }
    argv.clear();
    argvlen.clear();
    for (const std::string_view arg : command.args) {
      argv.push_back(arg.data());
      argvlen.push_back(arg.size());
    }
    if (redisAppendCommandArgv(context_, static_cast<int>(argv.size()), argv.data(), argvlen.data()) != REDIS_OK) {
      return drop(Outcome::Unreachable, context_error());
    }
  }
  for (int done = 0; done == 0;) {
    if (Clock::now() >= deadline) return drop(Outcome::Unreachable, "the commands were not sent by the deadline");
    if (redisBufferWrite(context_, &done) != REDIS_OK) {
      const bool reset = context_->err == REDIS_ERR_EOF ||
                         (context_->err == REDIS_ERR_IO &&
                          (is_text(context_->errstr, ECONNRESET) || is_text(context_->errstr, EPIPE)));
      return drop(reset ? Outcome::Reset : Outcome::Unreachable, context_error());
    }
  }
  for (RedisReplyPtr& reply : replies) {
    if (const Outcome read = read_reply(deadline, reply); read != Outcome::Answered) return read;
  }
  return Outcome::Answered;
}

std::vector<RedisReplyPtr> RedisNode::pipeline(std::span<const RedisCommand> commands, Clock::time_point deadline) {
  std::vector<RedisReplyPtr> replies(commands.size());
  if (commands.empty()) return replies;
  const auto now = Clock::now();
  if (now >= deadline) {
    last_error_ = "not asked: the call's deadline had passed";
    return replies;
  }
  if (now < next_try_) return replies;  // its AUTH was refused a moment ago (last_error_ says so)
  if (!breaker_->allow(now)) {
    last_error_ = "not asked: it failed " + std::to_string(breaker_->consecutive_failures()) +
                  " times in a row and is backing off";
    return replies;
  }
  const bool reused = context_ != nullptr;
  Outcome outcome = send(commands, deadline, replies);
  // A connection that served before may have died since (the node
  // restarted): one more try on a fresh one before it counts as down.
  if (outcome == Outcome::Reset && reused) {
    for (RedisReplyPtr& reply : replies) reply.reset();
    outcome = send(commands, deadline, replies);
  }
  switch (outcome) {
    case Outcome::Answered:
      breaker_->succeeded();
      last_error_.clear();
      break;
    case Outcome::Refused:  // up, but not for these credentials: this connection waits, others need not
      breaker_->succeeded();
      next_try_ = now + limits_.retry_after;
      ++failures_;
      break;
    case Outcome::Skipped:
      breaker_->abandon();
      break;
    case Outcome::Reset:
    case Outcome::Unreachable:
      breaker_->failed(Clock::now(), limits_.retry_after);
      ++failures_;
      break;
  }
  return replies;
}

}  // namespace kvtier::tiers::shared
