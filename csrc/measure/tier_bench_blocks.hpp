#pragma once
// What the benches of the tiers below G2 (`kvtier bench disk`, `bench
// shared`) share: a page layout of a given size, numbered blocks, medians
// and stopwatch seconds. Private to csrc/measure.
#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/kv_layout.hpp"
#include "kvtier/g1/offload_tier.hpp"
#include "kvtier/tiers/tier_key.hpp"

namespace kvtier::measure::detail {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

/// Pages of one layer x one KV head x 16 tokens of bf16: head_dim sets the
/// size. ConfigError (naming `bench`) unless a multiple of 64 bytes.
inline KvLayout tier_bench_layout(std::size_t page_bytes, const char* bench) {
  if (page_bytes == 0 || page_bytes % 64 != 0) {
    throw ConfigError(std::string("a ") + bench + " bench page size must be a multiple of 64 bytes, not " +
                      std::to_string(page_bytes));
  }
  const KvGeometry g{.layers = 1,
                     .kv_heads = 1,
                     .head_dim = static_cast<std::uint32_t>(page_bytes / 64),
                     .dtype = KvDtype::Bf16,
                     .tokens_per_block = 16};
  return KvLayout(g, PageLayout::PageMajor, 1);
}

/// A tier key for the keyed half of a bench (a fixed secret: only its cost
/// is measured); none when this build has no OpenSSL.
inline std::optional<tiers::TierKey> tier_bench_key() {
  if (!tiers::tier_keys_available()) return std::nullopt;
  return tiers::TierKey::from_secret(std::vector<std::byte>(32, std::byte{0x6b}));
}

inline double gbps(double bytes, double seconds) { return seconds > 0.0 ? bytes / seconds / 1e9 : 0.0; }

/// Block n: a root block at position n.
inline g1::TieredBlock tier_bench_block(std::uint64_t n) {
  const SequenceHash hash(n * 7919 + 1);
  return g1::TieredBlock{.plh = PositionalLineageHash(hash, std::nullopt, n),
                         .hash = hash,
                         .parent = std::nullopt,
                         .local = LocalBlockHash(n),
                         .token_ids = std::nullopt};
}

}  // namespace kvtier::measure::detail
