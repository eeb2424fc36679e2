#pragma once
#include <cstdint>
#include <vector>

#include "kvtier/core/strong_id.hpp"

namespace kvtier::g1 {

/// Open-addressing set of 32-bit ids (pages, graph nodes) looked up by a key
/// that lives with the id's own record: a slot holds the id and 32 bits of the
/// key's hash side by side (8 bytes, one cache line per probe), so probes and
/// deletions rarely touch the records. `KeyOf` reads the key back (`key(id)`)
/// and hashes it (`hash(key)`). Sized once for `max_ids` entries at load
/// <= slack / (slack + 1) (3/4 by default; no power-of-two rounding: that is
/// what keeps the per-page budget), never rehashes; linear probing with
/// backward-shift deletion. An id's key must not change while it is in the
/// index: erase first, then edit the record.
template <class KeyOf>
class IdIndex {
 public:
  static constexpr std::uint32_t kAbsent = kNoPage;  // the ids it maps to are page ids

  IdIndex(std::size_t max_ids, KeyOf key_of, std::size_t slack = 3)
      : key_of_(key_of), slots_(max_ids + max_ids / slack + 2, Slot{kAbsent, 0}) {}

  static constexpr std::size_t kNoSlot = ~std::size_t{0};

  template <class Key>
  std::uint32_t find(const Key& key) const noexcept {
    const std::size_t slot = find_slot(key);
    return slot == kNoSlot ? kAbsent : slots_[slot].id;
  }

  /// The slot holding `key`'s id (kNoSlot when absent): one probe run that
  /// id_at / replace_at / erase_at then act on without probing again.
  template <class Key>
  std::size_t find_slot(const Key& key) const noexcept {
    const std::uint32_t t = tag(key);
    for (std::size_t slot = home(t);; slot = next(slot)) {
      const Slot s = slots_[slot];
      if (s.id == kAbsent) return kNoSlot;
      if (s.tag == t && key_of_.key(s.id) == key) return slot;
    }
  }
  std::uint32_t id_at(std::size_t slot) const noexcept { return slots_[slot].id; }

  /// Starts loading `key`'s home slot: loops over many keys prefetch a few
  /// keys ahead, so their cache misses overlap instead of queueing.
  template <class Key>
  void prefetch(const Key& key) const noexcept {
    __builtin_prefetch(&slots_[home(tag(key))]);
  }
  /// Puts `id` in the slot of an id with the same key (the tag stays valid).
  void replace_at(std::size_t slot, std::uint32_t id) noexcept { slots_[slot].id = id; }

  /// Precondition: no id with the same key is present.
  void insert(std::uint32_t id) noexcept { insert_as(key_of_.key(id), id); }

  /// Inserts `id` unless an id with the same key is present; returns the id
  /// that holds the key afterwards (one probe for "register unless known").
  std::uint32_t insert_or_find(std::uint32_t id) noexcept {
    const auto& key = key_of_.key(id);
    const std::uint32_t t = tag(key);
    std::size_t slot = home(t);
    for (; slots_[slot].id != kAbsent; slot = next(slot)) {
      if (slots_[slot].tag == t && key_of_.key(slots_[slot].id) == key) return slots_[slot].id;
    }
    slots_[slot] = Slot{id, t};
    ++size_;
    return id;
  }

  /// Removes `id` if present (another id with the same key stays).
  void erase(std::uint32_t id) noexcept { erase_as(key_of_.key(id), id); }

  /// Empties a slot find_slot returned.
  void erase_at(std::size_t hole) noexcept {
    // Backward shift: pull later members of the probe run into the hole.
    for (std::size_t at = next(hole); slots_[at].id != kAbsent; at = next(at)) {
      const std::size_t want = home(slots_[at].tag);
      const bool stays = hole <= at ? (hole < want && want <= at) : (hole < want || want <= at);
      if (!stays) {
        slots_[hole] = slots_[at];
        hole = at;
      }
    }
    slots_[hole].id = kAbsent;
    --size_;
  }

  // An index whose ids are found by more than one key (KVBM's: a block's
  // lineage hash and its sequence hash): the caller names the key each entry
  // is filed under and says which id matches; an id may be filed under two.
  /// The first id filed under `key` that `match` accepts (kAbsent: none).
  template <class Key, class Match>
  std::uint32_t find_if(const Key& key, Match match) const {
    const std::uint32_t t = tag(key);
    for (std::size_t slot = home(t);; slot = next(slot)) {
      const Slot s = slots_[slot];
      if (s.id == kAbsent) return kAbsent;
      if (s.tag == t && match(s.id)) return s.id;
    }
  }
  /// Files `id` under `key` (after any id filed under it already).
  template <class Key>
  void insert_as(const Key& key, std::uint32_t id) noexcept {
    const std::uint32_t t = tag(key);
    std::size_t slot = home(t);
    while (slots_[slot].id != kAbsent) slot = next(slot);
    slots_[slot] = Slot{id, t};
    ++size_;
  }
  /// Removes `id`'s entry filed under `key`, if there is one.
  template <class Key>
  void erase_as(const Key& key, std::uint32_t id) noexcept {
    const std::uint32_t t = tag(key);
    for (std::size_t hole = home(t);; hole = next(hole)) {
      if (slots_[hole].id == kAbsent) return;
      if (slots_[hole].id == id && slots_[hole].tag == t) return erase_at(hole);
    }
  }

  std::size_t size() const noexcept { return size_; }
  std::size_t memory_bytes() const noexcept { return slots_.capacity() * sizeof(Slot); }

 private:
  struct Slot {
    std::uint32_t id;
    std::uint32_t tag;
  };

  template <class Key>
  std::uint32_t tag(const Key& key) const noexcept {
    // Fibonacci scrambling: injected test hashes (7, 8, 9...) spread like real ones.
    return static_cast<std::uint32_t>((static_cast<std::uint64_t>(key_of_.hash(key)) * 0x9E3779B97F4A7C15ULL) >> 32);
  }
  /// Maps a tag onto [0, slots) without a power-of-two table.
  std::size_t home(std::uint32_t t) const noexcept {
    return static_cast<std::size_t>((std::uint64_t{t} * slots_.size()) >> 32);
  }
  std::size_t next(std::size_t slot) const noexcept { return slot + 1 == slots_.size() ? 0 : slot + 1; }

  KeyOf key_of_;
  std::vector<Slot> slots_;
  std::size_t size_ = 0;
};

}  // namespace kvtier::g1
