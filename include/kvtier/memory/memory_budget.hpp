#pragma once
// What an allocation may ask for: checked before a buffer is allocated and
// zero-filled, so a slab larger than the machine has is a clear AllocationError
// naming both sizes, not the kernel's OOM killer in the middle of a memset.
#include <cstddef>
#include <optional>

namespace kvtier::memory {

/// Host memory this process can still use: /proc/meminfo's MemAvailable, lowered
/// to the cgroup's room (memory.max - memory.current) where one is set;
/// nullopt where neither can be read.
std::optional<std::size_t> available_host_memory();

/// One allocation may take at most this share of the memory available
/// (the rest is the process's and the system's headroom).
inline constexpr double kMaxAllocationShare = 0.9;

/// Allocations below this size are not checked (nothing to gain, a file read to lose).
inline constexpr std::size_t kCheckedAllocationBytes = std::size_t{16} << 20;

/// AllocationError unless `bytes` fits kMaxAllocationShare of `available`
/// ("<what> allocation of N bytes (X GiB) exceeds ... of the Y GiB <where> available").
void check_allocation_fits(std::size_t bytes, std::size_t available, const char* what, const char* where);

/// check_allocation_fits against available_host_memory() (skipped when unknown
/// or `bytes` < kCheckedAllocationBytes).
void check_host_allocation(std::size_t bytes, const char* what);

}  // namespace kvtier::memory
