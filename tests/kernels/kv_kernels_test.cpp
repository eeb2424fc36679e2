// The CUDA KV kernels against their CPU references (label gpu).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/device_array.hpp"
#include "kernels/kv_test_data.hpp"
#include "kvtier/kernels/kv_kernels.hpp"
#include "kvtier/kernels/reference/paged_attention.hpp"
#include "kvtier/kernels/reference/write_kv.hpp"
#include "kvtier/memory/cuda_runtime.hpp"

namespace kvtier::kernels {
namespace {

using namespace testing;

bool have_device() { return memory::CudaRuntime::device_count() > 0; }

class KvKernels : public ::testing::TestWithParam<std::tuple<PageLayout, KvDtype>> {
 protected:
  void SetUp() override {
    if (!have_device()) GTEST_SKIP() << "no CUDA device is visible";
  }
};

TEST_P(KvKernels, WriteKvAndPagedAttentionMatchTheReferences) {
  const auto [kind, dtype] = GetParam();
  constexpr std::uint32_t kBlock = 16, kKvHeads = 4, kQHeads = 16, kDim = 64, kPages = 64, kMaxBlocks = 8;
  const KvLayout layout(
      KvGeometry{.layers = 2, .kv_heads = kKvHeads, .head_dim = kDim, .dtype = dtype, .tokens_per_block = kBlock}, kind,
      kPages);
  std::mt19937 rng(5);
  std::vector<std::int32_t> pages(kPages);
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng);
  const std::vector<std::int32_t> lens{1, 17, 64, 127};
  std::vector<std::int32_t> tables(lens.size() * kMaxBlocks, 0);
  std::vector<std::int64_t> slots;
  std::vector<std::uint32_t> tokens;
  std::size_t next = 0;
  for (std::size_t s = 0; s < lens.size(); ++s) {
    for (std::int32_t b = 0; b < (lens[s] + kBlock - 1) / kBlock; ++b) tables[s * kMaxBlocks + b] = pages[next++];
    for (std::int32_t t = 0; t < lens[s]; ++t) {
      slots.push_back(std::int64_t{tables[s * kMaxBlocks + t / kBlock]} * kBlock + t % kBlock);
      tokens.push_back(static_cast<std::uint32_t>(rng()));
    }
  }
  slots.push_back(-1);  // a padding token
  tokens.push_back(7);
  const auto k = kv_rows(tokens, 0, tokens.size(), kKvHeads, kDim, 0);
  const auto v = kv_rows(tokens, 0, tokens.size(), kKvHeads, kDim, 1);

  std::vector<std::byte> host_slab(layout.slab_bytes());
  reference::write_kv(host_slab.data(), layout, 1, k.data(), v.data(), tokens.size(), slots.data());
  DeviceArray<std::byte> slab(layout.slab_bytes());
  DeviceArray<float> dk(k), dv(v);
  DeviceArray<std::int64_t> dslots(slots);
  ASSERT_EQ(launch_write_kv(slab.data, layout, 1, dk.data, dv.data, static_cast<std::uint32_t>(tokens.size()),
                            dslots.data, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto device_slab = slab.to_host();
  ASSERT_EQ(std::memcmp(device_slab.data(), host_slab.data(), host_slab.size()), 0) << "written bytes differ";

  std::vector<float> query;
  for (std::size_t s = 0; s < lens.size(); ++s) {
    const auto q = query_for(s, kQHeads, kDim);
    query.insert(query.end(), q.begin(), q.end());
  }
  std::vector<float> expected(query.size());
  PagedAttentionArgs args{.query = query.data(),
                          .block_tables = tables.data(),
                          .seq_lens = lens.data(),
                          .out = expected.data(),
                          .seqs = static_cast<std::uint32_t>(lens.size()),
                          .q_heads = kQHeads,
                          .max_blocks = kMaxBlocks,
                          .layer = 1,
                          .scale = 0.125f};
  reference::paged_attention_decode(host_slab.data(), layout, args);
  DeviceArray<float> dq(query), dout(query.size());
  DeviceArray<std::int32_t> dtables(tables), dlens(lens);
  args.query = dq.data;
  args.block_tables = dtables.data;
  args.seq_lens = dlens.data;
  args.out = dout.data;
  ASSERT_EQ(launch_paged_attention_decode(slab.data, layout, args, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto out = dout.to_host();
  for (std::size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], expected[i], 1e-4f) << i;
}

INSTANTIATE_TEST_SUITE_P(Layouts, KvKernels,
                         ::testing::Combine(::testing::Values(PageLayout::PageMajor, PageLayout::LayerMajor),
                                            ::testing::Values(KvDtype::Fp32, KvDtype::Bf16, KvDtype::Fp16,
                                                              KvDtype::Fp8)));

TEST(CopyPagesKernel, CopiesScatteredChunksFromDeviceAndMappedHostMemory) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device is visible";
  memory::CudaRuntime runtime(0);
  constexpr std::size_t kChunk = 64 << 10;
  memory::DeviceBuffer source = runtime.allocate_device(8 * kChunk);
  memory::DeviceBuffer target = runtime.allocate_device(8 * kChunk);
  memory::PinnedBuffer host = runtime.allocate_pinned(8 * kChunk);
  std::vector<unsigned char> pattern(8 * kChunk);
  for (std::size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<unsigned char>(i * 7 + 3);
  std::memcpy(host.data(), pattern.data(), pattern.size());
  ASSERT_EQ(cudaMemcpy(source.data(), pattern.data(), pattern.size(), cudaMemcpyHostToDevice), cudaSuccess);
  // Device chunk i -> target chunk 7 - i; one unaligned tail; then host chunks -> device.
  std::vector<CopyDescriptor> chunks;
  for (std::size_t i = 0; i < 4; ++i) {
    chunks.push_back({source.bytes_data() + i * kChunk, target.bytes_data() + (7 - i) * kChunk, kChunk});
  }
  chunks.push_back({source.bytes_data() + 4 * kChunk + 1, target.bytes_data() + 3 * kChunk + 3, kChunk - 5});
  for (std::size_t i = 5; i < 8; ++i) {
    chunks.push_back({host.bytes_data() + i * kChunk, target.bytes_data() + (i - 5) * kChunk, kChunk});
  }
  DeviceArray<CopyDescriptor> dchunks(chunks);
  ASSERT_EQ(launch_copy_pages(dchunks.data, static_cast<std::uint32_t>(chunks.size()), 4, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<unsigned char> result(8 * kChunk);
  ASSERT_EQ(cudaMemcpy(result.data(), target.data(), result.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(std::memcmp(result.data() + (7 - i) * kChunk, pattern.data() + i * kChunk, kChunk), 0) << i;
  }
  EXPECT_EQ(std::memcmp(result.data() + 3 * kChunk + 3, pattern.data() + 4 * kChunk + 1, kChunk - 5), 0);
  for (std::size_t i = 5; i < 8; ++i) {
    EXPECT_EQ(std::memcmp(result.data() + (i - 5) * kChunk, pattern.data() + i * kChunk, kChunk), 0) << i;
  }
  EXPECT_EQ(launch_copy_pages(nullptr, 3, 4, nullptr), cudaErrorInvalidValue);
}

TEST(PagedAttentionKernel, RejectsArgumentsThatCannotBeRight) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device is visible";
  const KvLayout layout(KvGeometry{}, PageLayout::PageMajor, 4);
  PagedAttentionArgs args{.query = nullptr,
                          .block_tables = nullptr,
                          .seq_lens = nullptr,
                          .out = nullptr,
                          .seqs = 1,
                          .q_heads = 3,
                          .max_blocks = 1,
                          .layer = 0,
                          .scale = 1.0f};
  EXPECT_EQ(launch_paged_attention_decode(reinterpret_cast<const std::byte*>(1), layout, args, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace kvtier::kernels
