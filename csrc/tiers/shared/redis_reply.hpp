#pragma once
// What a hiredis reply says, read the same way by the shared store's caller
// side and its worker (private to tiers/shared/).
#include <hiredis/hiredis.h>

#include <cstddef>
#include <span>
#include <string_view>

namespace kvtier::tiers::shared {

/// A string reply's bytes (a value, a header).
inline std::span<const std::byte> bytes_of(const redisReply& reply) {
  return {reinterpret_cast<const std::byte*>(reply.str), reply.len};
}

/// An error reply whose text starts with `prefix` (WRONGTYPE, NOPERM, MOVED).
inline bool error_starts(const redisReply* reply, std::string_view prefix) {
  return reply != nullptr && reply->type == REDIS_REPLY_ERROR &&
         std::string_view(reply->str, reply->len).starts_with(prefix);
}

/// A reply that came back and is not an error.
inline bool answered(const redisReply* reply) { return reply != nullptr && reply->type != REDIS_REPLY_ERROR; }

}  // namespace kvtier::tiers::shared
