// The page-pattern kernels agree with the CPU pattern and with KvPool's staged
// copies, in both layouts.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

#include "kvtier/kernels/page_pattern_kernels.hpp"
#include "kvtier/memory/cuda_runtime.hpp"
#include "kvtier/memory/kv_pool.hpp"

namespace kvtier::kernels {
namespace {

class PagePatternKernel : public ::testing::TestWithParam<PageLayout> {
 protected:
  void SetUp() override {
    if (memory::CudaRuntime::device_count() == 0) GTEST_SKIP() << "no CUDA device is visible";
  }
};

template <class T>
T* to_device(const std::vector<T>& values) {
  T* device = nullptr;
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&device), values.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(device, values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return device;
}

TEST_P(PagePatternKernel, KernelAndStagedCopiesAgree) {
  memory::CudaRuntime runtime(0);
  // fp8 with an odd head_dim: the page size is not a multiple of 8 bytes.
  const KvGeometry geometry{.layers = 3, .kv_heads = 2, .head_dim = 33, .dtype = KvDtype::Fp8, .tokens_per_block = 16};
  memory::KvPool pool(runtime, KvLayout(geometry, GetParam(), 16));
  const std::vector<std::uint32_t> kernel_pages{1, 4, 9};
  const std::vector<std::uint64_t> kernel_ids{21, 22, 23};
  std::uint32_t* d_pages = to_device(kernel_pages);
  std::uint64_t* d_ids = to_device(kernel_ids);
  std::uint32_t* d_mismatched = to_device(std::vector<std::uint32_t>(3, 7));

  // Kernel writes, the pool's staged D2H check reads.
  ASSERT_EQ(launch_fill_page_pattern(pool.slab(), pool.layout(), d_pages, d_ids, 3, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(pool.find_pattern_mismatches(std::vector<PageId>{PageId(1), PageId(4), PageId(9)}, kernel_ids).empty());

  // The pool's staged H2D writes, the kernel checks; page 9 gets another identity.
  pool.fill_pattern(std::vector<PageId>{PageId(1), PageId(4), PageId(9)}, std::vector<std::uint64_t>{21, 22, 99});
  ASSERT_EQ(launch_check_page_pattern(pool.slab(), pool.layout(), d_pages, d_ids, 3, d_mismatched, nullptr),
            cudaSuccess);
  std::vector<std::uint32_t> mismatched(3);
  ASSERT_EQ(cudaMemcpy(mismatched.data(), d_mismatched, 3 * sizeof(std::uint32_t), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(mismatched, (std::vector<std::uint32_t>{0, 0, 1}));
  cudaFree(d_pages);
  cudaFree(d_ids);
  cudaFree(d_mismatched);
}

TEST_P(PagePatternKernel, RejectsNullArguments) {
  EXPECT_EQ(launch_fill_page_pattern(nullptr, KvLayout(KvGeometry{}, GetParam(), 1), nullptr, nullptr, 1, nullptr),
            cudaErrorInvalidValue);
}

INSTANTIATE_TEST_SUITE_P(Layouts, PagePatternKernel, ::testing::Values(PageLayout::PageMajor, PageLayout::LayerMajor));

}  // namespace
}  // namespace kvtier::kernels
