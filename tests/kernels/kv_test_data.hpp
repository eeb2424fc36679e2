#pragma once
// Deterministic K/V/Q data and dense attention for the kernel tests.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kvtier/core/kv_element.hpp"

namespace kvtier::kernels::testing {

/// A value in [-1, 1) determined by its coordinates: the K or V a model would
/// compute for `token` at `position` (so equal prefixes have equal KV).
inline float kv_value(std::uint64_t token, std::uint64_t position, std::uint32_t head, std::uint32_t dim,
                      std::uint32_t part) {
  std::uint64_t z =
      token * 0x9E3779B97F4A7C15ULL ^ (position << 20) ^ (std::uint64_t{head} << 8) ^ dim ^ (std::uint64_t{part} << 60);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return static_cast<float>((z ^ (z >> 31)) % 2000) / 1000.0f - 1.0f;
}

/// [tokens, heads, dim] K (part 0) or V (part 1) of a token list.
inline std::vector<float> kv_rows(const std::vector<std::uint32_t>& tokens, std::size_t first, std::size_t end,
                                  std::uint32_t heads, std::uint32_t dim, std::uint32_t part) {
  std::vector<float> rows;
  for (std::size_t t = first; t < end; ++t)
    for (std::uint32_t h = 0; h < heads; ++h)
      for (std::uint32_t d = 0; d < dim; ++d) rows.push_back(kv_value(tokens[t], t, h, d, part));
  return rows;
}

/// softmax(scale * q K^T) V over a plain token list, K and V rounded to the cache dtype.
inline std::vector<float> dense_attention(const std::vector<float>& query, std::uint32_t q_heads,
                                          const std::vector<float>& keys, const std::vector<float>& values,
                                          std::size_t length, std::uint32_t kv_heads, std::uint32_t dim, KvDtype dtype,
                                          float scale) {
  std::vector<float> out(std::size_t{q_heads} * dim, 0.0f);
  const std::uint32_t group = q_heads / kv_heads;
  for (std::uint32_t qh = 0; qh < q_heads; ++qh) {
    const std::uint32_t kvh = qh / group;
    std::vector<double> p(length);
    double max_score = -1e300;
    for (std::size_t t = 0; t < length; ++t) {
      double dot = 0;
      for (std::uint32_t d = 0; d < dim; ++d) {
        dot += double(query[qh * dim + d]) * round_to_kv_dtype(keys[(t * kv_heads + kvh) * dim + d], dtype);
      }
      p[t] = dot * scale;
      max_score = std::max(max_score, p[t]);
    }
    double total = 0;
    for (double& x : p) total += (x = std::exp(x - max_score));
    for (std::uint32_t d = 0; d < dim; ++d) {
      double acc = 0;
      for (std::size_t t = 0; t < length; ++t)
        acc += p[t] * round_to_kv_dtype(values[(t * kv_heads + kvh) * dim + d], dtype);
      out[qh * dim + d] = static_cast<float>(acc / total);
    }
  }
  return out;
}

inline std::vector<float> query_for(std::uint64_t seed, std::uint32_t q_heads, std::uint32_t dim) {
  std::vector<float> q;
  for (std::uint32_t h = 0; h < q_heads; ++h)
    for (std::uint32_t d = 0; d < dim; ++d) q.push_back(kv_value(seed, 999999, h, d, 2));
  return q;
}

}  // namespace kvtier::kernels::testing
