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

/// RFC 3986 percent-decoding of a userinfo part.
std::string percent_decoded(std::string_view text, std::string_view url, const char* what) {
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    const int high = i + 2 < text.size() ? hex(text[i + 1]) : -1;
    const int low = i + 2 < text.size() ? hex(text[i + 2]) : -1;
    if (high < 0 || low < 0) {
      throw ConfigError("shared tier URL '" + shown(url) + "': the " + what +
                        " has a '%' that is not followed by two hex digits (write a '%' as %25)");
    }
    out.push_back(static_cast<char>(high * 16 + low));
    i += 2;
  }
  return out;
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
  return RedisAuth{.user = percent_decoded(userinfo.substr(0, colon), url, "user"),
                   .password = percent_decoded(userinfo.substr(colon + 1), url, "password")};
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
  std::string_view host = rest;
  std::string_view port_text;
  bool has_port = false;
  if (rest.starts_with('[')) {  // an IPv6 address: [::1]:7000
    const std::size_t close = rest.find(']');
    if (close == std::string_view::npos) throw bad("an IPv6 host needs its closing ']'");
    host = rest.substr(1, close - 1);
    const std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') throw bad("expected ':PORT' after the IPv6 host");
      port_text = after.substr(1);
      has_port = true;
    }
  } else if (const std::size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
    if (rest.find(':') != colon) throw bad("an IPv6 host goes in brackets: redis://[::1]:6379");
    host = rest.substr(0, colon);
    port_text = rest.substr(colon + 1);
    has_port = true;
  }
  if (has_port) {
    const std::string_view digits = port_text;
    unsigned port = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (digits.empty() || error != std::errc{} || end != digits.data() + digits.size() || port == 0 || port > 65535) {
      throw bad("the port must be in [1, 65535]");
    }
    endpoint.port = static_cast<std::uint16_t>(port);
  }
  if (host.empty()) throw bad("no host");
  endpoint.host = std::string(host);
  return endpoint;
}

}  // namespace kvtier::tiers::shared
