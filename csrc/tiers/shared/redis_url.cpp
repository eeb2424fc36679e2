#include "kvtier/tiers/shared/redis_url.hpp"

#include <charconv>

#include "kvtier/core/errors.hpp"

namespace kvtier::tiers::shared {

RedisEndpoint parse_redis_url(std::string_view url) {
  constexpr std::string_view kScheme = "redis://";
  const auto bad = [&](const std::string& why) {
    return ConfigError("shared tier URL '" + std::string(url) + "': " + why);
  };
  if (!url.starts_with(kScheme)) throw bad("expected redis://HOST[:PORT]");
  std::string_view rest = url.substr(kScheme.size());
  if (rest.ends_with('/')) rest.remove_suffix(1);
  if (rest.find_first_of("/@?") != std::string_view::npos) {
    throw bad("no user, database or options: kvtier uses database 0 without AUTH");
  }
  RedisEndpoint endpoint;
  const std::size_t colon = rest.rfind(':');
  if (colon != std::string_view::npos) {
    const std::string_view digits = rest.substr(colon + 1);
    unsigned port = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (digits.empty() || error != std::errc{} || end != digits.data() + digits.size() || port == 0 || port > 65535) {
      throw bad("the port must be in [1, 65535]");
    }
    endpoint.port = static_cast<std::uint16_t>(port);
    rest = rest.substr(0, colon);
  }
  if (rest.empty()) throw bad("no host");
  endpoint.host = std::string(rest);
  return endpoint;
}

}  // namespace kvtier::tiers::shared
