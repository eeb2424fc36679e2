#pragma once
// Sizes and counts that come from users (trace lines, options) are added and
// multiplied with a check: an overflow is an answer (nullopt), never a wrap.
#include <concepts>
#include <optional>

namespace kvtier {

template <std::unsigned_integral T>
constexpr std::optional<T> checked_add(T a, T b) noexcept {
  T sum{};
  if (__builtin_add_overflow(a, b, &sum)) return std::nullopt;
  return sum;
}

template <std::unsigned_integral T>
constexpr std::optional<T> checked_mul(T a, T b) noexcept {
  T product{};
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

/// a / b rounded up (b > 0; a + b - 1 must not wrap: sizes already checked).
template <std::unsigned_integral T>
constexpr T ceil_div(T a, T b) noexcept {
  return (a + b - 1) / b;
}

}  // namespace kvtier
