#include "kvtier/memory/cuda_runtime.hpp"
#include "memory/group_work_contract.hpp"
#include "memory/kv_write_contract.hpp"
#include "memory/runtime_contract.hpp"

namespace kvtier::memory::testing {
namespace {

struct CudaRuntimeTraits {
  static std::unique_ptr<Runtime> make() { return std::make_unique<CudaRuntime>(0); }
  static const char* unavailable() { return CudaRuntime::device_count() > 0 ? nullptr : "no CUDA device is visible"; }
};

using CudaRuntimes = ::testing::Types<CudaRuntimeTraits>;
INSTANTIATE_TYPED_TEST_SUITE_P(Cuda, RuntimeContract, CudaRuntimes);
INSTANTIATE_TYPED_TEST_SUITE_P(Cuda, GroupWorkContract, CudaRuntimes);
INSTANTIATE_TYPED_TEST_SUITE_P(Cuda, KvWriteContract, CudaRuntimes);

TEST(CudaRuntime, ReportsTheDeviceItRunsOn) {
  if (CudaRuntime::device_count() == 0) GTEST_SKIP() << "no CUDA device is visible";
  CudaRuntime runtime(0);
  const DeviceInfo info = runtime.device_info();
  EXPECT_FALSE(info.name.empty());
  EXPECT_GT(info.total_bytes, 0U);
  EXPECT_GE(info.compute_capability_major, 7);
}

TEST(CudaRuntime, InvalidDeviceOrdinalIsACudaErrorNamingTheCall) {
  if (CudaRuntime::device_count() == 0) GTEST_SKIP() << "no CUDA device is visible";
  try {
    CudaRuntime runtime(CudaRuntime::device_count() + 7);
    FAIL() << "an invalid ordinal must throw";
  } catch (const CudaError& error) {
    EXPECT_NE(std::string(error.what()).find("cudaSetDevice"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace kvtier::memory::testing
