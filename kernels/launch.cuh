#pragma once
// Private to the kernel translation units: one way to launch.
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

namespace kvtier::kernels {

/// Launches with the launch's own status (never an earlier failure that
/// `cudaGetLastError` would report), and clears the error it returns: the
/// caller handles it.
template <class... Params, class... Args>
inline cudaError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared, cudaStream_t stream,
                          Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  const cudaError_t status = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  if (status != cudaSuccess && cudaPeekAtLastError() == status) (void)cudaGetLastError();
  return status;
}

}  // namespace kvtier::kernels
