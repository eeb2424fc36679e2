#include "kvtier/core/page_pattern.hpp"
#include "kvtier/kernels/page_pattern_kernels.hpp"
#include "launch.cuh"

namespace kvtier::kernels {
namespace {

constexpr unsigned kThreads = 256;

/// Slab address of logical byte `offset` of `page` (chunks in order form the page).
__device__ std::size_t page_byte_address(const KvLayout& layout, std::uint32_t page, std::size_t offset) {
  const std::size_t chunk_bytes = layout.chunk_bytes();
  const auto chunk = static_cast<std::uint32_t>(offset / chunk_bytes);
  return layout.chunk_offset(page, chunk) + offset % chunk_bytes;
}

// One CUDA block per page; threads stride over the page's 8-byte pattern words.
__global__ void fill_page_pattern_kernel(std::byte* slab, KvLayout layout, const std::uint32_t* pages,
                                         const std::uint64_t* identities) {
  const std::uint32_t page = pages[blockIdx.x];
  const std::uint64_t identity = identities[blockIdx.x];
  const std::size_t page_bytes = layout.page_bytes();
  for (std::size_t word = threadIdx.x; word * 8 < page_bytes; word += blockDim.x) {
    const std::uint64_t value = page_pattern_word(identity, word);
    for (std::size_t b = 0; b < 8 && word * 8 + b < page_bytes; ++b) {
      slab[page_byte_address(layout, page, word * 8 + b)] = static_cast<std::byte>(value >> (8 * b));
    }
  }
}

__global__ void check_page_pattern_kernel(const std::byte* slab, KvLayout layout, const std::uint32_t* pages,
                                          const std::uint64_t* identities, std::uint32_t* mismatched) {
  const std::uint32_t page = pages[blockIdx.x];
  const std::uint64_t identity = identities[blockIdx.x];
  const std::size_t page_bytes = layout.page_bytes();
  int differs = 0;
  for (std::size_t word = threadIdx.x; word * 8 < page_bytes; word += blockDim.x) {
    const std::uint64_t value = page_pattern_word(identity, word);
    for (std::size_t b = 0; b < 8 && word * 8 + b < page_bytes; ++b) {
      differs |= slab[page_byte_address(layout, page, word * 8 + b)] != static_cast<std::byte>(value >> (8 * b));
    }
  }
  differs = __syncthreads_or(differs);
  if (threadIdx.x == 0) mismatched[blockIdx.x] = differs ? 1U : 0U;
}

}  // namespace

cudaError_t launch_fill_page_pattern(std::byte* slab, const KvLayout& layout, const std::uint32_t* pages,
                                     const std::uint64_t* identities, std::uint32_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (slab == nullptr || pages == nullptr || identities == nullptr) return cudaErrorInvalidValue;
  return launch(fill_page_pattern_kernel, dim3(count), dim3(kThreads), 0, stream, slab, layout, pages, identities);
}

cudaError_t launch_check_page_pattern(const std::byte* slab, const KvLayout& layout, const std::uint32_t* pages,
                                      const std::uint64_t* identities, std::uint32_t count, std::uint32_t* mismatched,
                                      cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (slab == nullptr || pages == nullptr || identities == nullptr || mismatched == nullptr) {
    return cudaErrorInvalidValue;
  }
  return launch(check_page_pattern_kernel, dim3(count), dim3(kThreads), 0, stream, slab, layout, pages, identities,
                mismatched);
}

}  // namespace kvtier::kernels
