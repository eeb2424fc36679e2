#pragma once
// What the tests of the tiers below G2 store: a small page layout, numbered
// blocks with their token ids, a page of bytes each block alone has, and a
// tier key made from one repeated byte.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvtier/core/kv_layout.hpp"
#include "kvtier/g1/offload_tier.hpp"
#include "kvtier/tiers/tier_key.hpp"

namespace kvtier::testing {

/// 2 layers x 2 KV heads x `head_dim` of bf16, 16 tokens a block: 4 KiB pages at head_dim 16.
inline KvLayout tier_test_layout(std::uint32_t layers = 2, std::uint32_t heads = 2, std::uint32_t head_dim = 16) {
  return KvLayout(
      KvGeometry{
          .layers = layers, .kv_heads = heads, .head_dim = head_dim, .dtype = KvDtype::Bf16, .tokens_per_block = 16},
      PageLayout::PageMajor, 8);
}

/// Block n (its PLH's high half is `family`: tests keep their blocks apart), 16 token ids.
inline g1::TieredBlock tier_test_block(std::uint64_t n, std::uint64_t family) {
  return g1::TieredBlock{.plh = PositionalLineageHash::from_raw(family, n),
                         .hash = SequenceHash(n * 100),
                         .parent = n > 1 ? std::optional<SequenceHash>((n - 1) * 100) : std::nullopt,
                         .local = LocalBlockHash(n),
                         .token_ids = std::vector<TokenId>(16, static_cast<TokenId>(n))};
}

/// The bytes of block n's page.
inline std::vector<std::byte> tier_test_page(std::uint64_t n, std::size_t bytes) {
  std::vector<std::byte> page(bytes);
  for (std::size_t i = 0; i < bytes; ++i) page[i] = static_cast<std::byte>((n * 37 + i * 11) & 0xFF);
  return page;
}

inline tiers::TierKey tier_test_key(char fill) {
  return tiers::TierKey::from_secret(std::vector<std::byte>(32, static_cast<std::byte>(fill)));
}

}  // namespace kvtier::testing
