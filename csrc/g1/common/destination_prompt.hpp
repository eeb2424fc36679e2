#pragma once
// What a destination reservation (disaggregated decode side) takes from its sequence.
#include <cstddef>
#include <optional>
#include <vector>

#include "kvtier/core/active_sequence.hpp"

namespace kvtier::g1::detail {

/// The prompt blocks of a sequence whose KV arrives by transfer, with what
/// their Stored events need.
struct DestinationPrompt {
  std::vector<UniqueBlock> blocks;           // the prompt's blocks; all but a partial tail are full
  std::size_t full = 0;                      // leading full blocks
  std::vector<LocalBlockHash> local_hashes;  // aligned with the full blocks; empty without prefix caching
  std::optional<BlockTokenIds> token_ids;    // aligned with the full blocks where the sequence emits them

  /// ContractError when the sequence's block size is not `block_size`.
  static DestinationPrompt of(const ActiveSequence& sequence, std::uint32_t block_size);
  /// Full block i's parent: the block before it (none for the first).
  std::optional<SequenceHash> parent(std::size_t i) const {
    return i == 0 ? std::nullopt : std::optional<SequenceHash>(blocks[i - 1].hash());
  }
  LocalBlockHash local(std::size_t i) const { return local_hashes.empty() ? LocalBlockHash(0) : local_hashes[i]; }
};

}  // namespace kvtier::g1::detail
