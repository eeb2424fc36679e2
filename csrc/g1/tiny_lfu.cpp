#include "kvtier/g1/tiny_lfu.hpp"

#include <algorithm>
#include <bit>

namespace kvtier::g1 {
namespace {

constexpr unsigned kRows = 4;
constexpr std::uint64_t kRowSeeds[kRows] = {0x9E3779B97F4A7C15ULL, 0xC2B2AE3D27D4EB4FULL, 0x165667B19E3779F9ULL,
                                            0xD6E8FEB86659FD93ULL};

std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace

TinyLfu::TinyLfu(std::uint32_t capacity)
    : row_counters_(std::bit_ceil(std::max<std::size_t>(capacity, 16))), sample_size_(10ULL * std::max(capacity, 1U)) {
  words_.assign(kRows * row_counters_ / 16, 0);
}

std::size_t TinyLfu::counter_index(const PositionalLineageHash& key, unsigned row) const noexcept {
  const std::uint64_t h = mix(key.high() ^ mix(key.low() ^ kRowSeeds[row]));
  return row * row_counters_ + (h & (row_counters_ - 1));
}

std::uint32_t TinyLfu::get(std::size_t index) const noexcept {
  return static_cast<std::uint32_t>((words_[index / 16] >> (4 * (index % 16))) & 0xF);
}

void TinyLfu::increment(const PositionalLineageHash& key) noexcept {
  for (unsigned row = 0; row < kRows; ++row) {
    const std::size_t index = counter_index(key, row);
    if (get(index) < 15) words_[index / 16] += std::uint64_t{1} << (4 * (index % 16));
  }
  if (++increments_ >= sample_size_) halve_all();
}

std::uint32_t TinyLfu::estimate(const PositionalLineageHash& key) const noexcept {
  std::uint32_t least = 15;
  for (unsigned row = 0; row < kRows; ++row) least = std::min(least, get(counter_index(key, row)));
  return least;
}

void TinyLfu::halve_all() noexcept {
  // Shift every 4-bit counter right by one without borrowing across counters.
  for (std::uint64_t& word : words_) word = (word >> 1) & 0x7777777777777777ULL;
  increments_ /= 2;
}

}  // namespace kvtier::g1
