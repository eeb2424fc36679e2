#include "g1/common/contract_checks.hpp"

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::g1::detail {
namespace {

std::string owner_text(OwnerId owner) { return std::to_string(owner.value()); }

}  // namespace

std::string unknown_owner(OwnerId owner) { return "unknown owner " + owner_text(owner); }

void check_use_shape(const UseSignal& signal, std::size_t full, bool partial_inside) {
  KVTIER_EXPECTS(!partial_inside, "only the last block of a Use may be partial");
  KVTIER_EXPECTS(signal.local_hashes.empty() || signal.local_hashes.size() == full,
                 "local hashes must be empty or align with full blocks");
  KVTIER_EXPECTS(!signal.token_ids || signal.token_ids->size() == full, "token ids must align with full blocks");
  KVTIER_EXPECTS(!signal.parent || signal.parent->is_full(), "the parent of a Use must be a full block");
}

void check_partial_unallocated(const UniqueBlock& block, bool allocated) {
  KVTIER_EXPECTS(!block.is_partial() || !allocated,
                 "partial block " + block.uuid().to_string() + " is already allocated");
}

void check_deref_lists_tail(OwnerId owner, std::span<const UniqueBlock> owned, const DerefSignal& signal) {
  const std::size_t n = owned.size();
  KVTIER_EXPECTS(signal.blocks.size() <= n, "Deref lists more blocks than owner " + owner_text(owner) + " owns");
  for (std::size_t i = 0; i < signal.blocks.size(); ++i) {
    KVTIER_EXPECTS(signal.blocks[i] == owned[n - 1 - i], "Deref must list owner " + owner_text(owner) +
                                                             "'s last blocks leaf first; block " +
                                                             signal.blocks[i].to_string() + " is out of order");
  }
}

void check_promote_target(OwnerId owner, std::span<const UniqueBlock> owned, const PromoteSignal& signal, bool live) {
  KVTIER_EXPECTS(
      live && !owned.empty() && owned.back().is_partial() && owned.back().uuid() == signal.uuid,
      "partial block not found: " + signal.uuid.to_string() + " is not owner " + owner_text(owner) + "'s last block");
}

void check_destination_owner(OwnerId owner, bool owns_blocks) {
  KVTIER_EXPECTS(!owns_blocks, "destination owner " + owner_text(owner) + " already owns blocks");
}

void check_pin_room(std::uint32_t page, std::uint32_t pins, std::uint32_t max_pins) {
  KVTIER_EXPECTS(pins < max_pins, "too many reservations pin page " + std::to_string(page));
}

}  // namespace kvtier::g1::detail
