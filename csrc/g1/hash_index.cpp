#include "kvtier/g1/hash_index.hpp"

#include <bit>

namespace kvtier::g1 {

HashIndex::HashIndex(std::size_t max_keys) {
  const std::size_t slots = std::bit_ceil(max_keys + max_keys / 3 + 2);
  keys_.assign(slots, 0);
  values_.assign(slots, kAbsent);
  mask_ = slots - 1;
  shift_ = 64U - static_cast<unsigned>(std::countr_zero(slots));
}

std::size_t HashIndex::slot_of(std::uint64_t key) const noexcept {
  // Fibonacci hashing: injected test hashes (7, 8, 9...) spread like real ones.
  return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ULL) >> shift_) & mask_;
}

std::uint32_t HashIndex::find(std::uint64_t key) const noexcept {
  for (std::size_t slot = slot_of(key);; slot = (slot + 1) & mask_) {
    if (values_[slot] == kAbsent) return kAbsent;
    if (keys_[slot] == key) return values_[slot];
  }
}

void HashIndex::assign(std::uint64_t key, std::uint32_t value) noexcept {
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

void HashIndex::erase(std::uint64_t key) noexcept {
  std::size_t slot = slot_of(key);
  for (;; slot = (slot + 1) & mask_) {
    if (values_[slot] == kAbsent) return;
    if (keys_[slot] == key) break;
  }
  // Backward shift: pull later members of the probe run into the hole.
  std::size_t hole = slot;
  for (std::size_t next = (hole + 1) & mask_; values_[next] != kAbsent; next = (next + 1) & mask_) {
    const std::size_t home = slot_of(keys_[next]);
    // Move `next` into the hole unless its home lies cyclically in (hole, next].
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

}  // namespace kvtier::g1
