#include "kvtier/core/page_pattern.hpp"

#include <algorithm>
#include <cstring>

namespace kvtier {

void fill_page_pattern(std::uint64_t identity, std::uint64_t first_byte, std::span<std::byte> out) noexcept {
  std::size_t i = 0;
  // Byte-wise up to a word boundary, then whole words (the hot path).
  for (; i < out.size() && (first_byte + i) % 8 != 0; ++i) {
    out[i] = static_cast<std::byte>(page_pattern_byte(identity, first_byte + i));
  }
  for (; i + 8 <= out.size(); i += 8) {
    const std::uint64_t word = page_pattern_word(identity, (first_byte + i) / 8);
    unsigned char bytes[8];
    for (int b = 0; b < 8; ++b) bytes[b] = static_cast<unsigned char>(word >> (8 * b));
    std::memcpy(out.data() + i, bytes, 8);
  }
  for (; i < out.size(); ++i) out[i] = static_cast<std::byte>(page_pattern_byte(identity, first_byte + i));
}

bool matches_page_pattern(std::uint64_t identity, std::uint64_t first_byte, std::span<const std::byte> bytes) noexcept {
  std::byte expected[4096];
  for (std::size_t done = 0; done < bytes.size();) {
    const std::size_t n = std::min(sizeof expected, bytes.size() - done);
    fill_page_pattern(identity, first_byte + done, std::span<std::byte>(expected, n));
    if (std::memcmp(expected, bytes.data() + done, n) != 0) return false;
    done += n;
  }
  return true;
}

}  // namespace kvtier
