#pragma once
#include <atomic>
#include <cstdint>
#include <memory>

#include "kvtier/memory/runtime.hpp"

namespace kvtier::memory {

/// Faults HostRuntime injects for reliability tests. Numbers count from 1 since
/// the plan was installed; 0 disables that fault.
struct HostFaultPlan {
  /// The Nth Stream::copy_async call fails when it runs: nothing is copied,
  /// and the failure surfaces as TransferError through events recorded after
  /// it and through the stream's synchronize().
  std::uint64_t fail_copy_number = 0;
  /// The Nth allocation (device or pinned) throws AllocationError.
  std::uint64_t fail_allocation_number = 0;
};

/// The CPU implementation of Runtime (not a mock): memory is real host memory,
/// each stream is a worker thread that runs its queue in order, events
/// complete when the work before them has run, and cross-stream waits block
/// the waiting stream's worker.
class HostRuntime final : public Runtime {
 public:
  HostRuntime();
  ~HostRuntime() override;

  RuntimeKind kind() const noexcept override { return RuntimeKind::Host; }
  DeviceInfo device_info() const override;
  DeviceBuffer allocate_device(std::size_t bytes) override;
  PinnedBuffer allocate_pinned(std::size_t bytes) override;
  Stream create_stream() override;
  Event create_event() override;

  /// Installs a fault plan and restarts its counters.
  void inject_faults(HostFaultPlan plan);

  struct FaultState;

 private:
  void* allocate(std::size_t bytes, const char* what);
  std::shared_ptr<FaultState> faults_;
};

}  // namespace kvtier::memory
