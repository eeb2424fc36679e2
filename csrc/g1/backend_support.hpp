#pragma once
// Private helpers both G1 backends use for contract checks.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kvtier/core/errors.hpp"
#include "kvtier/g1/g1_types.hpp"

namespace kvtier::g1::detail {

/// Visitor of several lambdas (std::visit over a MoveBlock).
template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;  // clang before 17 deduces no aggregate CTAD

inline std::string owner_text(OwnerId owner) { return std::to_string(owner.value()); }

/// The entry of reservation `id`, or ContractError("unknown <what> reservation <id>").
template <class Map>
auto find_reservation(Map& reservations, std::uint64_t id, const char* what) {
  const auto it = reservations.find(id);
  if (it == reservations.end()) throw ContractError(std::string("unknown ") + what + " reservation " + std::to_string(id));
  return it;
}

/// The owner's table, or ContractError("unknown owner <id>").
template <class Tables>
const auto& owner_table(const Tables& tables, OwnerId owner) {
  const auto it = tables.find(owner);
  if (it == tables.end()) throw ContractError("unknown owner " + owner_text(owner));
  return it->second;
}

/// The owners holding blocks, in id order.
template <class Tables>
std::vector<OwnerId> sorted_owners(const Tables& tables) {
  std::vector<OwnerId> out;
  out.reserve(tables.size());
  for (const auto& entry : tables) out.push_back(entry.first);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace kvtier::g1::detail
