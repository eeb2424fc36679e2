#include "kvtier/core/block_hash.hpp"

#include <xxhash.h>

#include <array>
#include <bit>
#include <cstring>
#include <vector>

namespace kvtier {
namespace {

void store_le64(std::uint64_t value, unsigned char* out) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(value >> (8 * i));
}

}  // namespace

LocalBlockHash compute_local_block_hash(std::span<const TokenId> tokens) {
  if constexpr (std::endian::native == std::endian::little) {
    return LocalBlockHash(XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), kKvBlockHashSeed));
  } else {
    std::vector<unsigned char> bytes(tokens.size() * 4);
    for (std::size_t i = 0; i < tokens.size(); ++i)
      for (int b = 0; b < 4; ++b) bytes[4 * i + b] = static_cast<unsigned char>(tokens[i] >> (8 * b));
    return LocalBlockHash(XXH3_64bits_withSeed(bytes.data(), bytes.size(), kKvBlockHashSeed));
  }
}

SequenceHash compute_sequence_hash(std::optional<SequenceHash> parent, LocalBlockHash local) {
  if (!parent) return SequenceHash(local.value());
  std::array<unsigned char, 16> bytes{};
  store_le64(parent->value(), bytes.data());
  store_le64(local.value(), bytes.data() + 8);
  return SequenceHash(XXH3_64bits_withSeed(bytes.data(), bytes.size(), kKvBlockHashSeed));
}

std::size_t hash_full_blocks(std::span<const TokenId> tokens, std::size_t block_size,
                             std::optional<SequenceHash> parent, std::span<BlockHashes> out) {
  const std::size_t blocks = block_size == 0 ? 0 : std::min(tokens.size() / block_size, out.size());
  for (std::size_t i = 0; i < blocks; ++i) {
    const LocalBlockHash local = compute_local_block_hash(tokens.subspan(i * block_size, block_size));
    const SequenceHash sequence = compute_sequence_hash(parent, local);
    out[i] = {local, sequence};
    parent = sequence;
  }
  return blocks;
}

}  // namespace kvtier
