#pragma once
// Heap bytes at the alignment O_DIRECT I/O needs, released with std::free:
// the disk tier's slot, header and scan buffers and the disk bench's.
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "kvtier/core/errors.hpp"

namespace kvtier {

struct AlignedFree {
  void operator()(std::byte* p) const noexcept { std::free(p); }
};
using AlignedBytes = std::unique_ptr<std::byte[], AlignedFree>;

/// `bytes` zeroed bytes at `alignment` (`bytes` a multiple of it);
/// AllocationError naming `what` when the memory is not there.
inline AlignedBytes allocate_aligned(std::size_t alignment, std::size_t bytes, const std::string& what) {
  AlignedBytes out(static_cast<std::byte*>(std::aligned_alloc(alignment, bytes)));
  if (!out) throw AllocationError("cannot allocate " + what);
  std::memset(out.get(), 0, bytes);
  return out;
}

}  // namespace kvtier
