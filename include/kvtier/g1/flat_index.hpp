#pragma once
#include <bit>
#include <cstdint>
#include <functional>
#include <vector>

namespace kvtier::g1 {

/// Open-addressing map from a key to a 32-bit id (a page or a node), sized
/// once for at most `max_keys` keys (load <= 3/4, never rehashes). Linear
/// probing with backward-shift deletion. Used where a std::unordered_map's
/// per-node allocation would dominate the per-page metadata budget.
template <class Key, class Hash = std::hash<Key>>
class FlatIndex {
 public:
  static constexpr std::uint32_t kAbsent = 0xFFFFFFFFU;

  explicit FlatIndex(std::size_t max_keys) {
    const std::size_t slots = std::bit_ceil(max_keys + max_keys / 3 + 2);
    keys_.assign(slots, Key{});
    values_.assign(slots, kAbsent);
    mask_ = slots - 1;
  }

  std::uint32_t find(const Key& key) const noexcept {
    for (std::size_t slot = slot_of(key);; slot = (slot + 1) & mask_) {
      if (values_[slot] == kAbsent) return kAbsent;
      if (keys_[slot] == key) return values_[slot];
    }
  }

  /// Inserts or overwrites. Precondition: size() < max_keys when inserting.
  void assign(const Key& key, std::uint32_t value) noexcept {
    for (std::size_t slot = slot_of(key);; slot = (slot + 1) & mask_) {
      if (values_[slot] == kAbsent) {
        keys_[slot] = key;
        values_[slot] = value;
        ++size_;
        return;
      }
      if (keys_[slot] == key) {
        values_[slot] = value;
        return;
      }
    }
  }

  /// Removes the key if present.
  void erase(const Key& key) noexcept {
    std::size_t hole = slot_of(key);
    for (;; hole = (hole + 1) & mask_) {
      if (values_[hole] == kAbsent) return;
      if (keys_[hole] == key) break;
    }
    // Backward shift: pull later members of the probe run into the hole.
    for (std::size_t next = (hole + 1) & mask_; values_[next] != kAbsent; next = (next + 1) & mask_) {
      const std::size_t home = slot_of(keys_[next]);
      const bool stays = hole <= next ? (hole < home && home <= next) : (hole < home || home <= next);
      if (!stays) {
        keys_[hole] = keys_[next];
        values_[hole] = values_[next];
        hole = next;
      }
    }
    values_[hole] = kAbsent;
    --size_;
  }

  std::size_t size() const noexcept { return size_; }
  std::size_t memory_bytes() const noexcept {
    return keys_.capacity() * sizeof(Key) + values_.capacity() * sizeof(std::uint32_t);
  }

 private:
  std::size_t slot_of(const Key& key) const noexcept {
    // Fibonacci scrambling: injected test hashes (7, 8, 9...) spread like real ones.
    return static_cast<std::size_t>((static_cast<std::uint64_t>(Hash{}(key)) * 0x9E3779B97F4A7C15ULL) >> 17) & mask_;
  }

  std::vector<Key> keys_;
  std::vector<std::uint32_t> values_;  // kAbsent marks an empty slot
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

/// Sequence hash -> page.
using HashIndex = FlatIndex<std::uint64_t>;

}  // namespace kvtier::g1
