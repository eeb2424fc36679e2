// The offload contract on the CUDA runtime (label gpu; skips without a device).
#include "kvtier/memory/cuda_runtime.hpp"
#include "offload/offload_contract.hpp"

namespace kvtier::offload::testing {
namespace {

struct CudaRuntimeTraits {
  static std::unique_ptr<memory::Runtime> make() { return std::make_unique<memory::CudaRuntime>(0); }
  static const char* unavailable() {
    return memory::CudaRuntime::device_count() > 0 ? nullptr : "no CUDA device is visible";
  }
};

using CudaRuntimes = ::testing::Types<CudaRuntimeTraits>;
INSTANTIATE_TYPED_TEST_SUITE_P(Cuda, OffloadContract, CudaRuntimes);

}  // namespace
}  // namespace kvtier::offload::testing
