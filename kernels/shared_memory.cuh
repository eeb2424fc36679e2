#pragma once
// Private to the kernel translation units: opting a kernel into the dynamic
// shared memory a launch needs.
#include <cuda_runtime.h>

#include <cstddef>

namespace kvtier::kernels {

/// cudaErrorInvalidValue when `dynamic_bytes` plus the kernel's `static_bytes`
/// pass the device's opt-in limit; otherwise raises the kernel's limit to
/// `dynamic_bytes`. Clears any error it returns.
template <class Kernel>
cudaError_t allow_dynamic_shared_memory(Kernel kernel, std::size_t dynamic_bytes, std::size_t static_bytes) {
  int device = 0;
  int optin = 0;
  if (const cudaError_t status = cudaGetDevice(&device); status != cudaSuccess) {
    (void)cudaGetLastError();
    return status;
  }
  if (const cudaError_t status = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
      status != cudaSuccess) {
    (void)cudaGetLastError();
    return status;
  }
  if (dynamic_bytes + static_bytes > static_cast<std::size_t>(optin)) return cudaErrorInvalidValue;
  if (const cudaError_t status =
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(dynamic_bytes));
      status != cudaSuccess) {
    (void)cudaGetLastError();
    return status;
  }
  return cudaSuccess;
}

}  // namespace kvtier::kernels
