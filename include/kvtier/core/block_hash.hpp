#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kvtier/core/strong_id.hpp"

namespace kvtier {

using TokenId = std::uint32_t;
/// Token ids of consecutive full blocks, one list per block.
using BlockTokenIds = std::vector<std::vector<TokenId>>;

/// XXH3-64 seed Dynamo uses for every KV block hash.
inline constexpr std::uint64_t kKvBlockHashSeed = 1337;

/// XXH3-64 (seed 1337) over the tokens as consecutive little-endian u32.
LocalBlockHash compute_local_block_hash(std::span<const TokenId> tokens);

/// Block 0: its local hash. Block i: XXH3-64 (seed 1337) over the 16 bytes
/// little-endian [parent sequence hash, local hash].
SequenceHash compute_sequence_hash(std::optional<SequenceHash> parent, LocalBlockHash local);

/// Sequence hashes of every full block of `tokens` (a trailing partial block is ignored).
struct BlockHashes {
  LocalBlockHash local;
  SequenceHash sequence;
};
std::size_t hash_full_blocks(std::span<const TokenId> tokens, std::size_t block_size,
                             std::optional<SequenceHash> parent, std::span<BlockHashes> out);

}  // namespace kvtier
