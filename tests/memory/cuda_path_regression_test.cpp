// Issue #10's defects of the CUDA path, each pinned by a test (label gpu;
// skipped without a device): launches report their own status, a pending
// event leaves no error behind, kernels bound their device-side inputs, the
// copy kernel's grid-stride loop and mapped-host target, a kernel ordered
// after a runtime copy on the same stream, and a slab over 4 GiB.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/kv_test_data.hpp"
#include "kvtier/kernels/kv_kernels.hpp"
#include "kvtier/kernels/reference/paged_attention.hpp"
#include "kvtier/kernels/reference/write_kv.hpp"
#include "kvtier/memory/cuda_runtime.hpp"
#include "kvtier/memory/kv_pool.hpp"

namespace kvtier::kernels {
namespace {

using namespace testing;

class CudaPath : public ::testing::Test {
 protected:
  void SetUp() override {
    if (memory::CudaRuntime::device_count() == 0) GTEST_SKIP() << "no CUDA device is visible";
    runtime_ = std::make_unique<memory::CudaRuntime>(0);
  }
  memory::CudaRuntime& runtime() { return *runtime_; }
  template <class T>
  memory::DeviceBuffer upload(const std::vector<T>& host) {
    memory::DeviceBuffer buffer = runtime().allocate_device(std::max<std::size_t>(1, host.size() * sizeof(T)));
    EXPECT_EQ(cudaMemcpy(buffer.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    return buffer;
  }
  template <class T>
  std::vector<T> download(const memory::DeviceBuffer& buffer, std::size_t count) {
    std::vector<T> host(count);
    EXPECT_EQ(cudaMemcpy(host.data(), buffer.data(), count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }
  std::unique_ptr<memory::CudaRuntime> runtime_;
};

TEST_F(CudaPath, LaunchReportsItsOwnStatusNotAnEarlierFailure) {
  memory::DeviceBuffer from = runtime().allocate_device(4096);
  memory::DeviceBuffer to = runtime().allocate_device(4096);
  const std::vector<CopyDescriptor> chunks{{from.data(), to.data(), 4096}};
  memory::DeviceBuffer device_chunks = upload(chunks);
  // An earlier, unrelated failure leaves its code as the thread's last error.
  ASSERT_NE(cudaMemcpy(nullptr, nullptr, 16, cudaMemcpyDeviceToDevice), cudaSuccess);
  EXPECT_EQ(launch_copy_pages(static_cast<const CopyDescriptor*>(device_chunks.data()), 1, 4, nullptr), cudaSuccess);
  (void)cudaGetLastError();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST_F(CudaPath, PendingEventLeavesNoErrorBehind) {
  constexpr std::size_t kBytes = std::size_t{2} << 30;  // long enough to be seen pending
  memory::DeviceBuffer from = runtime().allocate_device(kBytes);
  memory::DeviceBuffer to = runtime().allocate_device(kBytes);
  memory::Stream stream = runtime().create_stream();
  memory::Event done = runtime().create_event();
  (void)cudaGetLastError();
  stream.copy_async(memory::CopyDescriptor{from.bytes_data(), to.bytes_data(), kBytes});
  stream.record(done);
  const memory::EventStatus status = done.status();
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess) << "status() was " << static_cast<int>(status);
  done.synchronize();
  EXPECT_EQ(done.status(), memory::EventStatus::Complete);
}

TEST_F(CudaPath, WriteKvNeverWritesSlotsOutsideThePool) {
  const KvLayout layout(
      KvGeometry{.layers = 1, .kv_heads = 1, .head_dim = 4, .dtype = KvDtype::Fp32, .tokens_per_block = 2},
      PageLayout::PageMajor, 2);
  constexpr std::size_t kGuard = 4096;
  memory::DeviceBuffer slab = runtime().allocate_device(layout.slab_bytes() + kGuard);
  ASSERT_EQ(cudaMemset(slab.bytes_data() + layout.slab_bytes(), 0xCD, kGuard), cudaSuccess);
  const std::vector<float> k(4 * 4, 1.5f), v(4 * 4, 2.5f);
  const std::vector<std::int64_t> slots{3, 4, 1000, -1};  // one valid, two past the pool, one padding
  memory::DeviceBuffer dk = upload(k), dv = upload(v), dslots = upload(slots);
  ASSERT_EQ(launch_write_kv(slab.bytes_data(), layout, 0, static_cast<const float*>(dk.data()),
                            static_cast<const float*>(dv.data()), 4, static_cast<const std::int64_t*>(dslots.data()),
                            nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto bytes = download<std::byte>(slab, layout.slab_bytes() + kGuard);
  EXPECT_TRUE(std::all_of(bytes.begin() + static_cast<std::ptrdiff_t>(layout.slab_bytes()), bytes.end(),
                          [](std::byte b) { return b == std::byte{0xCD}; }))
      << "a slot outside the pool was written past the slab";
  std::vector<std::byte> expected(layout.slab_bytes());
  const std::vector<std::int64_t> valid{3};
  reference::write_kv(expected.data(), layout, 0, k.data(), v.data(), 1, valid.data());
  EXPECT_EQ(std::memcmp(bytes.data(), expected.data(), expected.size()), 0);
}

TEST_F(CudaPath, AttentionClampsLengthsSkipsForeignPagesAndZerosEmptySequences) {
  constexpr std::uint32_t kBlock = 4, kDim = 8, kMaxBlocks = 2, kPages = 4;
  const KvLayout layout(
      KvGeometry{.layers = 1, .kv_heads = 1, .head_dim = kDim, .dtype = KvDtype::Fp32, .tokens_per_block = kBlock},
      PageLayout::PageMajor, kPages);
  std::vector<std::byte> host_slab(layout.slab_bytes());
  std::vector<std::uint32_t> tokens(kPages * kBlock);
  std::iota(tokens.begin(), tokens.end(), 11U);
  std::vector<std::int64_t> slots(tokens.size());
  std::iota(slots.begin(), slots.end(), 0);
  const auto k = kv_rows(tokens, 0, tokens.size(), 1, kDim, 0);
  const auto v = kv_rows(tokens, 0, tokens.size(), 1, kDim, 1);
  reference::write_kv(host_slab.data(), layout, 0, k.data(), v.data(), tokens.size(), slots.data());
  memory::DeviceBuffer slab = upload(host_slab);

  // seq 0: length 0; seq 1: length 100 with a 2-block table (clamped to 8);
  // seq 2: length 8 whose second page is outside the pool (only 4 tokens count).
  const std::vector<std::int32_t> lens{0, 100, 8};
  const std::vector<std::int32_t> tables{0, 1, 1, 2, 3, 77};
  std::vector<float> query;
  for (std::size_t s = 0; s < lens.size(); ++s) {
    const auto q = query_for(s, 1, kDim);
    query.insert(query.end(), q.begin(), q.end());
  }
  memory::DeviceBuffer dq = upload(query), dtables = upload(tables), dlens = upload(lens);
  memory::DeviceBuffer dout = runtime().allocate_device(query.size() * sizeof(float));
  PagedAttentionArgs args{.query = static_cast<const float*>(dq.data()),
                          .block_tables = static_cast<const std::int32_t*>(dtables.data()),
                          .seq_lens = static_cast<const std::int32_t*>(dlens.data()),
                          .out = static_cast<float*>(dout.data()),
                          .seqs = 3,
                          .q_heads = 1,
                          .max_blocks = kMaxBlocks,
                          .layer = 0,
                          .scale = 0.3f};
  ASSERT_EQ(launch_paged_attention_decode(slab.bytes_data(), layout, args, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto out = download<float>(dout, query.size());

  // What the kernel must equal: the reference on the bounded inputs.
  const std::vector<std::int32_t> bounded_lens{0, 8, 4};
  std::vector<float> expected(query.size());
  reference::paged_attention_decode(host_slab.data(), layout,
                                    PagedAttentionArgs{.query = query.data(),
                                                       .block_tables = tables.data(),
                                                       .seq_lens = bounded_lens.data(),
                                                       .out = expected.data(),
                                                       .seqs = 3,
                                                       .q_heads = 1,
                                                       .max_blocks = kMaxBlocks,
                                                       .layer = 0,
                                                       .scale = 0.3f});
  for (std::size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], expected[i], 1e-5f) << i;
  for (std::size_t d = 0; d < kDim; ++d) EXPECT_EQ(out[d], 0.0f);

  args.max_blocks = 0;
  EXPECT_EQ(launch_paged_attention_decode(slab.bytes_data(), layout, args, nullptr), cudaErrorInvalidValue);
}

TEST_F(CudaPath, CopyPagesGridStrideCoversMoreChunksThanBlocksAndMappedHostTargets) {
  constexpr std::size_t kChunk = 16 << 10;
  constexpr std::size_t kChunks = 64;
  memory::DeviceBuffer source = runtime().allocate_device(kChunk * kChunks);
  memory::PinnedBuffer host = runtime().allocate_pinned(kChunk * kChunks);
  std::vector<unsigned char> pattern(kChunk * kChunks);
  for (std::size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<unsigned char>(i * 13 + 1);
  ASSERT_EQ(cudaMemcpy(source.data(), pattern.data(), pattern.size(), cudaMemcpyHostToDevice), cudaSuccess);
  std::vector<CopyDescriptor> chunks;
  for (std::size_t i = 0; i < kChunks; ++i) {
    chunks.push_back({source.bytes_data() + i * kChunk, host.bytes_data() + (kChunks - 1 - i) * kChunk, kChunk});
  }
  memory::DeviceBuffer device_chunks = upload(chunks);
  // 64 chunks on at most 3 blocks: the grid-stride loop does most of the work.
  ASSERT_EQ(launch_copy_pages(static_cast<const CopyDescriptor*>(device_chunks.data()), kChunks, 3, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (std::size_t i = 0; i < kChunks; ++i) {
    ASSERT_EQ(std::memcmp(host.bytes_data() + (kChunks - 1 - i) * kChunk, pattern.data() + i * kChunk, kChunk), 0) << i;
  }
}

TEST_F(CudaPath, KernelIsOrderedAfterARuntimeCopyOnTheSameStream) {
  constexpr std::size_t kBytes = 64 << 20;
  memory::PinnedBuffer staging = runtime().allocate_pinned(kBytes);
  memory::DeviceBuffer middle = runtime().allocate_device(kBytes);
  memory::DeviceBuffer target = runtime().allocate_device(kBytes);
  for (std::size_t i = 0; i < kBytes; ++i) staging.bytes_data()[i] = static_cast<std::byte>(i % 251);
  const std::vector<CopyDescriptor> chunks{{middle.data(), target.data(), kBytes}};
  memory::DeviceBuffer device_chunks = upload(chunks);
  memory::Stream stream = runtime().create_stream();
  ASSERT_NE(stream.native_handle(), nullptr);
  stream.copy_async(memory::CopyDescriptor{staging.bytes_data(), middle.bytes_data(), kBytes});
  ASSERT_EQ(launch_copy_pages(static_cast<const CopyDescriptor*>(device_chunks.data()), 1, 8,
                              static_cast<cudaStream_t>(stream.native_handle())),
            cudaSuccess);
  stream.synchronize();
  const auto bytes = download<std::byte>(target, kBytes);
  EXPECT_EQ(std::memcmp(bytes.data(), staging.bytes_data(), kBytes), 0) << "the kernel ran before the copy landed";
}

TEST_F(CudaPath, SlabOverFourGiBFillsAndVerifiesItsLastPages) {
  const KvLayout layout(
      KvGeometry{.layers = 8, .kv_heads = 8, .head_dim = 128, .dtype = KvDtype::Bf16, .tokens_per_block = 64},
      PageLayout::LayerMajor, 2300);  // 2300 x 2 MiB: past 2^32 bytes
  ASSERT_GT(layout.slab_bytes(), std::size_t{1} << 32);
  memory::KvPool pool(runtime(), layout);
  const std::vector<PageId> pages{PageId(0), PageId(2100), PageId(2299)};
  const std::vector<std::uint64_t> identities{5, 6, 7};
  pool.fill_pattern(pages, identities);
  EXPECT_TRUE(pool.find_pattern_mismatches(pages, identities).empty());
  const std::vector<std::uint64_t> others{5, 6, 8};
  EXPECT_EQ(pool.find_pattern_mismatches(pages, others), std::vector<PageId>{PageId(2299)});
}

}  // namespace
}  // namespace kvtier::kernels
