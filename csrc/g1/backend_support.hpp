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

/// Emptied owner tables kept for later owners, with their vectors' capacity:
/// a new owner's table then allocates nothing in steady state. Bounded (a
/// scheduler admits about as many owners as finish, so two suffice), and
/// counted in the backends' metadata. A table that held a long request is
/// not kept: recycled, its capacity would stay with every later short one
/// (and one allocation per 512+ blocks costs nothing).
inline constexpr std::size_t kMaxSpareTables = 2;
inline constexpr std::size_t kMaxSpareTableBlocks = 512;

/// The owner's table, made on first use from a spare one when there is one.
template <class Tables>
typename Tables::mapped_type& table_for(Tables& tables, std::vector<typename Tables::node_type>& spares, OwnerId owner) {
  const auto it = tables.find(owner);
  if (it != tables.end()) return it->second;
  if (spares.empty()) return tables[owner];
  auto node = std::move(spares.back());
  spares.pop_back();
  node.key() = owner;
  return tables.insert(std::move(node)).position->second;
}

/// Drops an emptied table (Table::clear keeps capacity), keeping it as a spare while there is room.
template <class Tables>
void retire_table(Tables& tables, std::vector<typename Tables::node_type>& spares, typename Tables::iterator it) {
  if (spares.size() == kMaxSpareTables || it->second.blocks.capacity() > kMaxSpareTableBlocks) {
    tables.erase(it);
    return;
  }
  auto node = tables.extract(it);
  node.mapped().clear();
  spares.push_back(std::move(node));
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
