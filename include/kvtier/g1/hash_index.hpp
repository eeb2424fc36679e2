#pragma once
#include <cstdint>
#include <vector>

namespace kvtier::g1 {

/// Open-addressing map from a 64-bit block hash to a 32-bit page id, sized
/// once for at most `max_keys` keys (load <= 3/4, never rehashes). Linear
/// probing with backward-shift deletion; 12 bytes a slot. Used where a
/// std::unordered_map's per-node allocation would dominate the per-page
/// metadata budget.
class HashIndex {
 public:
  static constexpr std::uint32_t kAbsent = 0xFFFFFFFFU;

  explicit HashIndex(std::size_t max_keys);

  std::uint32_t find(std::uint64_t key) const noexcept;
  /// Inserts or overwrites. Precondition: size() < max_keys when inserting.
  void assign(std::uint64_t key, std::uint32_t value) noexcept;
  /// Removes the key if present.
  void erase(std::uint64_t key) noexcept;
  std::size_t size() const noexcept { return size_; }
  std::size_t memory_bytes() const noexcept {
    return keys_.capacity() * sizeof(std::uint64_t) + values_.capacity() * sizeof(std::uint32_t);
  }

 private:
  std::size_t slot_of(std::uint64_t key) const noexcept;
  std::vector<std::uint64_t> keys_;
  std::vector<std::uint32_t> values_;  // kAbsent marks an empty slot
  std::size_t mask_ = 0;
  unsigned shift_ = 0;
  std::size_t size_ = 0;
};

}  // namespace kvtier::g1
