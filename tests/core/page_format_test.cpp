// Page formats: byte counts as vLLM's spec formulas give them, and where a
// row's data and scales sit.
#include "kvtier/core/page_format.hpp"

#include <gtest/gtest.h>

#include "kvtier/core/errors.hpp"

namespace kvtier {
namespace {

PageFormat key_value(KvQuant quant, std::uint32_t heads = 8, std::uint32_t dim = 128, std::uint32_t block = 16) {
  return PageFormat{.block_size = block, .kv_heads = heads, .head_dim = dim, .dtype = KvDtype::Bf16, .quant = quant};
}

TEST(PageFormat, KeyValueBytesFollowEachQuantization) {
  // 2 (K, V) x block x heads x per-row bytes.
  EXPECT_EQ(key_value(KvQuant::None).layer_page_bytes(), 2U * 16 * 8 * 128 * 2);
  EXPECT_EQ(key_value(KvQuant::Fp8PerTensor).layer_page_bytes(), 2U * 16 * 8 * 128);
  EXPECT_EQ(key_value(KvQuant::Fp8PerTokenHead).layer_page_bytes(), 2U * 16 * 8 * (128 + 4));
  EXPECT_EQ(key_value(KvQuant::Int8PerTokenHead).layer_page_bytes(), 2U * 16 * 8 * (128 + 4));
  // NVFP4 at head 128, 8 heads, block 16: 64 B of e2m1 + 8 e4m3 scales a row.
  EXPECT_EQ(key_value(KvQuant::Nvfp4).layer_page_bytes(), 2U * 16 * 8 * (64 + 8));
  EXPECT_EQ(key_value(KvQuant::Nvfp4).layer_page_bytes(), 18432U);
}

TEST(PageFormat, SeparateKeyAndValueHeadSizes) {
  PageFormat f = key_value(KvQuant::None, 4, 192);
  f.head_dim_v = 128;
  EXPECT_EQ(f.token_bytes(), 4U * (192 + 128) * 2);
  EXPECT_EQ(f.side_bytes(KvPart::Key), 16U * 4 * 192 * 2);
  EXPECT_EQ(f.row_offset(KvPart::Value, 1, 2), f.side_bytes(KvPart::Key) + (1U * 4 + 2) * 128 * 2);
}

TEST(PageFormat, MlaLatentBytes) {
  const PageFormat bf16{.content = PageContent::MlaLatent, .block_size = 64, .latent_dim = 512, .rope_dim = 64};
  EXPECT_EQ(bf16.token_bytes(), (512U + 64) * 2);  // one vector, no factor 2 for K and V
  PageFormat ds = bf16;
  ds.quant = KvQuant::Fp8DsMla;
  EXPECT_EQ(ds.token_bytes(), 656U);  // DeepSeek V3.2: 512 e4m3 + 4 fp32 + 64 bf16
  EXPECT_EQ(ds.layer_page_bytes(), 64U * 656);
  EXPECT_EQ(ds.latent_scale_offset(2), 2U * 656 + 512);
  EXPECT_EQ(ds.rope_offset(2), 2U * 656 + 528);
  PageFormat fp8 = bf16;
  fp8.quant = KvQuant::Fp8PerTensor;
  EXPECT_EQ(fp8.token_bytes(), 576U);
}

TEST(PageFormat, MambaStateIsItsBytesWhateverTheBlock) {
  const PageFormat f{
      .content = PageContent::MambaState, .block_size = 1024, .state_bytes = 9000, .conv_state_bytes = 1000};
  EXPECT_EQ(f.layer_page_bytes(), 9000U);
  EXPECT_EQ(f.token_bytes(), 0U);
}

TEST(PageFormat, PerTokenHeadScaleSitsRightAfterItsRow) {
  const PageFormat f = key_value(KvQuant::Fp8PerTokenHead, 2, 64, 4);
  EXPECT_EQ(f.row_offset(KvPart::Key, 1, 1), (1U * 2 + 1) * (64 + 4));
  EXPECT_EQ(f.row_scale_offset(KvPart::Key, 1, 1), f.row_offset(KvPart::Key, 1, 1) + 64);
  EXPECT_EQ(f.row_offset(KvPart::Value, 0, 0), 4U * 2 * 68);
}

TEST(PageFormat, Nvfp4SideHoldsAllDataThenAllScales) {
  const PageFormat f = key_value(KvQuant::Nvfp4, 2, 32, 4);
  EXPECT_EQ(f.row_offset(KvPart::Key, 3, 1), (3U * 2 + 1) * 16);
  EXPECT_EQ(f.row_scale_offset(KvPart::Key, 0, 0), 4U * 2 * 16);  // after the side's 8 rows of data
  EXPECT_EQ(f.row_scale_offset(KvPart::Key, 3, 1), 4U * 2 * 16 + 7 * 2);
  EXPECT_EQ(f.row_offset(KvPart::Value, 0, 0), 4U * 2 * (16 + 2));
}

TEST(PageFormat, PrecisionsThatShareNoBytesSafely) {
  EXPECT_TRUE(key_value(KvQuant::None).same_precision(key_value(KvQuant::None, 2, 64)));
  EXPECT_FALSE(key_value(KvQuant::None).same_precision(key_value(KvQuant::Nvfp4)));
  PageFormat fp32 = key_value(KvQuant::None);
  fp32.dtype = KvDtype::Fp32;
  EXPECT_FALSE(key_value(KvQuant::None).same_precision(fp32));
}

TEST(PageFormat, FingerprintNamesTheFormat) {
  EXPECT_EQ(key_value(KvQuant::Nvfp4).fingerprint(), key_value(KvQuant::Nvfp4).fingerprint());
  EXPECT_NE(key_value(KvQuant::Nvfp4).fingerprint(), key_value(KvQuant::Fp8PerTensor).fingerprint());
  EXPECT_NE(key_value(KvQuant::None, 8, 128, 16).fingerprint(), key_value(KvQuant::None, 8, 128, 32).fingerprint());
}

TEST(PageFormat, RefusesFormatsThatCannotBe) {
  EXPECT_THROW(validate_page_format(key_value(KvQuant::Nvfp4, 8, 72), "g0: "), ConfigError);
  EXPECT_THROW(validate_page_format(key_value(KvQuant::Fp8DsMla), "g0: "), ConfigError);
  const PageFormat mla{
      .content = PageContent::MlaLatent, .latent_dim = 500, .rope_dim = 64, .quant = KvQuant::Fp8DsMla};
  EXPECT_THROW(validate_page_format(mla, "g0: "), ConfigError);
  PageFormat nvfp4_mla = mla;
  nvfp4_mla.latent_dim = 512;
  nvfp4_mla.quant = KvQuant::Nvfp4;
  EXPECT_THROW(validate_page_format(nvfp4_mla, "g0: "), ConfigError);
  const PageFormat mamba{.content = PageContent::MambaState, .state_bytes = 10, .conv_state_bytes = 11};
  EXPECT_THROW(validate_page_format(mamba, "g0: "), ConfigError);
  EXPECT_NO_THROW(validate_page_format(key_value(KvQuant::Nvfp4), "g0: "));
  EXPECT_EQ(parse_kv_quant("fp8_per_token_head"), KvQuant::Fp8PerTokenHead);
  EXPECT_THROW(parse_kv_quant("fp4"), ConfigError);
}

}  // namespace
}  // namespace kvtier
