#pragma once
// A backend's open reservations of one kind, by id.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>

#include "kvtier/core/errors.hpp"

namespace kvtier::g1::detail {

/// Reservation ids, unique across every ledger of one backend.
class ReservationIds {
 public:
  std::uint64_t next() noexcept { return next_++; }

 private:
  std::uint64_t next_ = 1;
};

/// Open reservations of one kind ("decode", "destination", "prefix pin",
/// "slot"); an unknown id is a ContractError naming the kind.
template <class T>
class ReservationLedger {
 public:
  explicit ReservationLedger(const char* what) : what_(what) {}

  std::uint64_t add(ReservationIds& ids, T value) {
    const std::uint64_t id = ids.next();
    entries_.emplace(id, std::move(value));
    return id;
  }
  T& at(std::uint64_t id) { return find(id)->second; }
  const T& at(std::uint64_t id) const {
    const auto it = entries_.find(id);
    if (it == entries_.end()) unknown(id);
    return it->second;
  }
  /// Removes the reservation and hands its value over.
  T take(std::uint64_t id) {
    const auto it = find(id);
    T value = std::move(it->second);
    entries_.erase(it);
    return value;
  }
  void erase(std::uint64_t id) { entries_.erase(find(id)); }
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }

 private:
  typename std::unordered_map<std::uint64_t, T>::iterator find(std::uint64_t id) {
    const auto it = entries_.find(id);
    if (it == entries_.end()) unknown(id);
    return it;
  }
  [[noreturn]] void unknown(std::uint64_t id) const {
    throw ContractError(std::string("unknown ") + what_ + " reservation " + std::to_string(id));
  }

  const char* what_;
  std::unordered_map<std::uint64_t, T> entries_;
};

}  // namespace kvtier::g1::detail
