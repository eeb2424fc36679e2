#include "kvtier/memory/runtime_factory.hpp"

#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/memory/host_runtime.hpp"
#if KVTIER_WITH_CUDA
#include "kvtier/memory/cuda_runtime.hpp"
#endif

namespace kvtier::memory {

RuntimeChoice parse_runtime_choice(std::string_view name) {
  if (name == "auto") return RuntimeChoice::Auto;
  if (name == "host") return RuntimeChoice::Host;
  if (name == "cuda") return RuntimeChoice::Cuda;
  throw ConfigError("unknown device '" + std::string(name) + "' (expected auto, host or cuda)");
}

bool cuda_compiled() noexcept { return KVTIER_WITH_CUDA != 0; }

int cuda_device_count() noexcept {
#if KVTIER_WITH_CUDA
  return CudaRuntime::device_count();
#else
  return 0;
#endif
}

std::unique_ptr<Runtime> make_runtime(RuntimeChoice choice) {
  if (choice == RuntimeChoice::Host) return std::make_unique<HostRuntime>();
  const int devices = cuda_device_count();
  if (choice == RuntimeChoice::Auto && devices == 0) return std::make_unique<HostRuntime>();
  if (!cuda_compiled()) throw ConfigError("device 'cuda' requested but kvtier was built without CUDA");
  if (devices == 0) throw ConfigError("device 'cuda' requested but no CUDA device is visible");
#if KVTIER_WITH_CUDA
  return std::make_unique<CudaRuntime>(0);
#else
  return nullptr;  // unreachable: cuda_compiled() is false
#endif
}

}  // namespace kvtier::memory
