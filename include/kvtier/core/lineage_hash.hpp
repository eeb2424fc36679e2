#pragma once
#include <compare>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "kvtier/core/strong_id.hpp"

namespace kvtier {

/// KVBM's 128-bit positional lineage hash (PLH): [mode:2][position][parent
/// fragment][current fragment], fragments taken from the low bits of the hashes.
/// The position width picks the mode: <= 255 -> 8/59/59, <= 65535 -> 16/55/55,
/// < 2^24 -> 24/51/51. The current fragment is cut to the parent width of the
/// *next* position so that a child's parent fragment always equals its parent's
/// current fragment, also across a mode boundary.
class PositionalLineageHash {
 public:
  static constexpr std::uint64_t kMaxPosition = (std::uint64_t{1} << 24) - 1;

  constexpr PositionalLineageHash() = default;
  /// Throws ContractError when position > kMaxPosition.
  PositionalLineageHash(SequenceHash current, std::optional<SequenceHash> parent, std::uint64_t position);
  static constexpr PositionalLineageHash from_raw(std::uint64_t high, std::uint64_t low) {
    PositionalLineageHash plh;
    plh.high_ = high;
    plh.low_ = low;
    return plh;
  }

  std::uint8_t mode() const noexcept { return static_cast<std::uint8_t>(high_ >> 62); }
  /// Fragment width of this mode (59, 55 or 51 bits).
  unsigned fragment_bits() const noexcept { return 59U - 4U * (mode() % 3U); }
  std::uint64_t position() const noexcept {
    const unsigned position_bits = 8U * (mode() % 3U + 1U);
    return (high_ >> (2 * fragment_bits() - 64)) & ((std::uint64_t{1} << position_bits) - 1);
  }
  std::uint64_t current_fragment() const noexcept { return low_ & ((std::uint64_t{1} << fragment_bits()) - 1); }
  std::uint64_t parent_fragment() const noexcept {
    const unsigned bits = fragment_bits();
    return ((low_ >> bits) | (high_ << (64 - bits))) & ((std::uint64_t{1} << bits) - 1);
  }
  std::uint64_t high() const noexcept { return high_; }
  std::uint64_t low() const noexcept { return low_; }
  std::string to_string() const;

  friend constexpr auto operator<=>(const PositionalLineageHash&, const PositionalLineageHash&) = default;

 private:
  std::uint64_t high_ = 0;
  std::uint64_t low_ = 0;
};

}  // namespace kvtier

template <>
struct std::hash<kvtier::PositionalLineageHash> {
  std::size_t operator()(const kvtier::PositionalLineageHash& plh) const noexcept {
    return std::hash<std::uint64_t>{}(plh.low() ^ (plh.high() * 0x9E3779B97F4A7C15ULL));
  }
};
