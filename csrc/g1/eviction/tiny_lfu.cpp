#include "g1/eviction/tiny_lfu.hpp"

#include <algorithm>
#include <bit>

namespace kvtier::g1 {
namespace {

constexpr unsigned kRows = 4;
constexpr std::uint64_t kSeed = 0x9E3779B97F4A7C15ULL;

std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace

// Counters are grouped in blocks of one cache line (8 words of 16 four-bit
// counters): a key's four counters sit in one block, one per pair of words,
// so an increment or estimate touches one line instead of four (Caffeine's
// frequency sketch does the same).
constexpr std::size_t kWordsPerBlock = 8;
constexpr std::size_t kCountersPerBlock = kWordsPerBlock * 16;

TinyLfu::TinyLfu(std::uint32_t capacity)
    : blocks_(std::max<std::size_t>(1, kRows * std::bit_ceil(std::max<std::size_t>(capacity, 16)) / kCountersPerBlock)),
      sample_size_(10ULL * std::max(capacity, 1U)) {
  words_.assign(blocks_ * kWordsPerBlock, 0);
}

TinyLfu::Counters TinyLfu::counters(const PositionalLineageHash& key) const noexcept {
  // One mix of both words: a PLH's fragments are hash outputs already.
  const std::uint64_t h = mix(key.high() ^ (key.low() * kSeed));
  Counters out;
  const std::size_t block = (h >> 32) & (blocks_ - 1);  // blocks_ is a power of two
  for (unsigned row = 0; row < kRows; ++row) {
    const std::uint64_t bits = h >> (8 * row);
    out.word[row] = block * kWordsPerBlock + 2 * row + (bits & 1);
    out.shift[row] = static_cast<unsigned>(4 * ((bits >> 1) & 0xF));
  }
  return out;
}

void TinyLfu::increment(const PositionalLineageHash& key) noexcept {
  const Counters c = counters(key);
  for (unsigned row = 0; row < kRows; ++row) {
    std::uint64_t& word = words_[c.word[row]];
    if (((word >> c.shift[row]) & 0xF) < 15) word += std::uint64_t{1} << c.shift[row];
  }
  if (++increments_ >= sample_size_) halve_all();
}

std::uint32_t TinyLfu::estimate(const PositionalLineageHash& key) const noexcept {
  const Counters c = counters(key);
  std::uint32_t least = 15;
  for (unsigned row = 0; row < kRows; ++row) {
    least = std::min(least, static_cast<std::uint32_t>((words_[c.word[row]] >> c.shift[row]) & 0xF));
  }
  return least;
}

void TinyLfu::halve_all() noexcept {
  // Shift every 4-bit counter right by one without borrowing across counters.
  for (std::uint64_t& word : words_) word = (word >> 1) & 0x7777777777777777ULL;
  increments_ /= 2;
}

}  // namespace kvtier::g1
