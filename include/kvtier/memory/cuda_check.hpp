#pragma once
// The library-wide CUDA check (CUDA translation units only): a failed call
// becomes a typed CudaError naming the call, file and line, and the thread's
// last-error state is cleared, so a later launch never reports this failure
// as its own.
#include <cuda_runtime_api.h>

#include "kvtier/core/errors.hpp"

namespace kvtier::memory::detail {

[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  (void)cudaGetLastError();  // handled here: clear it (a sticky error stays, as CUDA decides)
  throw CudaError(static_cast<int>(status), cudaGetErrorName(status), call, file, line);
}

/// Clears the last error when it is `expected` (cudaErrorNotReady from a
/// query, say), leaving any other pending error for its owner to find.
inline void clear_expected_error(cudaError_t expected) noexcept {
  if (cudaPeekAtLastError() == expected) (void)cudaGetLastError();
}

}  // namespace kvtier::memory::detail

#define KVTIER_CUDA_CHECK(call)                                                              \
  do {                                                                                       \
    const cudaError_t kvtier_status_ = (call);                                               \
    if (kvtier_status_ != cudaSuccess) {                                                     \
      ::kvtier::memory::detail::throw_cuda_error(kvtier_status_, #call, __FILE__, __LINE__); \
    }                                                                                        \
  } while (false)
