#pragma once
// Private to the kernel translation units: a max or sum over a thread block.
#include <cuda_runtime.h>

namespace kvtier::kernels {

/// Every thread gets the block's max (or sum) of `value`; `scratch` holds one
/// float per warp. Blocks are whole warps. Its barriers also publish what the
/// threads wrote to shared memory before it.
__device__ inline float block_reduce(float value, float* scratch, bool take_max) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xFFFFFFFFU, value, offset);
    value = take_max ? fmaxf(value, other) : value + other;
  }
  const unsigned warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) scratch[warp] = value;
  __syncthreads();
  if (threadIdx.x == 0) {
    float result = scratch[0];
    for (unsigned w = 1; w < blockDim.x / 32; ++w) result = take_max ? fmaxf(result, scratch[w]) : result + scratch[w];
    scratch[0] = result;
  }
  __syncthreads();
  const float result = scratch[0];
  __syncthreads();
  return result;
}

}  // namespace kvtier::kernels
