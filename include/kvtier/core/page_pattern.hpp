#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "kvtier/core/host_device.hpp"

namespace kvtier {

/// Deterministic page contents derived from a 64-bit identity (a sequence hash
/// or a partial block's label), used to prove that bytes survive every move:
/// byte i of a page is byte (i % 8) of splitmix64(identity ^ (i / 8) * golden).
/// Different identities or offsets give unrelated bytes.
KVTIER_HOST_DEVICE constexpr std::uint64_t page_pattern_word(std::uint64_t identity, std::uint64_t word_index) {
  std::uint64_t z = identity ^ (word_index * 0x9E3779B97F4A7C15ULL) ^ 0xD1B54A32D192ED03ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

KVTIER_HOST_DEVICE constexpr std::uint8_t page_pattern_byte(std::uint64_t identity, std::uint64_t byte_offset) {
  return static_cast<std::uint8_t>(page_pattern_word(identity, byte_offset / 8) >> (8 * (byte_offset % 8)));
}

/// Writes the pattern of `identity` for page bytes [first_byte, first_byte + out.size()).
void fill_page_pattern(std::uint64_t identity, std::uint64_t first_byte, std::span<std::byte> out) noexcept;
/// True when `bytes` equal the pattern of `identity` starting at `first_byte`.
bool matches_page_pattern(std::uint64_t identity, std::uint64_t first_byte, std::span<const std::byte> bytes) noexcept;

}  // namespace kvtier
