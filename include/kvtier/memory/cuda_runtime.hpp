#pragma once
#include "kvtier/memory/runtime.hpp"

namespace kvtier::memory {

/// Runtime on a CUDA device: cudaMalloc slabs, cudaHostAlloc pinned (mapped,
/// portable) memory, non-blocking streams, timing-free events, batched
/// asynchronous copies (cudaMemcpyBatchAsync, falling back to cudaMemcpyAsync
/// per descriptor where the driver lacks it), NVTX ranges around transfers.
/// Every CUDA status is checked and turned into a CudaError naming the call.
/// Built only when CUDA is enabled; this header needs no CUDA headers.
class CudaRuntime final : public Runtime {
 public:
  /// Throws CudaError if the device cannot be selected.
  explicit CudaRuntime(int device = 0);

  /// Number of visible CUDA devices; 0 when there is no driver or device.
  static int device_count() noexcept;

  RuntimeKind kind() const noexcept override { return RuntimeKind::Cuda; }
  DeviceInfo device_info() const override;
  DeviceBuffer allocate_device(std::size_t bytes) override;
  PinnedBuffer allocate_pinned(std::size_t bytes) override;
  Stream create_stream() override;
  Stream create_priority_stream() override;
  Stream borrow_stream(void* native) override;
  Event create_event() override;
  int device() const noexcept { return device_; }

 private:
  int device_;
};

}  // namespace kvtier::memory
