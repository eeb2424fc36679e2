// Which MAC a tier key uses (issue 31, C2: "libsodium's keyed BLAKE2b or
// OpenSSL's HMAC-SHA256 — measure both, keep the faster"): the MAC of one
// record (its 4 KiB header region beside the payload) per page size, through
// kvtier's TierKey (HMAC-SHA256, OpenSSL) and through libsodium's keyed
// BLAKE2b-256 (crypto_generichash), keyed once and copied per record as
// TierKey does. bytes_per_second is the figure to compare.
#include <benchmark/benchmark.h>
#include <sodium.h>

#include <array>
#include <cstddef>
#include <vector>

#include "kvtier/tiers/tier_key.hpp"

namespace {

constexpr std::size_t kHeader = 4096;

std::vector<std::byte> record(std::size_t page_bytes) {
  std::vector<std::byte> bytes(kHeader + page_bytes);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 131 + 7);
  return bytes;
}

void HmacSha256OpenSsl(benchmark::State& state) {
  const auto bytes = record(static_cast<std::size_t>(state.range(0)));
  const kvtier::tiers::TierKey key = kvtier::tiers::TierKey::from_secret(std::vector<std::byte>(32, std::byte{7}));
  const std::span<const std::byte> all(bytes);
  for (auto _ : state) benchmark::DoNotOptimize(key.mac(all.first(kHeader), all.subspan(kHeader)));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes.size()));
}

void Blake2bLibsodium(benchmark::State& state) {
  if (sodium_init() < 0) {
    state.SkipWithError("libsodium did not initialize");
    return;
  }
  const auto bytes = record(static_cast<std::size_t>(state.range(0)));
  const std::array<unsigned char, 32> secret{7};
  crypto_generichash_state keyed;
  crypto_generichash_init(&keyed, secret.data(), secret.size(), 32);
  std::array<unsigned char, 32> out{};
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  for (auto _ : state) {
    crypto_generichash_state copy = keyed;
    crypto_generichash_update(&copy, data, kHeader);
    crypto_generichash_update(&copy, data + kHeader, bytes.size() - kHeader);
    crypto_generichash_final(&copy, out.data(), out.size());
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes.size()));
}

BENCHMARK(HmacSha256OpenSsl)->ArgName("page_bytes")->Arg(16384)->Arg(65536)->Arg(262144)->Arg(2097152);
BENCHMARK(Blake2bLibsodium)->ArgName("page_bytes")->Arg(16384)->Arg(65536)->Arg(262144)->Arg(2097152);

}  // namespace
