#pragma once
#include <atomic>
#include <cstdint>
#include <memory>

#include "kvtier/memory/runtime.hpp"

namespace kvtier::memory {

/// The CPU implementation of Runtime (not a mock): memory is real host memory,
/// each stream is a worker thread that runs its queue in order, events
/// complete when the work before them has run, and cross-stream waits block
/// the waiting stream's worker.
class HostRuntime final : public Runtime, public FaultInjector {
 public:
  HostRuntime();
  ~HostRuntime() override;

  RuntimeKind kind() const noexcept override { return RuntimeKind::Host; }
  DeviceInfo device_info() const override;
  DeviceBuffer allocate_device(std::size_t bytes) override;
  PinnedBuffer allocate_pinned(std::size_t bytes) override;
  Stream create_stream() override;
  Event create_event() override;

  FaultInjector* faults() noexcept override { return this; }
  void inject_faults(FaultPlan plan) override;

  struct FaultState;

 private:
  void* allocate(std::size_t bytes, const char* what);
  std::shared_ptr<FaultState> faults_;
};

}  // namespace kvtier::memory
