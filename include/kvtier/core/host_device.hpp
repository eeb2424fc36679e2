#pragma once
// Lets layout and pattern arithmetic compile for both the host and CUDA device
// code without core/ ever including a CUDA header.
#if defined(__CUDACC__)
#define KVTIER_HOST_DEVICE __host__ __device__
#else
#define KVTIER_HOST_DEVICE
#endif
