#pragma once
#include <cstdint>
#include <vector>

#include "kvtier/core/lineage_hash.hpp"

namespace kvtier::g1 {

/// TinyLFU frequency sketch: a count-min sketch of 4-bit saturating counters
/// (4 rows) sized for `capacity` keys. After 10 x capacity increments every
/// counter is halved, so old popularity fades.
class TinyLfu {
 public:
  explicit TinyLfu(std::uint32_t capacity);
  void increment(const PositionalLineageHash& key) noexcept;
  /// 0..15.
  std::uint32_t estimate(const PositionalLineageHash& key) const noexcept;
  std::size_t memory_bytes() const noexcept { return words_.capacity() * sizeof(std::uint64_t); }

 private:
  /// Where a key's four counters are: a word and a bit shift each, all in one block.
  struct Counters {
    std::size_t word[4];
    unsigned shift[4];
  };
  Counters counters(const PositionalLineageHash& key) const noexcept;
  void halve_all() noexcept;

  std::vector<std::uint64_t> words_;  // 16 four-bit counters a word, 8 words a block
  std::size_t blocks_;                // power of two
  std::uint64_t increments_ = 0;
  std::uint64_t sample_size_;
};

}  // namespace kvtier::g1
