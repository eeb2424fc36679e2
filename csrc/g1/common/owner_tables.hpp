#pragma once
// The owners' block tables of a G1 backend, with spare tables for reuse.
#include <algorithm>
#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include "g1/common/contract_checks.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"
#include "kvtier/g1/g1_types.hpp"

namespace kvtier::g1::detail {

/// Every owner's table (a `Table` has at least `pages` and `blocks` columns,
/// `columns_aligned()` and a `clear()` that keeps capacity). Emptied tables are kept as spares for
/// later owners: a new owner's table then allocates nothing in steady state.
/// Bounded (a scheduler admits about as many owners as finish, so two
/// suffice); a table that held a long request is not kept — recycled, its
/// capacity would stay with every later short one (and one allocation per
/// 512+ blocks costs nothing).
template <class Table>
class OwnerTables {
 public:
  using Map = std::unordered_map<OwnerId, Table>;
  using iterator = typename Map::iterator;
  static constexpr std::size_t kMaxSpares = 2;
  static constexpr std::size_t kMaxSpareBlocks = 512;

  bool contains(OwnerId owner) const { return tables_.contains(owner); }
  std::size_t size() const noexcept { return tables_.size(); }
  /// The owner's table, or ContractError("unknown owner <id>").
  const Table& at(OwnerId owner) const { return find_known(owner)->second; }
  typename Map::const_iterator find_known(OwnerId owner) const {
    const auto it = tables_.find(owner);
    KVTIER_EXPECTS(it != tables_.end(), unknown_owner(owner));
    return it;
  }
  iterator find_known(OwnerId owner) {
    const auto it = tables_.find(owner);
    KVTIER_EXPECTS(it != tables_.end(), unknown_owner(owner));
    return it;
  }
  /// The owner's table or nullptr.
  Table* find(OwnerId owner) {
    const auto it = tables_.find(owner);
    return it == tables_.end() ? nullptr : &it->second;
  }
  /// The owner's table, made on first use from a spare one when there is one.
  Table& for_owner(OwnerId owner) {
    const auto it = tables_.find(owner);
    if (it != tables_.end()) return it->second;
    if (spares_.empty()) return tables_[owner];
    auto node = std::move(spares_.back());
    spares_.pop_back();
    node.key() = owner;
    return tables_.insert(std::move(node)).position->second;
  }
  /// Drops an emptied table, keeping it as a spare while there is room.
  void retire(iterator it) {
    if (spares_.size() == kMaxSpares || it->second.blocks.capacity() > kMaxSpareBlocks) {
      tables_.erase(it);
      return;
    }
    auto node = tables_.extract(it);
    node.mapped().clear();
    spares_.push_back(std::move(node));
  }
  /// The owners holding blocks, in id order.
  std::vector<OwnerId> owners() const {
    std::vector<OwnerId> out;
    out.reserve(tables_.size());
    for (const auto& entry : tables_) out.push_back(entry.first);
    std::sort(out.begin(), out.end());
    return out;
  }
  /// Bytes held by the tables and the spares (kept for reuse: still held).
  template <class TableBytes>
  std::size_t bytes(TableBytes table_bytes) const {
    std::size_t total = 0;
    for (const auto& entry : tables_) total += sizeof(OwnerId) + sizeof(Table) + table_bytes(entry.second);
    for (const auto& spare : spares_) total += sizeof(OwnerId) + sizeof(Table) + table_bytes(spare.mapped());
    return total;
  }
  /// Checks every table's shape — not empty, its columns of one length
  /// (`Table::columns_aligned`), its pages inside a pool of `capacity` — and
  /// calls `visit(who, table, i)` for each entry; InvariantError otherwise.
  template <class Visit>
  void audit(std::size_t capacity, Visit visit) const {
    for (const auto& [owner, owned] : tables_) {
      const std::string who = "owner " + std::to_string(owner.value());
      KVTIER_ASSERT(!owned.blocks.empty(), who + " keeps an empty table");
      KVTIER_ASSERT(owned.columns_aligned(), who + "'s table columns differ in length");
      for (std::size_t i = 0; i < owned.blocks.size(); ++i) {
        KVTIER_ASSERT(owned.pages[i].value() < capacity, who + " lists a page outside the pool");
        visit(who, owned, i);
      }
    }
  }
  auto begin() const { return tables_.begin(); }
  auto end() const { return tables_.end(); }

 private:
  Map tables_;
  std::vector<typename Map::node_type> spares_;
};

}  // namespace kvtier::g1::detail
