#include "script_fields.hpp"

#include <limits>

namespace kvtier::script {

const nlohmann::json& Fields::raw(const char* name) const {
  if (!has(name)) fail(std::string("missing field '") + name + "'");
  return object_.at(name);
}

std::string Fields::string(const char* name) const {
  const auto& value = raw(name);
  if (!value.is_string()) fail(std::string("field '") + name + "' must be a string");
  return value.get<std::string>();
}

std::string Fields::string_or(const char* name, const std::string& fallback) const {
  return has(name) ? string(name) : fallback;
}

std::uint64_t Fields::as_u64(const nlohmann::json& value, const std::string& what) const {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (value.is_number_integer() && value.get<std::int64_t>() >= 0)
    return static_cast<std::uint64_t>(value.get<std::int64_t>());
  fail(what + " must be a non-negative integer");
}

TokenId Fields::as_token(const nlohmann::json& value, const std::string& what) const {
  const std::uint64_t token = as_u64(value, what);
  if (token > std::numeric_limits<TokenId>::max()) fail(what + " must fit in 32 bits");
  return static_cast<TokenId>(token);
}

std::uint64_t Fields::u64(const char* name) const { return as_u64(raw(name), std::string("field '") + name + "'"); }

std::uint64_t Fields::u64_or(const char* name, std::uint64_t fallback) const {
  return has(name) ? u64(name) : fallback;
}

std::uint32_t Fields::u32(const char* name) const {
  const std::uint64_t value = u64(name);
  if (value > std::numeric_limits<std::uint32_t>::max()) fail(std::string("field '") + name + "' must fit in 32 bits");
  return static_cast<std::uint32_t>(value);
}

std::uint32_t Fields::u32_or(const char* name, std::uint32_t fallback) const {
  return has(name) ? u32(name) : fallback;
}

std::optional<std::uint64_t> Fields::optional_u64(const char* name) const {
  if (!has(name)) return std::nullopt;
  return u64(name);
}

bool Fields::boolean_or(const char* name, bool fallback) const {
  if (!has(name)) return fallback;
  const auto& value = raw(name);
  if (!value.is_boolean()) fail(std::string("field '") + name + "' must be true or false");
  return value.get<bool>();
}

std::vector<std::uint64_t> Fields::u64_list_or_empty(const char* name) const {
  std::vector<std::uint64_t> out;
  if (!has(name)) return out;
  const auto& value = raw(name);
  if (!value.is_array()) fail(std::string("field '") + name + "' must be a list");
  for (const auto& item : value) out.push_back(as_u64(item, std::string("every entry of '") + name + "'"));
  return out;
}

std::optional<std::vector<TokenId>> Fields::optional_tokens(const char* name) const {
  if (!has(name)) return std::nullopt;
  const auto& value = raw(name);
  if (!value.is_array()) fail(std::string("field '") + name + "' must be a list of token ids");
  std::vector<TokenId> tokens;
  for (const auto& item : value) tokens.push_back(as_token(item, std::string("every token of '") + name + "'"));
  return tokens;
}

std::optional<BlockTokenIds> Fields::optional_token_lists(const char* name) const {
  if (!has(name)) return std::nullopt;
  const auto& value = raw(name);
  if (!value.is_array()) fail(std::string("field '") + name + "' must be a list of token-id lists");
  BlockTokenIds lists;
  for (const auto& block : value) {
    if (!block.is_array()) fail(std::string("field '") + name + "' must be a list of token-id lists");
    std::vector<TokenId> tokens;
    for (const auto& item : block) tokens.push_back(as_token(item, std::string("every token of '") + name + "'"));
    lists.push_back(std::move(tokens));
  }
  return lists;
}

}  // namespace kvtier::script
