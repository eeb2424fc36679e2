#pragma once
// Loading and storing one KV element of any supported dtype as float, shared
// by the CPU references and the CUDA kernels. Conversions round to nearest
// even; fp8 is e4m3fn (bias 7, no infinities) and saturates at +-448 like
// CUDA's __NV_SATFINITE conversions.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kvtier/core/host_device.hpp"
#include "kvtier/core/kv_layout.hpp"

namespace kvtier {

KVTIER_HOST_DEVICE inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
KVTIER_HOST_DEVICE inline float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

KVTIER_HOST_DEVICE inline std::uint16_t float_to_bf16(float f) {
  const std::uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFFU) > 0x7F800000U) return 0x7FC0;  // NaN
  return static_cast<std::uint16_t>((u + 0x7FFFU + ((u >> 16) & 1U)) >> 16);
}
KVTIER_HOST_DEVICE inline float bf16_to_float(std::uint16_t h) { return bits_float(std::uint32_t{h} << 16); }

KVTIER_HOST_DEVICE inline std::uint16_t float_to_fp16(float f) {
  const std::uint32_t x = float_bits(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000U);
  const std::uint32_t a = x & 0x7FFFFFFFU;
  if (a > 0x7F800000U) return static_cast<std::uint16_t>(sign | 0x7E00U);   // NaN
  if (a >= 0x477FF000U) return static_cast<std::uint16_t>(sign | 0x7C00U);  // rounds to infinity
  if (a < 0x38800000U) {                                                    // subnormal half: units of 2^-24
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(nearbyintf(bits_float(a) * 16777216.0f)));
  }
  const std::uint32_t mantissa = a & 0x7FFFFFU;
  std::uint32_t h = (((a >> 23) - 112U) << 10) | (mantissa >> 13);
  const std::uint32_t rest = mantissa & 0x1FFFU;
  if (rest > 0x1000U || (rest == 0x1000U && (h & 1U))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}
KVTIER_HOST_DEVICE inline float fp16_to_float(std::uint16_t h) {
  const std::uint32_t sign = (std::uint32_t{h} & 0x8000U) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1FU;
  const std::uint32_t mantissa = h & 0x3FFU;
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return bits_float(sign | 0x7F800000U | (mantissa << 13));
  return bits_float(sign | ((exponent + 112U) << 23) | (mantissa << 13));
}

KVTIER_HOST_DEVICE inline std::uint8_t float_to_fp8_e4m3(float f) {
  const std::uint32_t x = float_bits(f);
  const auto sign = static_cast<std::uint8_t>((x >> 24) & 0x80U);
  const std::uint32_t a = x & 0x7FFFFFFFU;
  if (a > 0x7F800000U) return static_cast<std::uint8_t>(sign | 0x7FU);  // NaN
  const float magnitude = bits_float(a);
  if (magnitude >= 448.0f) return static_cast<std::uint8_t>(sign | 0x7EU);  // saturate
  if (magnitude < 0.015625f) {                                              // subnormal: units of 2^-9
    return static_cast<std::uint8_t>(sign | static_cast<std::uint8_t>(nearbyintf(magnitude * 512.0f)));
  }
  const std::uint32_t mantissa = a & 0x7FFFFFU;
  std::uint32_t e = (((a >> 23) - 120U) << 3) | (mantissa >> 20);
  const std::uint32_t rest = mantissa & 0xFFFFFU;
  if (rest > 0x80000U || (rest == 0x80000U && (e & 1U))) ++e;
  if (e > 0x7EU) e = 0x7EU;
  return static_cast<std::uint8_t>(sign | e);
}
KVTIER_HOST_DEVICE inline float fp8_e4m3_to_float(std::uint8_t b) {
  const std::uint32_t exponent = (b >> 3) & 0xFU;
  const std::uint32_t mantissa = b & 0x7U;
  float magnitude;
  if (exponent == 0xF && mantissa == 0x7) {
    magnitude = bits_float(0x7FC00000U);
  } else if (exponent == 0) {
    magnitude = static_cast<float>(mantissa) * (1.0f / 512.0f);
  } else {
    magnitude = bits_float(((exponent + 120U) << 23) | (mantissa << 20));
  }
  return (b & 0x80U) ? -magnitude : magnitude;
}

/// FP4 e2m1 (NVFP4's element): the nearest of 0, 0.5, 1, 1.5, 2, 3, 4, 6 with
/// its sign in bit 3, ties to even, saturating at 6.
KVTIER_HOST_DEVICE inline std::uint8_t float_to_fp4_e2m1(float f) {
  const std::uint8_t sign = f < 0.0f ? 0x8U : 0x0U;
  const float a = fabsf(f);
  if (!(a == a)) return static_cast<std::uint8_t>(sign | 0x7U);  // NaN saturates (e2m1 has no NaN)
  // Midpoints between neighbours; at an exact midpoint the even code (lower bit 0) wins.
  constexpr float kMid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  std::uint8_t code = 0;
  while (code < 7 && (a > kMid[code] || (a == kMid[code] && (code & 1U) != 0))) ++code;
  return static_cast<std::uint8_t>(sign | code);
}
KVTIER_HOST_DEVICE inline float fp4_e2m1_to_float(std::uint8_t nibble) {
  constexpr float kValues[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float magnitude = kValues[nibble & 0x7U];
  return (nibble & 0x8U) ? -magnitude : magnitude;
}

/// Symmetric int8: round to nearest (ties away from zero), clamped to +-127.
KVTIER_HOST_DEVICE inline std::int8_t float_to_int8(float f) {
  if (!(f == f)) return 0;
  const float r = roundf(f);
  return static_cast<std::int8_t>(r > 127.0f ? 127.0f : (r < -127.0f ? -127.0f : r));
}

/// Reads the element at `p` as float.
KVTIER_HOST_DEVICE inline float load_kv_element(const std::byte* p, KvDtype dtype) {
  switch (dtype) {
    case KvDtype::Fp32: {
      float f;
      std::memcpy(&f, p, sizeof f);
      return f;
    }
    case KvDtype::Fp8:
      return fp8_e4m3_to_float(static_cast<std::uint8_t>(*p));
    default: {
      std::uint16_t h;
      std::memcpy(&h, p, sizeof h);
      return dtype == KvDtype::Bf16 ? bf16_to_float(h) : fp16_to_float(h);
    }
  }
}

/// Writes `value` converted to `dtype` at `p`.
KVTIER_HOST_DEVICE inline void store_kv_element(std::byte* p, KvDtype dtype, float value) {
  switch (dtype) {
    case KvDtype::Fp32:
      std::memcpy(p, &value, sizeof value);
      return;
    case KvDtype::Fp8:
      *p = static_cast<std::byte>(float_to_fp8_e4m3(value));
      return;
    default: {
      const std::uint16_t h = dtype == KvDtype::Bf16 ? float_to_bf16(value) : float_to_fp16(value);
      std::memcpy(p, &h, sizeof h);
    }
  }
}

/// The value `value` becomes once stored as `dtype` (what a reader sees).
KVTIER_HOST_DEVICE inline float round_to_kv_dtype(float value, KvDtype dtype) {
  std::byte buffer[4];
  store_kv_element(buffer, dtype, value);
  return load_kv_element(buffer, dtype);
}

}  // namespace kvtier
