#pragma once
// The contract checks (and their messages) both G1 backends apply alike.
#include <span>
#include <string>

#include "kvtier/core/move_block.hpp"
#include "kvtier/g1/g1_types.hpp"

namespace kvtier::g1::detail {

std::string unknown_owner(OwnerId owner);

/// A Use's shape past its PLHs (the facade checks those first, G1Manager::
/// validate_use): only the last block may be partial (`partial_inside`: one
/// before it is), local hashes and token ids align with the `full` blocks,
/// the parent is full. The caller counts in the one walk over the blocks.
void check_use_shape(const UseSignal& signal, std::size_t full, bool partial_inside);
/// A partial block has one owner, once: a second holder would share its page
/// and free it under the first (issue #13).
void check_partial_unallocated(const UniqueBlock& block, bool allocated);
/// A Deref lists the owner's last blocks, leaf first.
void check_deref_lists_tail(OwnerId owner, std::span<const UniqueBlock> owned, const DerefSignal& signal);
/// A Promote names the owner's last block, which is partial.
void check_promote_target(OwnerId owner, std::span<const UniqueBlock> owned, const PromoteSignal& signal, bool live);
/// A destination's owner holds no blocks yet.
void check_destination_owner(OwnerId owner, bool owns_blocks);
/// `page` may take one more pin (a 16-bit count on KVBM).
void check_pin_room(std::uint32_t page, std::uint32_t pins, std::uint32_t max_pins);

}  // namespace kvtier::g1::detail
