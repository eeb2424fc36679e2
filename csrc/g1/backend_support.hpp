#pragma once
// Private helpers both G1 backends use for contract checks.
#include <cstdint>
#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/g1/g1_types.hpp"

namespace kvtier::g1::detail {

inline std::string owner_text(OwnerId owner) { return std::to_string(owner.value()); }

/// The entry of reservation `id`, or ContractError("unknown <what> reservation <id>").
template <class Map>
auto find_reservation(Map& reservations, std::uint64_t id, const char* what) {
  const auto it = reservations.find(id);
  if (it == reservations.end()) throw ContractError(std::string("unknown ") + what + " reservation " + std::to_string(id));
  return it;
}

}  // namespace kvtier::g1::detail
