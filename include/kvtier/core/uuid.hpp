#pragma once
#include <compare>
#include <cstdint>
#include <functional>
#include <string>

namespace kvtier {

/// RFC 4122 version-4 UUID: the identity of a partial block.
class Uuid {
 public:
  constexpr Uuid() = default;
  constexpr Uuid(std::uint64_t high, std::uint64_t low) : high_(high), low_(low) {}
  /// A fresh random v4 UUID (thread-safe).
  static Uuid random();
  std::uint64_t high() const noexcept { return high_; }
  std::uint64_t low() const noexcept { return low_; }
  /// Canonical 8-4-4-4-12 lowercase hex form.
  std::string to_string() const;
  friend constexpr auto operator<=>(const Uuid&, const Uuid&) = default;

 private:
  std::uint64_t high_ = 0;
  std::uint64_t low_ = 0;
};

}  // namespace kvtier

template <>
struct std::hash<kvtier::Uuid> {
  std::size_t operator()(const kvtier::Uuid& u) const noexcept {
    return std::hash<std::uint64_t>{}(u.high() ^ (u.low() * 0x9E3779B97F4A7C15ULL));
  }
};
