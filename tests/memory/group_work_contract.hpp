#pragma once
// The Runtime contract for KV cache group kernels (DESIGN.md rule 3), written
// once and instantiated per runtime: every page format written through a
// stream equals the CPU reference byte for byte, and decode attention over a
// sliding window through device tables matches it within float rounding —
// the window's null page (NaN bytes) never read. Traits as RuntimeContract's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/format_values.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/kernels/reference/write_group_kv.hpp"
#include "kvtier/memory/runtime.hpp"

namespace kvtier::memory::testing {

template <class Traits>
class GroupWorkContract : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* reason = Traits::unavailable()) GTEST_SKIP() << reason;
    runtime_ = Traits::make();
  }
  Runtime& runtime() { return *runtime_; }

  /// A pinned copy of `values`.
  template <class T>
  PinnedBuffer pinned(const std::vector<T>& values) {
    PinnedBuffer buffer = runtime_->allocate_pinned(std::max<std::size_t>(1, values.size()) * sizeof(T));
    std::memcpy(buffer.data(), values.data(), values.size() * sizeof(T));
    return buffer;
  }
  /// A device copy of `values` (copied on `stream`, which the caller synchronizes).
  template <class T>
  DeviceBuffer device(Stream& stream, const PinnedBuffer& from, std::size_t count) {
    DeviceBuffer buffer = runtime_->allocate_device(std::max<std::size_t>(1, count) * sizeof(T));
    stream.copy_async({from.data(), buffer.data(), count * sizeof(T)});
    return buffer;
  }
  std::unique_ptr<Runtime> runtime_;
};

TYPED_TEST_SUITE_P(GroupWorkContract);

TYPED_TEST_P(GroupWorkContract, EveryFormatWritesAndAttendsAsTheReference) {
  constexpr std::uint32_t kPages = 16, kLayers = 2, kMaxBlocks = 6, kWindow = 6;
  const kernels::LayerScales scales{.key = 1.0f / 64, .value = 1.0f / 32};
  for (const kernels::testing::Format& c : kernels::testing::page_format_cases()) {
    SCOPED_TRACE(c.name);
    const PageFormat& f = c.format;
    kernels::GroupPages pages{.format = f, .layers = kLayers, .capacity = kPages};
    pages.page_stride = pages.group_page_bytes() + 16;
    // Page 0 is the null page: NaN bytes in every format, never to be read.
    std::vector<std::byte> expected(pages.page_stride * kPages, std::byte{0});
    std::memset(expected.data(), 0xFF, pages.page_stride);
    Stream stream = this->runtime().create_stream();
    PinnedBuffer slab_init = this->pinned(expected);
    DeviceBuffer slab = this->template device<std::byte>(stream, slab_init, expected.size());

    // Two sequences of 9 and 21 tokens; the window (6 tokens) leaves the longer one's first blocks null.
    const std::vector<std::int32_t> lens{9, 21};
    std::vector<std::int32_t> tables(lens.size() * kMaxBlocks, 0);
    std::vector<std::int64_t> slots;
    std::int32_t next_page = 1;
    for (std::size_t s = 0; s < lens.size(); ++s) {
      const std::uint32_t first = kernels::first_attended_token(kernels::AttentionSpan::SlidingWindow, kWindow,
                                                                static_cast<std::uint32_t>(lens[s]));
      for (std::int32_t t = 0; t < lens[s]; ++t) {
        const std::uint32_t b = static_cast<std::uint32_t>(t) / f.block_size;
        if ((b + 1) * f.block_size <= first) {
          slots.push_back(-1);
          continue;
        }
        if (tables[s * kMaxBlocks + b] == 0) tables[s * kMaxBlocks + b] = next_page++;
        slots.push_back(std::int64_t{tables[s * kMaxBlocks + b]} * f.block_size + t % f.block_size);
      }
    }
    const bool latent = f.content == PageContent::MlaLatent;
    const std::size_t first_width = latent ? f.latent_dim : std::size_t{f.kv_heads} * f.head_dim;
    const std::size_t second_width = latent ? f.rope_dim : std::size_t{f.kv_heads} * f.head_dim_of(KvPart::Value);
    std::mt19937 rng(9);
    const std::vector<float> first = kernels::testing::random_values(slots.size() * first_width, rng, 1.0f);
    const std::vector<float> second = kernels::testing::random_values(slots.size() * second_width, rng, 1.0f);
    PinnedBuffer first_pinned = this->pinned(first), second_pinned = this->pinned(second),
                 slots_pinned = this->pinned(slots);
    const auto tokens = static_cast<std::uint32_t>(slots.size());
    for (std::uint32_t layer = 0; layer < kLayers; ++layer) {
      if (latent) {
        kernels::reference::write_mla(expected.data(), pages, layer, first.data(), second.data(), tokens, slots.data(),
                                      scales);
      } else {
        kernels::reference::write_group_kv(expected.data(), pages, layer, first.data(), second.data(), tokens,
                                           slots.data(), scales);
      }
      stream.write_group_kv_async(GroupKvWrite{.slab = slab.bytes_data(),
                                               .pages = pages,
                                               .layer = layer,
                                               .first = static_cast<const float*>(first_pinned.data()),
                                               .second = static_cast<const float*>(second_pinned.data()),
                                               .tokens = tokens,
                                               .slots = static_cast<const std::int64_t*>(slots_pinned.data()),
                                               .scales = scales});
    }
    PinnedBuffer written = this->runtime().allocate_pinned(expected.size());
    stream.copy_async({slab.data(), written.data(), expected.size()});
    stream.synchronize();
    ASSERT_EQ(std::memcmp(written.data(), expected.data(), expected.size()), 0) << "the stream wrote other bytes";

    const std::uint32_t q_heads = latent ? 2 : f.kv_heads * 2;
    const std::vector<float> query =
        kernels::testing::random_values(lens.size() * q_heads * kernels::query_width(f), rng, 0.1f);
    std::vector<float> want(lens.size() * q_heads * kernels::output_width(f));
    kernels::GroupAttentionArgs args{.query = query.data(),
                                     .block_tables = tables.data(),
                                     .seq_lens = lens.data(),
                                     .out = want.data(),
                                     .seqs = static_cast<std::uint32_t>(lens.size()),
                                     .q_heads = q_heads,
                                     .max_blocks = kMaxBlocks,
                                     .layer = 1,
                                     .scale = 0.125f,
                                     .span = kernels::AttentionSpan::SlidingWindow,
                                     .window = kWindow,
                                     .scales = scales};
    kernels::reference::group_attention_decode(expected.data(), pages, args);
    PinnedBuffer query_pinned = this->pinned(query), tables_pinned = this->pinned(tables),
                 lens_pinned = this->pinned(lens);
    DeviceBuffer query_device = this->template device<float>(stream, query_pinned, query.size());
    DeviceBuffer tables_device = this->template device<std::int32_t>(stream, tables_pinned, tables.size());
    DeviceBuffer lens_device = this->template device<std::int32_t>(stream, lens_pinned, lens.size());
    DeviceBuffer out_device = this->runtime().allocate_device(want.size() * sizeof(float));
    args.query = static_cast<const float*>(query_device.data());
    args.block_tables = static_cast<const std::int32_t*>(tables_device.data());
    args.seq_lens = static_cast<const std::int32_t*>(lens_device.data());
    args.out = static_cast<float*>(out_device.data());
    stream.group_attention_async(GroupAttentionDecode{.slab = slab.bytes_data(), .pages = pages, .args = args});
    PinnedBuffer out = this->runtime().allocate_pinned(want.size() * sizeof(float));
    stream.copy_async({out_device.data(), out.data(), want.size() * sizeof(float)});
    stream.synchronize();
    const auto* got = static_cast<const float*>(out.data());
    for (std::size_t i = 0; i < want.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << "output " << i << " read the null page";
      EXPECT_NEAR(got[i], want[i], 1e-4f * (1.0f + std::fabs(want[i]))) << i;
    }
  }
}

TYPED_TEST_P(GroupWorkContract, ABadWriteOrStepIsRefusedBeforeEnqueuing) {
  Stream stream = this->runtime().create_stream();
  DeviceBuffer slab = this->runtime().allocate_device(4096);
  PinnedBuffer floats = this->runtime().allocate_pinned(64 * sizeof(float));
  PinnedBuffer slots = this->runtime().allocate_pinned(sizeof(std::int64_t));
  const kernels::GroupPages mamba{
      .format = {.content = PageContent::MambaState, .state_bytes = 64}, .layers = 1, .page_stride = 64, .capacity = 4};
  const auto* values = static_cast<const float*>(floats.data());
  EXPECT_THROW(stream.write_group_kv_async(GroupKvWrite{.slab = slab.bytes_data(),
                                                        .pages = mamba,
                                                        .first = values,
                                                        .second = values,
                                                        .tokens = 1,
                                                        .slots = static_cast<const std::int64_t*>(slots.data())}),
               ContractError);
  kernels::GroupPages kv{.format = kernels::testing::format_named("nvfp4"), .layers = 1, .capacity = 2};
  kv.page_stride = kv.group_page_bytes();
  EXPECT_THROW(stream.write_group_kv_async(GroupKvWrite{.slab = slab.bytes_data(),
                                                        .pages = kv,
                                                        .layer = 1,
                                                        .first = values,
                                                        .second = values,
                                                        .tokens = 1,
                                                        .slots = static_cast<const std::int64_t*>(slots.data())}),
               ContractError);
  EXPECT_THROW(stream.group_attention_async(GroupAttentionDecode{.slab = slab.bytes_data(),
                                                                 .pages = kv,
                                                                 .args = {.query = values,
                                                                          .block_tables = nullptr,
                                                                          .seq_lens = nullptr,
                                                                          .out = nullptr,
                                                                          .seqs = 1,
                                                                          .q_heads = 2,
                                                                          .max_blocks = 1}}),
               ContractError);
  stream.synchronize();
}

REGISTER_TYPED_TEST_SUITE_P(GroupWorkContract, EveryFormatWritesAndAttendsAsTheReference,
                            ABadWriteOrStepIsRefusedBeforeEnqueuing);

}  // namespace kvtier::memory::testing
