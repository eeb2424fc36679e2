#pragma once
// Private to the CUDA runtime translation units: turns a CUDA status into a
// typed CudaError naming the call, file and line.
#include <cuda_runtime_api.h>

#include "kvtier/core/errors.hpp"

namespace kvtier::memory::detail {

[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  throw CudaError(static_cast<int>(status), cudaGetErrorName(status), call, file, line);
}

}  // namespace kvtier::memory::detail

#define KVTIER_CUDA_CHECK(call)                                                           \
  do {                                                                                    \
    const cudaError_t kvtier_status_ = (call);                                            \
    if (kvtier_status_ != cudaSuccess) {                                                  \
      ::kvtier::memory::detail::throw_cuda_error(kvtier_status_, #call, __FILE__, __LINE__); \
    }                                                                                     \
  } while (false)
