#include "kvtier/core/kv_element.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace kvtier {
namespace {

TEST(KvElement, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16(-2.0f), 0xC000);
  EXPECT_EQ(float_to_bf16(bits_float(0x3F808000U)), 0x3F80);  // tie to even (down)
  EXPECT_EQ(float_to_bf16(bits_float(0x3F818000U)), 0x3F82);  // tie to even (up)
  EXPECT_EQ(float_to_bf16(bits_float(0x3F808001U)), 0x3F81);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(KvElement, Fp16MatchesKnownEncodings) {
  EXPECT_EQ(float_to_fp16(1.0f), 0x3C00);
  EXPECT_EQ(float_to_fp16(-2.5f), 0xC100);
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7C00);            // rounds to infinity
  EXPECT_EQ(float_to_fp16(5.9604645e-8f), 0x0001);       // smallest subnormal
  EXPECT_EQ(float_to_fp16(6.1035156e-5f), 0x0400);       // smallest normal
  EXPECT_EQ(float_to_fp16(1.0f + 1.0f / 2048), 0x3C00);  // tie to even
  EXPECT_EQ(fp16_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(fp16_to_float(0x0001), 5.9604645e-8f);
  EXPECT_TRUE(std::isinf(fp16_to_float(0xFC00)));
}

TEST(KvElement, Fp8E4m3MatchesKnownEncodingsAndSaturates) {
  EXPECT_EQ(float_to_fp8_e4m3(1.0f), 0x38);
  EXPECT_EQ(float_to_fp8_e4m3(-1.5f), 0xBC);
  EXPECT_EQ(float_to_fp8_e4m3(448.0f), 0x7E);
  EXPECT_EQ(float_to_fp8_e4m3(1.0e6f), 0x7E);  // saturating
  EXPECT_EQ(float_to_fp8_e4m3(-1.0e6f), 0xFE);
  EXPECT_EQ(float_to_fp8_e4m3(0.001953125f), 0x01);  // 2^-9, smallest subnormal
  EXPECT_EQ(float_to_fp8_e4m3(0.015625f), 0x08);     // 2^-6, smallest normal
  EXPECT_EQ(fp8_e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0x01), 0.001953125f);
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0x7F)));
}

// Every representable value round-trips, and every float lands on a nearest neighbour.
TEST(KvElement, EveryCodeRoundTripsAndRoundingPicksANearestCode) {
  for (std::uint32_t code = 0; code < 256; ++code) {
    const float f = fp8_e4m3_to_float(static_cast<std::uint8_t>(code));
    if (!std::isnan(f) && f != 0.0f) {
      EXPECT_EQ(float_to_fp8_e4m3(f), code);
    }
  }
  for (std::uint32_t code = 0; code < 65536; ++code) {
    const float f = fp16_to_float(static_cast<std::uint16_t>(code));
    if (!std::isnan(f) && f != 0.0f) {
      ASSERT_EQ(float_to_fp16(f), code);
    }
  }
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-300.0f, 300.0f);
  for (int i = 0; i < 20000; ++i) {
    const float f = dist(rng);
    for (KvDtype dtype : {KvDtype::Bf16, KvDtype::Fp16, KvDtype::Fp8}) {
      const float r = round_to_kv_dtype(f, dtype);
      const float tolerance = dtype == KvDtype::Fp8 ? 1.0f / 16 : dtype == KvDtype::Bf16 ? 1.0f / 256 : 1.0f / 2048;
      ASSERT_LE(std::fabs(r - f), std::fabs(f) * tolerance + 1e-3f) << f << " " << dtype_name(dtype);
    }
  }
  EXPECT_EQ(round_to_kv_dtype(3.14159f, KvDtype::Fp32), 3.14159f);
}

}  // namespace
}  // namespace kvtier
