// The CUDA KV cache group kernels against their CPU references (label gpu):
// every page format written byte for byte as the reference writes it, and
// decode attention for every span within float rounding of the reference.
#include "kvtier/kernels/group_kernels.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/device_array.hpp"
#include "kernels/format_values.hpp"
#include "kvtier/kernels/reference/write_group_kv.hpp"
#include "kvtier/memory/cuda_runtime.hpp"

namespace kvtier::kernels {
namespace {

using namespace testing;

constexpr std::uint32_t kPages = 40;
constexpr std::uint32_t kLayers = 2;
constexpr std::uint32_t kMaxBlocks = 12;
constexpr LayerScales kScales{.key = 1.0f / 64, .value = 1.0f / 32};

struct Case {
  Format format;
  AttentionSpan span;
  std::uint32_t window;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const Format& f : page_format_cases()) {
    out.push_back({f, AttentionSpan::Full, 0});
    out.push_back({f, AttentionSpan::SlidingWindow, 7});
    if (f.format.content == PageContent::KeyValue) out.push_back({f, AttentionSpan::ChunkedLocal, 8});
  }
  return out;
}

class GroupKernels : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (memory::CudaRuntime::device_count() == 0) GTEST_SKIP() << "no CUDA device is visible";
  }
};

TEST_P(GroupKernels, WriteAndAttentionMatchTheReferences) {
  const Case& c = GetParam();
  const PageFormat& f = c.format.format;
  GroupPages pages{.format = f, .layers = kLayers, .capacity = kPages};
  pages.page_stride = pages.group_page_bytes() + 32;  // padding the kernels never touch
  std::mt19937 rng(23);
  std::vector<std::int32_t> free_pages(kPages - 1);
  std::iota(free_pages.begin(), free_pages.end(), 1);  // page 0: the null page
  std::shuffle(free_pages.begin(), free_pages.end(), rng);
  const std::vector<std::int32_t> lens{1, 9, 17, 40, 47};
  std::vector<std::int32_t> tables(lens.size() * kMaxBlocks, 0);
  std::vector<std::int64_t> slots;
  std::size_t next = 0;
  for (std::size_t s = 0; s < lens.size(); ++s) {
    const std::uint32_t first = first_attended_token(c.span, c.window, static_cast<std::uint32_t>(lens[s]));
    for (std::int32_t t = 0; t < lens[s]; ++t) {
      const std::uint32_t b = static_cast<std::uint32_t>(t) / f.block_size;
      if ((b + 1) * f.block_size <= first) {
        slots.push_back(-1);  // before the window: never written, its entry stays the null page
        continue;
      }
      if (tables[s * kMaxBlocks + b] == 0) tables[s * kMaxBlocks + b] = free_pages[next++];
      slots.push_back(std::int64_t{tables[s * kMaxBlocks + b]} * f.block_size + t % f.block_size);
    }
  }
  const bool latent = f.content == PageContent::MlaLatent;
  const std::size_t first_width = latent ? f.latent_dim : std::size_t{f.kv_heads} * f.head_dim;
  const std::size_t second_width = latent ? f.rope_dim : std::size_t{f.kv_heads} * f.head_dim_of(KvPart::Value);
  const std::vector<float> first = random_values(slots.size() * first_width, rng, 1.0f);
  const std::vector<float> second = random_values(slots.size() * second_width, rng, 1.0f);

  std::vector<std::byte> host(pages.page_stride * kPages, std::byte{0x5A});
  DeviceArray<std::byte> slab(host);
  DeviceArray<float> d_first(first), d_second(second);
  DeviceArray<std::int64_t> d_slots(slots);
  const auto tokens = static_cast<std::uint32_t>(slots.size());
  for (std::uint32_t layer = 0; layer < kLayers; ++layer) {
    if (latent) {
      reference::write_mla(host.data(), pages, layer, first.data(), second.data(), tokens, slots.data(), kScales);
      ASSERT_EQ(launch_write_mla(slab.data, pages, layer, d_first.data, d_second.data, tokens, d_slots.data, kScales,
                                 nullptr),
                cudaSuccess);
    } else {
      reference::write_group_kv(host.data(), pages, layer, first.data(), second.data(), tokens, slots.data(), kScales);
      ASSERT_EQ(launch_write_group_kv(slab.data, pages, layer, d_first.data, d_second.data, tokens, d_slots.data,
                                      kScales, nullptr),
                cudaSuccess);
    }
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(slab.to_host(), host) << "the kernel wrote other bytes than the reference";

  const std::uint32_t q_heads = latent ? 4 : f.kv_heads * 3;
  const std::vector<float> query = random_values(lens.size() * q_heads * query_width(f), rng, 0.1f);
  std::vector<float> want(lens.size() * q_heads * output_width(f));
  DeviceArray<float> d_query(query), d_out(want.size());
  DeviceArray<std::int32_t> d_tables(tables), d_lens(lens);
  GroupAttentionArgs args{.query = query.data(),
                          .block_tables = tables.data(),
                          .seq_lens = lens.data(),
                          .out = want.data(),
                          .seqs = static_cast<std::uint32_t>(lens.size()),
                          .q_heads = q_heads,
                          .max_blocks = kMaxBlocks,
                          .layer = 1,
                          .scale = 1.0f / std::sqrt(static_cast<float>(query_width(f))),
                          .span = c.span,
                          .window = c.window,
                          .scales = kScales};
  // The windowed cases carry attention sinks (gpt-oss pairs them with its windows).
  const std::vector<float> sinks = random_values(q_heads, rng, 2.0f);
  DeviceArray<float> d_sinks(sinks);
  if (c.span == AttentionSpan::SlidingWindow) args.sinks = sinks.data();
  reference::group_attention_decode(host.data(), pages, args);
  args.query = d_query.data;
  args.block_tables = d_tables.data;
  args.seq_lens = d_lens.data;
  args.out = d_out.data;
  if (args.sinks != nullptr) args.sinks = d_sinks.data;
  ASSERT_EQ(launch_group_attention_decode(slab.data, pages, args, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> got = d_out.to_host();
  for (std::size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << i;
    EXPECT_NEAR(got[i], want[i], 1e-4f * (1.0f + std::fabs(want[i]))) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryFormatAndSpan, GroupKernels, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& param) {
                           const char* span = param.param.span == AttentionSpan::Full            ? "full"
                                              : param.param.span == AttentionSpan::SlidingWindow ? "sliding"
                                                                                                 : "chunked";
                           return std::string(param.param.format.name) + "_" + span;
                         });

TEST(GroupKernelLaunchers, RefuseArgumentsThatCannotBeRight) {
  GroupPages mamba{.format = {.content = PageContent::MambaState, .state_bytes = 64}, .page_stride = 64, .capacity = 4};
  GroupAttentionArgs args{.seqs = 1, .q_heads = 1, .max_blocks = 1};
  std::byte byte{};
  float value = 0;
  std::int32_t page = 0;
  args.query = &value;
  args.out = &value;
  args.block_tables = &page;
  args.seq_lens = &page;
  EXPECT_EQ(launch_group_attention_decode(&byte, mamba, args, nullptr), cudaErrorInvalidValue);
  const std::int64_t slot = 0;
  EXPECT_EQ(launch_write_group_kv(&byte, mamba, 0, &value, &value, 1, &slot, {}, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(launch_write_mla(&byte, mamba, 0, &value, &value, 1, &slot, {}, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace kvtier::kernels
