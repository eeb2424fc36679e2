#pragma once
// Where a Redis node listens, as `kvtier replay --shared-tier` takes it.
#include <cstdint>
#include <string>
#include <string_view>

namespace kvtier::tiers::shared {

struct RedisEndpoint {
  std::string host;
  std::uint16_t port = 6379;
  std::string to_string() const { return host + ":" + std::to_string(port); }
  friend bool operator==(const RedisEndpoint&, const RedisEndpoint&) = default;
};

/// "redis://HOST[:PORT]" (the port 6379 when not given); ConfigError for
/// another scheme, an empty host, a port outside [1, 65535] or a path,
/// user or database (kvtier uses database 0 and no AUTH).
RedisEndpoint parse_redis_url(std::string_view url);

}  // namespace kvtier::tiers::shared
