#include "kvtier/tiers/shared/redis_cluster.hpp"

#include <hiredis/hiredis.h>

#include <array>
#include <charconv>
#include <string>

#include "kvtier/core/errors.hpp"

namespace kvtier::tiers::shared {
namespace {

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), a byte at a
/// time from a table built at compile time: every command of a pipeline is
/// routed by it, and bit by bit it was the client's largest user-space cost
/// in `kvtier bench shared` (3% of its samples at 16 KiB pages).
constexpr std::array<std::uint16_t, 256> kCrc16Table = [] {
  std::array<std::uint16_t, 256> table{};
  for (unsigned byte = 0; byte < 256; ++byte) {
    auto crc = static_cast<std::uint16_t>(byte << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000U) != 0 ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021U)
                                 : static_cast<std::uint16_t>(crc << 1);
    }
    table[byte] = crc;
  }
  return table;
}();

std::uint16_t crc16_xmodem(std::string_view bytes) noexcept {
  std::uint16_t crc = 0;
  for (const char c : bytes) {
    crc = static_cast<std::uint16_t>((crc << 8) ^ kCrc16Table[((crc >> 8) ^ static_cast<unsigned char>(c)) & 0xFFU]);
  }
  return crc;
}

std::string_view reply_text(const redisReply& reply) { return {reply.str, reply.len}; }

/// "MOVED 3999 127.0.0.1:6381" (or "ASK ...") -> slot and endpoint.
bool parse_redirection(std::string_view error, std::string_view kind, std::uint16_t& slot, RedisEndpoint& to) {
  if (!error.starts_with(kind) || error.size() <= kind.size() || error[kind.size()] != ' ') return false;
  error.remove_prefix(kind.size() + 1);
  const std::size_t space = error.find(' ');
  const std::size_t colon = error.rfind(':');
  if (space == std::string_view::npos || colon == std::string_view::npos || colon < space) return false;
  unsigned value = 0;
  unsigned port = 0;
  if (std::from_chars(error.data(), error.data() + space, value).ec != std::errc{} || value >= kClusterSlots) {
    return false;
  }
  if (std::from_chars(error.data() + colon + 1, error.data() + error.size(), port).ec != std::errc{} || port == 0 ||
      port > 65535) {
    return false;
  }
  slot = static_cast<std::uint16_t>(value);
  std::string_view host = error.substr(space + 1, colon - space - 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  to = RedisEndpoint{.host = std::string(host), .port = static_cast<std::uint16_t>(port)};
  return !to.host.empty();
}

bool is_error(const RedisReplyPtr& reply) { return reply != nullptr && reply->type == REDIS_REPLY_ERROR; }

}  // namespace

std::uint16_t key_slot(std::string_view key) noexcept {
  const std::size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const std::size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  return static_cast<std::uint16_t>(crc16_xmodem(key) % kClusterSlots);
}

RedisCluster::RedisCluster(RedisClusterConfig config) : config_(std::move(config)) {
  if (config_.seeds.empty()) throw ConfigError("the shared tier needs at least one Redis URL");
  slot_owner_.fill(kNoNode);
  for (const RedisEndpoint& seed : config_.seeds) node_index(seed);
}

std::size_t RedisCluster::node_index(const RedisEndpoint& endpoint) {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i]->endpoint() == endpoint) return i;
  }
  nodes_.push_back(std::make_unique<RedisNode>(endpoint, config_.limits, config_.auth));
  return nodes_.size() - 1;
}

bool RedisCluster::discover(Clock::time_point deadline) {
  const auto now = Clock::now();
  if (now < next_discovery_) return false;
  next_discovery_ = now + config_.limits.retry_after;
  const RedisCommand slots{.args = {"CLUSTER", "SLOTS"}};
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    RedisNode& node = *nodes_[i];
    auto replies = node.pipeline(std::span(&slots, 1), deadline);
    const redisReply* reply = replies[0].get();
    if (reply == nullptr) {
      last_error_ = node.endpoint().to_string() + ": " + node.last_error();
      continue;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
      // A standalone server owns every slot; so does one whose user may not
      // ask (NOPERM: a read-only ACL user) — a cluster then says MOVED.
      const std::string_view text = reply_text(*reply);
      if (text.find("cluster support disabled") == std::string_view::npos && !text.starts_with("NOPERM")) {
        last_error_ = node.endpoint().to_string() + ": " + std::string(reply_text(*reply));
        continue;
      }
      slot_owner_.fill(static_cast<std::int32_t>(i));
      mapped_ = true;
      clustered_ = false;
      stale_ = false;
      return true;
    }
    if (reply->type != REDIS_REPLY_ARRAY) continue;
    std::array<std::int32_t, kClusterSlots> owners;
    owners.fill(kNoNode);
    const RedisEndpoint asked = node.endpoint();
    for (std::size_t r = 0; r < reply->elements; ++r) {
      const redisReply* range = reply->element[r];
      if (range->type != REDIS_REPLY_ARRAY || range->elements < 3) continue;
      const redisReply* master = range->element[2];
      if (master->type != REDIS_REPLY_ARRAY || master->elements < 2 ||
          master->element[1]->type != REDIS_REPLY_INTEGER) {
        continue;
      }
      RedisEndpoint endpoint{.host = master->element[0]->type == REDIS_REPLY_STRING && master->element[0]->len > 0
                                         ? std::string(reply_text(*master->element[0]))
                                         : asked.host,
                             .port = static_cast<std::uint16_t>(master->element[1]->integer)};
      const auto owner = static_cast<std::int32_t>(node_index(endpoint));
      const long long first = range->element[0]->integer;
      const long long last = range->element[1]->integer;
      for (long long slot = std::max(0LL, first); slot <= last && slot < static_cast<long long>(kClusterSlots);
           ++slot) {
        owners[static_cast<std::size_t>(slot)] = owner;
      }
    }
    slot_owner_ = owners;
    mapped_ = true;
    clustered_ = true;
    stale_ = false;
    return true;
  }
  return false;
}

void RedisCluster::run_on_nodes(std::span<const RedisCommand> commands, std::span<const std::size_t> which,
                                std::vector<RedisReplyPtr>& replies, Clock::time_point deadline) {
  std::vector<std::vector<std::size_t>> by_node(nodes_.size());
  for (const std::size_t i : which) {
    const std::int32_t owner = slot_owner_[key_slot(commands[i].args.at(1))];
    if (owner != kNoNode) by_node[static_cast<std::size_t>(owner)].push_back(i);
  }
  std::vector<RedisCommand> batch;
  for (std::size_t n = 0; n < by_node.size(); ++n) {
    if (by_node[n].empty()) continue;
    batch.clear();
    for (const std::size_t i : by_node[n]) batch.push_back(commands[i]);
    auto answers = nodes_[n]->pipeline(batch, deadline);
    if (answers.back() == nullptr) last_error_ = nodes_[n]->endpoint().to_string() + ": " + nodes_[n]->last_error();
    for (std::size_t k = 0; k < answers.size(); ++k) replies[by_node[n][k]] = std::move(answers[k]);
  }
}

void RedisCluster::follow_asks(std::span<const RedisCommand> commands, std::vector<RedisReplyPtr>& replies,
                               Clock::time_point deadline) {
  // A slot being migrated: this key is already on the target; ASKING lets the target answer for it once.
  const RedisCommand asking{.args = {"ASKING"}};
  for (std::size_t i = 0; i < replies.size(); ++i) {
    std::uint16_t slot = 0;
    RedisEndpoint to;
    if (!is_error(replies[i]) || !parse_redirection(reply_text(*replies[i]), "ASK", slot, to)) continue;
    const RedisCommand pair[] = {asking, commands[i]};
    auto answers = nodes_[node_index(to)]->pipeline(pair, deadline);
    replies[i] = std::move(answers[1]);
    ++redirections_;
  }
}

std::vector<RedisReplyPtr> RedisCluster::run(std::span<const RedisCommand> commands, Clock::time_point deadline) {
  std::vector<RedisReplyPtr> replies(commands.size());
  if ((!mapped_ || stale_) && !discover(deadline) && !mapped_) return replies;
  std::vector<std::size_t> all(commands.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  run_on_nodes(commands, all, replies, deadline);
  // A slot that moved (resharding, failover): follow MOVED once, and ask for the map again next call.
  std::vector<std::size_t> moved;
  for (std::size_t i = 0; i < replies.size(); ++i) {
    std::uint16_t slot = 0;
    RedisEndpoint to;
    if (is_error(replies[i]) && parse_redirection(reply_text(*replies[i]), "MOVED", slot, to)) {
      slot_owner_[slot] = static_cast<std::int32_t>(node_index(to));
      moved.push_back(i);
      stale_ = true;
    }
  }
  if (!moved.empty()) {
    redirections_ += moved.size();
    for (const std::size_t i : moved) replies[i].reset();
    run_on_nodes(commands, moved, replies, deadline);
  }
  follow_asks(commands, replies, deadline);
  return replies;
}

}  // namespace kvtier::tiers::shared
