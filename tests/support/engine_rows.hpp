#pragma once
// An engine's rows for the row-service tests (tiers/rows): page-aligned
// memory, rows filled with a seed's bytes, vLLM-shaped keys, jobs.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "kvtier/tiers/rows/row_service.hpp"

namespace kvtier::testing {

using tiers::rows::RowJob;
using tiers::rows::RowJobKind;
using tiers::rows::RowJobResult;
using tiers::rows::RowRegion;
using tiers::rows::RowService;

constexpr std::size_t kRowBytes = 2 * 4096;
constexpr std::size_t kRows = 16;

struct Rows {
  std::unique_ptr<std::byte, decltype(&std::free)> memory{
      static_cast<std::byte*>(std::aligned_alloc(4096, kRows* kRowBytes)), &std::free};
  RowRegion region() const { return RowRegion{.base = memory.get(), .count = kRows, .row_bytes = kRowBytes}; }
  std::span<std::byte> row(std::size_t i) const { return {memory.get() + i * kRowBytes, kRowBytes}; }
  void fill(std::size_t i, int seed) const {
    for (std::size_t b = 0; b < kRowBytes; ++b) row(i)[b] = static_cast<std::byte>((seed * 31 + b * 7) & 0xFF);
  }
  bool holds(std::size_t i, int seed) const {
    for (std::size_t b = 0; b < kRowBytes; ++b) {
      if (row(i)[b] != static_cast<std::byte>((seed * 31 + b * 7) & 0xFF)) return false;
    }
    return true;
  }
};

inline std::vector<std::byte> key(int n) {  // a vLLM offload key: 32 bytes of hash + a 4-byte group
  std::vector<std::byte> k(36, std::byte{0});
  std::memcpy(k.data(), &n, sizeof(n));
  k[35] = std::byte{1};
  return k;
}

inline RowJob job(std::uint64_t id, RowJobKind kind, std::vector<int> keys, std::vector<std::int64_t> rows) {
  RowJob j{.id = id, .kind = kind};
  for (int n : keys) j.keys.push_back(key(n));
  j.rows = std::move(rows);
  return j;
}

/// Submits `j`, waits for it and returns its result (reported once).
inline RowJobResult run(RowService& service, RowJob j) {
  const std::uint64_t id = j.id;
  service.submit(std::move(j));
  service.drain();
  std::vector<RowJobResult> done = service.take_finished();
  EXPECT_EQ(done.size(), 1U);
  if (done.empty()) return RowJobResult{};
  EXPECT_EQ(done[0].id, id);
  return done[0];
}

}  // namespace kvtier::testing
