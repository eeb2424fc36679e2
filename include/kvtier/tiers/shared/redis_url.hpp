#pragma once
// Where a Redis node listens, as `kvtier replay --shared-tier` takes it.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace kvtier::tiers::shared {

struct RedisEndpoint {
  std::string host;
  std::uint16_t port = 6379;
  /// "host:port", an IPv6 host in brackets ("[::1]:7000").
  std::string to_string() const {
    return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  }
  friend bool operator==(const RedisEndpoint&, const RedisEndpoint&) = default;
};

/// Who a connection says it is (Redis AUTH: the default user when `user` is
/// empty, Redis 6 ACL users otherwise); no AUTH when `password` is empty.
struct RedisAuth {
  std::string user;
  std::string password;
  friend bool operator==(const RedisAuth&, const RedisAuth&) = default;
};

/// "redis://[[USER]:PASSWORD@]HOST[:PORT]" (the port 6379 when not given; an
/// IPv6 host in brackets, "redis://[::1]:7000"); ConfigError for another
/// scheme, an empty host, a port outside [1, 65535], a path, database or
/// options (kvtier uses database 0).
RedisEndpoint parse_redis_url(std::string_view url);
/// The URL as reports show it: a password replaced by "***".
std::string redacted_redis_url(std::string_view url);
/// The URL's credentials (empty when it carries none), percent-decoded as
/// URLs encode them ("p%40ss" is "p@ss"); ConfigError for a malformed escape.
RedisAuth parse_redis_auth(std::string_view url);
/// The credentials of a store given by `urls`: the URLs' (every URL that
/// carries some must carry the same; ConfigError otherwise), else those of
/// the environment's KVTIER_REDIS_PASSWORD (and KVTIER_REDIS_USER), which
/// keeps a password out of process listings; else none.
RedisAuth redis_auth_of(std::span<const std::string> urls);

}  // namespace kvtier::tiers::shared
