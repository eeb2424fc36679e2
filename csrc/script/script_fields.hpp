#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kvtier/core/block_hash.hpp"
#include "script_error.hpp"

namespace kvtier::script {

/// Typed, validated access to the fields of one operation object. Every
/// problem is a ScriptError naming the line and the field.
class Fields {
 public:
  Fields(const nlohmann::json& object, std::size_t line) : object_(object), line_(line) {}

  std::size_t line() const noexcept { return line_; }
  bool has(const char* name) const { return object_.contains(name) && !object_.at(name).is_null(); }
  const nlohmann::json& raw(const char* name) const;
  [[noreturn]] void fail(const std::string& message) const { throw ScriptError(line_, message); }

  std::string string(const char* name) const;
  std::string string_or(const char* name, const std::string& fallback) const;
  /// A non-negative integer that fits in 64 bits (hashes round-trip exactly).
  std::uint64_t u64(const char* name) const;
  std::uint64_t u64_or(const char* name, std::uint64_t fallback) const;
  /// A non-negative integer that fits in 32 bits (sizes and counts that the
  /// library keeps as 32-bit values: never silently truncated).
  std::uint32_t u32(const char* name) const;
  std::uint32_t u32_or(const char* name, std::uint32_t fallback) const;
  std::optional<std::uint64_t> optional_u64(const char* name) const;
  bool boolean_or(const char* name, bool fallback) const;
  std::vector<std::uint64_t> u64_list_or_empty(const char* name) const;
  std::optional<BlockTokenIds> optional_token_lists(const char* name) const;
  std::optional<std::vector<TokenId>> optional_tokens(const char* name) const;

  std::uint64_t as_u64(const nlohmann::json& value, const std::string& what) const;
  TokenId as_token(const nlohmann::json& value, const std::string& what) const;

 private:
  const nlohmann::json& object_;
  std::size_t line_;
};

}  // namespace kvtier::script
