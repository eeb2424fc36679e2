// The CPU references of every page format: write then read back (exact for
// values the format holds, within the documented tolerance otherwise), and
// decode attention through block tables against plain float math for every
// span (full, sliding window, chunked local) and MLA — never reading the
// null page a window leaves behind.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <tuple>

#include "kernels/format_values.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/kernels/group_attention.hpp"
#include "kvtier/kernels/reference/write_group_kv.hpp"

namespace kvtier::kernels {
namespace {

using testing::Format;
using testing::kFormatBlock;
using testing::lossless_values;
using testing::page_format_cases;
using testing::random_values;
using testing::scale_unit;

constexpr std::uint32_t kBlock = kFormatBlock;
constexpr std::uint32_t kLayers = 2;
constexpr std::uint32_t kPages = 24;
constexpr std::uint64_t kPadding = 48;
constexpr float kTensorScale = 1.0f / 64;  // fp8 per tensor: values up to 7; nvfp4: the global scale

/// A slab of kPages group pages, each followed by kPadding bytes of 0xAB; page 0 is the null page, all 0xFF
/// (NaN in every format's data or scales), which attention must never read.
struct Slab {
  GroupPages pages;
  std::vector<std::byte> bytes;
  explicit Slab(const PageFormat& f) {
    pages = GroupPages{.format = f, .layers = kLayers, .capacity = kPages};
    pages.page_stride = pages.group_page_bytes() + kPadding;
    bytes.assign(pages.page_stride * kPages, std::byte{0xAB});
    std::memset(bytes.data(), 0xFF, pages.group_page_bytes());
  }
  bool padding_intact() const {
    for (std::uint32_t p = 0; p < kPages; ++p) {
      for (std::uint64_t i = pages.group_page_bytes(); i < pages.page_stride; ++i) {
        if (bytes[p * pages.page_stride + i] != std::byte{0xAB}) return false;
      }
    }
    return true;
  }
};

/// One token's values: K/V rows [heads, dim] and [heads, dim_v], or latent and RoPE.
struct TokenValues {
  std::vector<float> first;   // K, or the latent
  std::vector<float> second;  // V, or the RoPE part
};

TokenValues token_values(const PageFormat& f, std::mt19937& rng, bool lossless) {
  const auto make = [&](std::size_t n, std::uint32_t dim, KvQuant quant, KvDtype dtype) {
    return lossless ? lossless_values(quant, dtype, n, scale_unit(f, dim), rng, kTensorScale)
                    : random_values(n, rng, 1.5f);
  };
  if (f.content == PageContent::MlaLatent) {
    // fp8_ds_mla's RoPE part is bf16; the others store it as the latent.
    const bool ds = f.quant == KvQuant::Fp8DsMla;
    return {make(f.latent_dim, f.latent_dim, f.quant, f.dtype),
            make(f.rope_dim, f.rope_dim, ds ? KvQuant::None : f.quant, ds ? KvDtype::Bf16 : f.dtype)};
  }
  return {make(std::size_t{f.kv_heads} * f.head_dim, f.head_dim, f.quant, f.dtype),
          make(std::size_t{f.kv_heads} * f.head_dim_of(KvPart::Value), f.head_dim_of(KvPart::Value), f.quant, f.dtype)};
}

void write_token(Slab& slab, std::uint32_t layer, std::int64_t slot, const TokenValues& v) {
  const LayerScales scales{.key = kTensorScale, .value = kTensorScale};
  if (slab.pages.format.content == PageContent::MlaLatent) {
    reference::write_mla(slab.bytes.data(), slab.pages, layer, v.first.data(), v.second.data(), 1, &slot, scales);
  } else {
    reference::write_group_kv(slab.bytes.data(), slab.pages, layer, v.first.data(), v.second.data(), 1, &slot, scales);
  }
}

/// Reads a token back: the same shapes as token_values.
TokenValues read_token(const Slab& slab, std::uint32_t layer, std::int64_t slot) {
  const PageFormat& f = slab.pages.format;
  const std::byte* block =
      slab.bytes.data() + slab.pages.layer_block_offset(static_cast<std::uint32_t>(slot / kBlock), layer);
  const auto t = static_cast<std::uint32_t>(slot % kBlock);
  TokenValues out;
  if (f.content == PageContent::MlaLatent) {
    for (std::uint32_t i = 0; i < f.latent_dim; ++i) out.first.push_back(load_mla_latent(block, f, t, i, kTensorScale));
    for (std::uint32_t i = 0; i < f.rope_dim; ++i) out.second.push_back(load_mla_rope(block, f, t, i, kTensorScale));
    return out;
  }
  for (std::uint32_t h = 0; h < f.kv_heads; ++h) {
    for (std::uint32_t d = 0; d < f.head_dim; ++d)
      out.first.push_back(load_kv_value(block, f, KvPart::Key, t, h, d, kTensorScale));
  }
  for (std::uint32_t h = 0; h < f.kv_heads; ++h) {
    for (std::uint32_t d = 0; d < f.head_dim_of(KvPart::Value); ++d) {
      out.second.push_back(load_kv_value(block, f, KvPart::Value, t, h, d, kTensorScale));
    }
  }
  return out;
}

class GroupFormats : public ::testing::TestWithParam<Format> {};

TEST_P(GroupFormats, RepresentableValuesReadBackExactly) {
  Slab slab(GetParam().format);
  std::mt19937 rng(3);
  std::vector<std::pair<std::int64_t, TokenValues>> written;
  for (const std::int64_t slot : {4, 7, 13, 21, 50, 95}) {
    for (std::uint32_t layer = 0; layer < kLayers; ++layer) {
      const TokenValues v = token_values(slab.pages.format, rng, true);
      write_token(slab, layer, slot, v);
      if (layer == 1) written.emplace_back(slot, v);
    }
  }
  for (const auto& [slot, v] : written) {
    const TokenValues back = read_token(slab, 1, slot);
    EXPECT_EQ(back.first, v.first) << "slot " << slot;
    EXPECT_EQ(back.second, v.second) << "slot " << slot;
  }
  EXPECT_TRUE(slab.padding_intact());
}

TEST_P(GroupFormats, ReadBackStaysWithinTheFormatsTolerance) {
  Slab slab(GetParam().format);
  const PageFormat& f = slab.pages.format;
  std::mt19937 rng(5);
  for (const std::int64_t slot : {5, 9, 30, 77}) {
    const TokenValues v = token_values(f, rng, false);
    write_token(slab, 0, slot, v);
    const TokenValues back = read_token(slab, 0, slot);
    const auto check = [&](const std::vector<float>& in, const std::vector<float>& out, std::size_t row,
                           bool bf16_rope) {
      for (std::size_t first = 0; first < in.size(); first += row) {
        float amax = 0.0f;
        for (std::size_t i = first; i < first + row; ++i) amax = std::max(amax, std::fabs(in[i]));
        PageFormat bound_format = f;
        if (bf16_rope) bound_format = PageFormat{.dtype = KvDtype::Bf16};
        const float bound = quantization_bound(bound_format, amax, kTensorScale);
        for (std::size_t i = first; i < first + row; ++i) {
          EXPECT_LE(std::fabs(out[i] - in[i]), bound) << "value " << i << " of " << in[i];
        }
      }
    };
    if (f.content == PageContent::MlaLatent) {
      check(v.first, back.first, f.latent_dim, false);
      check(v.second, back.second, f.rope_dim, f.quant == KvQuant::Fp8DsMla);
    } else {
      check(v.first, back.first, f.head_dim, false);
      check(v.second, back.second, f.head_dim_of(KvPart::Value), false);
    }
  }
}

/// Dense attention on the values themselves: the tokens [first, length) of one sequence.
std::vector<float> dense_attention(const PageFormat& f, const std::vector<TokenValues>& tokens, std::uint32_t first,
                                   const float* q, std::uint32_t kv_head, float scale,
                                   std::optional<float> sink = std::nullopt) {
  const bool latent = f.content == PageContent::MlaLatent;
  const std::uint32_t out_width = latent ? f.latent_dim : f.head_dim_of(KvPart::Value);
  std::vector<double> weights;
  double max_score = -INFINITY;
  for (std::size_t t = first; t < tokens.size(); ++t) {
    double dot = 0.0;
    if (latent) {
      for (std::uint32_t i = 0; i < f.latent_dim; ++i) dot += double{q[i]} * tokens[t].first[i];
      for (std::uint32_t i = 0; i < f.rope_dim; ++i) dot += double{q[f.latent_dim + i]} * tokens[t].second[i];
    } else {
      for (std::uint32_t d = 0; d < f.head_dim; ++d) dot += double{q[d]} * tokens[t].first[kv_head * f.head_dim + d];
    }
    weights.push_back(dot * scale);
    max_score = std::max(max_score, weights.back());
  }
  // An attention sink: one more logit in the softmax, attending to nothing (gpt-oss).
  if (sink) max_score = std::max(max_score, double{*sink});
  double total = sink ? std::exp(*sink - max_score) : 0.0;
  for (double& w : weights) total += (w = std::exp(w - max_score));
  std::vector<float> out(out_width, 0.0f);
  for (std::uint32_t d = 0; d < out_width; ++d) {
    double acc = 0.0;
    for (std::size_t t = first; t < tokens.size(); ++t) {
      const float v = latent ? tokens[t].first[d] : tokens[t].second[kv_head * out_width + d];
      acc += weights[t - first] * v;
    }
    out[d] = static_cast<float>(acc / total);
  }
  return out;
}

struct Span {
  AttentionSpan span;
  std::uint32_t window;
};

void check_attention(const PageFormat& format, Span span, bool with_sinks = false) {
  Slab slab(format);
  const PageFormat& f = slab.pages.format;
  std::mt19937 rng(17);
  std::vector<std::int32_t> free_pages(kPages - 1);
  std::iota(free_pages.begin(), free_pages.end(), 1);  // page 0 is the null page
  std::shuffle(free_pages.begin(), free_pages.end(), rng);
  const std::vector<std::uint32_t> lengths{1, kBlock * 2, kBlock * 3 + 1, kBlock * 5 - 1};
  constexpr std::uint32_t kMaxBlocks = 5;
  const std::uint32_t q_heads = f.content == PageContent::MlaLatent ? 3 : f.kv_heads * 2;
  std::vector<std::int32_t> tables(lengths.size() * kMaxBlocks, 0);
  std::vector<std::vector<TokenValues>> tokens(lengths.size());
  std::size_t next = 0;
  for (std::size_t s = 0; s < lengths.size(); ++s) {
    const std::uint32_t first = first_attended_token(span.span, span.window, lengths[s]);
    for (std::uint32_t b = 0; b * kBlock < lengths[s]; ++b) {
      // Blocks before the attended span stay the null page, as the manager leaves them.
      if ((b + 1) * kBlock > first) tables[s * kMaxBlocks + b] = free_pages[next++];
    }
    for (std::uint32_t t = 0; t < lengths[s]; ++t) {
      tokens[s].push_back(token_values(f, rng, true));
      const std::int32_t page = tables[s * kMaxBlocks + t / kBlock];
      if (page == 0) continue;
      for (std::uint32_t layer = 0; layer < kLayers; ++layer) {
        // Layer 0 holds other values: reading layer 1 must not see them.
        write_token(slab, layer, std::int64_t{page} * kBlock + t % kBlock,
                    layer == 1 ? tokens[s][t] : token_values(f, rng, true));
      }
    }
  }
  const std::uint32_t in_width = query_width(f);
  const std::uint32_t out_width = output_width(f);
  const std::vector<float> query = random_values(lengths.size() * q_heads * in_width, rng, 0.05f);
  std::vector<std::int32_t> seq_lens(lengths.begin(), lengths.end());
  std::vector<float> out(lengths.size() * q_heads * out_width, -1.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(in_width));
  // Sinks around the scores' size, so they take a share of every softmax.
  const std::vector<float> sinks = random_values(q_heads, rng, 2.0f);
  const GroupAttentionArgs args{.query = query.data(),
                                .block_tables = tables.data(),
                                .seq_lens = seq_lens.data(),
                                .out = out.data(),
                                .seqs = static_cast<std::uint32_t>(lengths.size()),
                                .q_heads = q_heads,
                                .max_blocks = kMaxBlocks,
                                .layer = 1,
                                .scale = scale,
                                .span = span.span,
                                .window = span.window,
                                .scales = {.key = kTensorScale, .value = kTensorScale},
                                .sinks = with_sinks ? sinks.data() : nullptr};
  reference::group_attention_decode(slab.bytes.data(), slab.pages, args);
  for (std::size_t s = 0; s < lengths.size(); ++s) {
    for (std::uint32_t h = 0; h < q_heads; ++h) {
      const std::uint32_t kv_head = h / (q_heads / shared_kv_heads(f));
      const std::vector<float> want =
          dense_attention(f, tokens[s], first_attended_token(span.span, span.window, lengths[s]),
                          query.data() + (s * q_heads + h) * in_width, kv_head, scale,
                          with_sinks ? std::optional(sinks[h]) : std::nullopt);
      for (std::uint32_t d = 0; d < out_width; ++d) {
        const float got = out[(s * q_heads + h) * out_width + d];
        ASSERT_TRUE(std::isfinite(got)) << "sequence " << s << " read the null page";
        EXPECT_NEAR(got, want[d], 1e-4f * (1.0f + std::fabs(want[d]))) << "sequence " << s << " head " << h;
      }
    }
  }
}

TEST_P(GroupFormats, FullAttentionMatchesDenseMath) { check_attention(GetParam().format, {AttentionSpan::Full, 0}); }
TEST_P(GroupFormats, SlidingWindowReadsOnlyTheWindow) {
  check_attention(GetParam().format, {AttentionSpan::SlidingWindow, 6});
}
TEST_P(GroupFormats, AttentionSinksJoinTheSoftmax) {
  check_attention(GetParam().format, {AttentionSpan::SlidingWindow, 6}, true);
  check_attention(GetParam().format, {AttentionSpan::Full, 0}, true);
}

INSTANTIATE_TEST_SUITE_P(EveryFormat, GroupFormats, ::testing::ValuesIn(page_format_cases()),
                         [](const ::testing::TestParamInfo<Format>& param) { return param.param.name; });

// Chunked local attention has no MLA kind: the K/V formats only.
class KeyValueFormats : public ::testing::TestWithParam<Format> {};

TEST_P(KeyValueFormats, ChunkedLocalReadsOnlyTheChunk) {
  check_attention(GetParam().format, {AttentionSpan::ChunkedLocal, 8});
}

std::vector<Format> key_value_cases() {
  std::vector<Format> out;
  for (const Format& f : page_format_cases()) {
    if (f.format.content == PageContent::KeyValue) out.push_back(f);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(EveryFormat, KeyValueFormats, ::testing::ValuesIn(key_value_cases()),
                         [](const ::testing::TestParamInfo<Format>& param) { return param.param.name; });

TEST(GroupAttentionSpan, FirstAttendedTokenFollowsVllm) {
  // Sliding window W: the last W tokens, the query included.
  EXPECT_EQ(first_attended_token(AttentionSpan::SlidingWindow, 4, 3), 0U);
  EXPECT_EQ(first_attended_token(AttentionSpan::SlidingWindow, 4, 4), 0U);
  EXPECT_EQ(first_attended_token(AttentionSpan::SlidingWindow, 4, 6), 2U);
  // Chunk C: the query's chunk.
  EXPECT_EQ(first_attended_token(AttentionSpan::ChunkedLocal, 4, 4), 0U);
  EXPECT_EQ(first_attended_token(AttentionSpan::ChunkedLocal, 4, 5), 4U);
  EXPECT_EQ(first_attended_token(AttentionSpan::ChunkedLocal, 4, 12), 8U);
  EXPECT_EQ(first_attended_token(AttentionSpan::Full, 4, 12), 0U);
}

TEST(GroupKernelContracts, RefuseWhatDoesNotFit) {
  Slab slab(testing::format_named("nvfp4"));
  std::vector<float> row(64, 1.0f);
  const std::int64_t outside = std::int64_t{kPages} * kBlock;
  EXPECT_THROW(reference::write_group_kv(slab.bytes.data(), slab.pages, 0, row.data(), row.data(), 1, &outside, {}),
               ContractError);
  const std::int64_t slot = 5;
  EXPECT_THROW(reference::write_group_kv(slab.bytes.data(), slab.pages, kLayers, row.data(), row.data(), 1, &slot, {}),
               ContractError);
  EXPECT_THROW(reference::write_mla(slab.bytes.data(), slab.pages, 0, row.data(), row.data(), 1, &slot, {}),
               ContractError);
  GroupPages cramped = slab.pages;
  cramped.page_stride = cramped.group_page_bytes() - 1;
  EXPECT_THROW(reference::write_group_kv(slab.bytes.data(), cramped, 0, row.data(), row.data(), 1, &slot, {}),
               ContractError);
  const std::int32_t table[1] = {1};
  const std::int32_t length = 2;
  GroupAttentionArgs args{.query = row.data(),
                          .block_tables = table,
                          .seq_lens = &length,
                          .out = row.data(),
                          .seqs = 1,
                          .q_heads = 3,
                          .max_blocks = 1};
  EXPECT_THROW(reference::group_attention_decode(slab.bytes.data(), slab.pages, args), ContractError);  // 3 of 2 heads
  args.q_heads = 2;
  args.span = AttentionSpan::SlidingWindow;
  EXPECT_THROW(reference::group_attention_decode(slab.bytes.data(), slab.pages, args), ContractError);  // no window
  Slab mamba(PageFormat{.content = PageContent::MambaState, .state_bytes = 64});
  args.span = AttentionSpan::Full;
  EXPECT_THROW(reference::group_attention_decode(mamba.bytes.data(), mamba.pages, args), ContractError);
}

}  // namespace
}  // namespace kvtier::kernels
