#pragma once
// Prompts for the KV cache group tests: token lists and their chained block
// hashes at a manager's hash unit (the same tokens, the same hashes).
#include <cstdint>
#include <span>
#include <vector>

#include "kvtier/core/strong_id.hpp"

namespace kvtier::g1::test {

/// Chained hashes of every full `unit`-token block of `tokens`.
inline std::vector<SequenceHash> block_hashes(std::span<const std::uint32_t> tokens, std::size_t unit) {
  std::vector<SequenceHash> hashes;
  std::uint64_t chain = 0x6A09E667F3BCC909ULL;
  for (std::size_t end = unit; end <= tokens.size(); end += unit) {
    for (std::size_t i = end - unit; i < end; ++i) chain = (chain ^ tokens[i]) * 0x100000001B3ULL;
    hashes.emplace_back(chain);
  }
  return hashes;
}

/// `count` tokens: `shared` of them from `prefix_seed`'s stream, the rest from `tail_seed`'s.
inline std::vector<std::uint32_t> prompt(std::size_t count, std::size_t shared, std::uint32_t prefix_seed,
                                         std::uint32_t tail_seed) {
  std::vector<std::uint32_t> tokens(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint32_t seed = i < shared ? prefix_seed : tail_seed;
    tokens[i] = seed * 1000003U + static_cast<std::uint32_t>(i) * 7919U + 1U;
  }
  return tokens;
}

}  // namespace kvtier::g1::test
