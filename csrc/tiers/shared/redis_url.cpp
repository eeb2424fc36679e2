#include "kvtier/tiers/shared/redis_url.hpp"

#include <charconv>
#include <cstdlib>
#include <optional>
#include <utility>

#include "kvtier/core/errors.hpp"

namespace kvtier::tiers::shared {

namespace {

constexpr std::string_view kScheme = "redis://";

std::string shown(std::string_view url) { return redacted_redis_url(url); }

/// "[[USER]:PASSWORD@]" and the rest, split; ConfigError for bad input.
std::pair<std::string_view, std::string_view> split_userinfo(std::string_view url) {
  const auto bad = [&](const std::string& why) { return ConfigError("shared tier URL '" + shown(url) + "': " + why); };
  if (!url.starts_with(kScheme)) throw bad("expected redis://[[USER]:PASSWORD@]HOST[:PORT]");
  std::string_view rest = url.substr(kScheme.size());
  const std::size_t at = rest.rfind('@');
  if (at == std::string_view::npos) return {{}, rest};
  const std::string_view userinfo = rest.substr(0, at);
  if (userinfo.find(':') == std::string_view::npos) throw bad("credentials are [USER]:PASSWORD@");
  return {userinfo, rest.substr(at + 1)};
}

}  // namespace

std::string redacted_redis_url(std::string_view url) {
  const std::size_t at = url.rfind('@');
  if (!url.starts_with(kScheme) || at == std::string_view::npos || at < kScheme.size()) return std::string(url);
  const std::string_view userinfo = url.substr(kScheme.size(), at - kScheme.size());
  const std::size_t colon = userinfo.find(':');
  const std::string_view user = colon == std::string_view::npos ? std::string_view{} : userinfo.substr(0, colon);
  std::string shown(kScheme);
  shown.append(user).append(":***@").append(url.substr(at + 1));
  return shown;
}

RedisAuth parse_redis_auth(std::string_view url) {
  const std::string_view userinfo = split_userinfo(url).first;
  if (userinfo.empty()) return {};
  const std::size_t colon = userinfo.find(':');
  return RedisAuth{.user = std::string(userinfo.substr(0, colon)), .password = std::string(userinfo.substr(colon + 1))};
}

RedisAuth redis_auth_of(std::span<const std::string> urls) {
  std::optional<RedisAuth> given;
  for (const std::string& url : urls) {
    RedisAuth auth = parse_redis_auth(url);
    if (auth.password.empty() && auth.user.empty()) continue;
    if (given && *given != auth) throw ConfigError("the shared tier's URLs carry different credentials");
    given = std::move(auth);
  }
  if (given) return *given;
  RedisAuth from_environment;
  if (const char* password = std::getenv("KVTIER_REDIS_PASSWORD")) from_environment.password = password;
  if (const char* user = std::getenv("KVTIER_REDIS_USER")) from_environment.user = user;
  return from_environment;
}

RedisEndpoint parse_redis_url(std::string_view url) {
  const auto bad = [&](const std::string& why) { return ConfigError("shared tier URL '" + shown(url) + "': " + why); };
  std::string_view rest = split_userinfo(url).second;
  if (rest.ends_with('/')) rest.remove_suffix(1);
  if (rest.find_first_of("/@?") != std::string_view::npos) {
    throw bad("no database or options: kvtier uses database 0");
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
