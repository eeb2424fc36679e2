#pragma once
#include <cstdint>
#include <vector>

namespace kvtier::g1 {

/// Open-addressing set of 32-bit ids (pages, graph nodes) looked up by a key
/// that lives with the id's own record: a slot stores the id and, when
/// `kStoreTags`, 32 bits of the key's hash (so probes and deletions rarely
/// touch the records). `KeyOf` reads the key back (`key(id)`) and hashes it
/// (`hash(key)`). Sized once for `max_ids` entries at load <= 1 / (1 + 1/slack)
/// (3/4 by default; no power-of-two rounding: that is what keeps the per-page
/// budget), never rehashes;
/// linear probing with backward-shift deletion. An id's key must not change
/// while it is in the index: erase first, then edit the record.
template <class KeyOf, bool kStoreTags = true>
class IdIndex {
 public:
  static constexpr std::uint32_t kAbsent = 0xFFFFFFFFU;

  IdIndex(std::size_t max_ids, KeyOf key_of, std::size_t slack = 3) : key_of_(key_of) {
    slots_.assign(max_ids + max_ids / slack + 2, kAbsent);
    if constexpr (kStoreTags) tags_.assign(slots_.size(), 0);
  }

  template <class Key>
  std::uint32_t find(const Key& key) const noexcept {
    const std::uint32_t t = tag(key);
    for (std::size_t slot = home(t);; slot = next(slot)) {
      const std::uint32_t id = slots_[slot];
      if (id == kAbsent) return id;
      if constexpr (kStoreTags) {
        if (tags_[slot] != t) continue;
      }
      if (key_of_.key(id) == key) return id;
    }
  }

  /// Precondition: no id with the same key is present.
  void insert(std::uint32_t id) noexcept {
    const std::uint32_t t = tag(key_of_.key(id));
    std::size_t slot = home(t);
    while (slots_[slot] != kAbsent) slot = next(slot);
    slots_[slot] = id;
    if constexpr (kStoreTags) tags_[slot] = t;
    ++size_;
  }

  /// Inserts `id` unless an id with the same key is present; returns the id
  /// that holds the key afterwards (one probe for "register unless known").
  std::uint32_t insert_or_find(std::uint32_t id) noexcept {
    const auto& key = key_of_.key(id);
    const std::uint32_t t = tag(key);
    std::size_t slot = home(t);
    for (; slots_[slot] != kAbsent; slot = next(slot)) {
      if constexpr (kStoreTags) {
        if (tags_[slot] != t) continue;
      }
      if (key_of_.key(slots_[slot]) == key) return slots_[slot];
    }
    slots_[slot] = id;
    if constexpr (kStoreTags) tags_[slot] = t;
    ++size_;
    return id;
  }

  /// Removes `id` if present (another id with the same key stays).
  void erase(std::uint32_t id) noexcept {
    std::size_t hole = home(tag(key_of_.key(id)));
    for (;; hole = next(hole)) {
      if (slots_[hole] == kAbsent) return;
      if (slots_[hole] == id) break;
    }
    // Backward shift: pull later members of the probe run into the hole.
    for (std::size_t at = next(hole); slots_[at] != kAbsent; at = next(at)) {
      const std::size_t want = home(stored_tag(at));
      const bool stays = hole <= at ? (hole < want && want <= at) : (hole < want || want <= at);
      if (!stays) {
        slots_[hole] = slots_[at];
        if constexpr (kStoreTags) tags_[hole] = tags_[at];
        hole = at;
      }
    }
    slots_[hole] = kAbsent;
    --size_;
  }

  std::size_t size() const noexcept { return size_; }
  std::size_t memory_bytes() const noexcept {
    return (slots_.capacity() + tags_.capacity()) * sizeof(std::uint32_t);
  }

 private:
  template <class Key>
  std::uint32_t tag(const Key& key) const noexcept {
    // Fibonacci scrambling: injected test hashes (7, 8, 9...) spread like real ones.
    return static_cast<std::uint32_t>((static_cast<std::uint64_t>(key_of_.hash(key)) * 0x9E3779B97F4A7C15ULL) >> 32);
  }
  std::uint32_t stored_tag(std::size_t slot) const noexcept {
    if constexpr (kStoreTags) {
      return tags_[slot];
    } else {
      return tag(key_of_.key(slots_[slot]));
    }
  }
  /// Maps a tag onto [0, slots) without a power-of-two table.
  std::size_t home(std::uint32_t t) const noexcept {
    return static_cast<std::size_t>((std::uint64_t{t} * slots_.size()) >> 32);
  }
  std::size_t next(std::size_t slot) const noexcept { return slot + 1 == slots_.size() ? 0 : slot + 1; }

  KeyOf key_of_;
  std::vector<std::uint32_t> slots_;
  std::vector<std::uint32_t> tags_;
  std::size_t size_ = 0;
};

}  // namespace kvtier::g1
