#include "kvtier/memory/cuda_runtime.hpp"
#include "kvtier/core/expects.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <iostream>
#include <nvtx3/nvtx3.hpp>
#include <vector>

#include "kvtier/kernels/group_kernels.hpp"
#include "kvtier/kernels/kv_kernels.hpp"
#include "kvtier/memory/cuda_check.hpp"
#include "kvtier/memory/memory_budget.hpp"

namespace kvtier::memory {
namespace {

struct KvtierDomain {
  static constexpr const char* name{"kvtier"};
};
using ScopedRange = nvtx3::scoped_range_in<KvtierDomain>;

/// The device address of mapped pinned host memory (kernels read a write's
/// inputs there); null stays null.
template <class T>
const T* mapped(const T* host) {
  void* device = nullptr;
  if (host != nullptr) KVTIER_CUDA_CHECK(cudaHostGetDevicePointer(&device, const_cast<T*>(host), 0));
  return static_cast<const T*>(device);
}

/// Destructors must not throw: report a failed release and carry on.
void report_release_failure(cudaError_t status, const char* call) noexcept {
  if (status != cudaSuccess) std::cerr << "kvtier: " << call << " failed with " << cudaGetErrorName(status) << '\n';
}

/// Makes `device` current on the calling thread (streams and memory are per
/// device) and gives the caller's device back at the end of the scope.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    KVTIER_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) KVTIER_CUDA_CHECK(cudaSetDevice(device));
    changed_ = previous_ != device;
  }
  ~DeviceScope() {
    if (changed_) report_release_failure(cudaSetDevice(previous_), "cudaSetDevice (restoring the caller's device)");
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

/// Copies at most this large go to the copy engines when batched; larger
/// device-to-device copies are faster on the SMs (RMM and cuDF use the same bound).
constexpr std::size_t kSmallCopyBytes = 128 << 10;

class CudaEvent final : public detail::EventBackend {
 public:
  explicit CudaEvent(int device) {
    DeviceScope scope(device);
    KVTIER_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
  }
  ~CudaEvent() override { report_release_failure(cudaEventDestroy(event_), "cudaEventDestroy"); }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  EventStatus status() const override {
    const cudaError_t status = cudaEventQuery(event_);
    if (status == cudaSuccess) return EventStatus::Complete;
    if (status == cudaErrorNotReady) {
      detail::clear_expected_error(cudaErrorNotReady);  // "not yet" is an answer, not an error
      return EventStatus::Pending;
    }
    (void)cudaGetLastError();  // reported as Failed here; synchronize() throws it
    return EventStatus::Failed;
  }
  void synchronize() const override { KVTIER_CUDA_CHECK(cudaEventSynchronize(event_)); }
  cudaEvent_t handle() const noexcept { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

const CudaEvent& cuda_event(const detail::EventBackend& event) {
  const auto* cuda = dynamic_cast<const CudaEvent*>(&event);
  KVTIER_EXPECTS(cuda != nullptr, "event belongs to a different runtime than this CUDA stream");
  return *cuda;
}

class CudaStream final : public detail::StreamBackend {
 public:
  /// `high_priority`: the device's greatest stream priority.
  explicit CudaStream(int device, bool high_priority = false) : device_(device) {
    DeviceScope scope(device);
    int least = 0;
    int greatest = 0;
    KVTIER_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    // Non-blocking: never serialises with the legacy default stream.
    KVTIER_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, high_priority ? greatest : least));
  }
  /// A native stream someone else owns (Runtime::borrow_stream): never destroyed here.
  struct Borrowed {
    cudaStream_t stream;
  };
  CudaStream(int device, Borrowed borrowed) : device_(device), stream_(borrowed.stream), owned_(false) {}
  ~CudaStream() override {
    // The copy kernels' descriptor slots are freed below: what reads them must be done.
    report_release_failure(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    for (DescriptorSlot& slot : descriptor_slots_) {
      if (slot.read != nullptr) report_release_failure(cudaEventDestroy(slot.read), "cudaEventDestroy");
      if (slot.host != nullptr) report_release_failure(cudaFreeHost(slot.host), "cudaFreeHost");
    }
    if (owned_) report_release_failure(cudaStreamDestroy(stream_), "cudaStreamDestroy");
  }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  void copy_async(std::span<const CopyDescriptor> copies) override {
    std::vector<void*> dsts;
    std::vector<const void*> srcs;
    std::vector<std::size_t> sizes;
    for (std::size_t i = 0; i < copies.size(); ++i) {
      if (copies[i].bytes == 0) continue;
      KVTIER_EXPECTS(copies[i].src != nullptr && copies[i].dst != nullptr,
                     "copy descriptor " + std::to_string(i) + " has a null pointer");
      dsts.push_back(copies[i].dst);
      srcs.push_back(copies[i].src);
      sizes.push_back(copies[i].bytes);
    }
    if (sizes.empty()) return;
    ScopedRange range{"kvtier.copy_async"};
    DeviceScope scope(device_);
    if (sizes.size() == 1) {
      KVTIER_CUDA_CHECK(cudaMemcpyAsync(dsts[0], srcs[0], sizes[0], cudaMemcpyDefault, stream_));
      return;
    }
#if CUDART_VERSION >= 12080
    if (batch_supported_) {
      cudaMemcpyAttributes attributes{};
      attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      // Only small copies prefer the copy engines: from CUDA 13.1 the flag
      // forces them, far slower than the SMs for large device-to-device copies.
      const bool all_small =
          std::all_of(sizes.begin(), sizes.end(), [](std::size_t b) { return b <= kSmallCopyBytes; });
      attributes.flags = all_small ? cudaMemcpyFlagPreferOverlapWithCompute : cudaMemcpyFlagDefault;
      std::size_t attribute_index = 0;
      const cudaError_t status = cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), sizes.size(), &attributes,
                                                      &attribute_index, 1, stream_);
      if (status == cudaSuccess) return;
      // Only a driver without the batch API falls back; any other refusal is
      // an error, and nothing was enqueued.
      if (status != cudaErrorNotSupported) detail::throw_cuda_error(status, "cudaMemcpyBatchAsync", __FILE__, __LINE__);
      detail::clear_expected_error(cudaErrorNotSupported);
      batch_supported_ = false;
    }
#endif
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      KVTIER_CUDA_CHECK(cudaMemcpyAsync(dsts[i], srcs[i], sizes[i], cudaMemcpyDefault, stream_));
    }
  }

  void gather_async(std::span<const CopyDescriptor> copies) override {
    std::vector<CopyDescriptor> list;
    for (std::size_t i = 0; i < copies.size(); ++i) {
      if (copies[i].bytes == 0) continue;
      KVTIER_EXPECTS(copies[i].src != nullptr && copies[i].dst != nullptr,
                     "copy descriptor " + std::to_string(i) + " has a null pointer");
      list.push_back(copies[i]);
    }
    if (list.empty()) return;
    ScopedRange range{"kvtier.gather_async"};
    DeviceScope scope(device_);
    // The kernel reads its descriptors from mapped pinned memory; a slot is
    // rewritten only after the launch that read it has run.
    DescriptorSlot& slot = descriptor_slots_[next_descriptor_slot_++ % descriptor_slots_.size()];
    if (slot.read == nullptr) {
      KVTIER_CUDA_CHECK(cudaEventCreateWithFlags(&slot.read, cudaEventDisableTiming));
    } else {
      KVTIER_CUDA_CHECK(cudaEventSynchronize(slot.read));
    }
    const std::size_t bytes = list.size() * sizeof(CopyDescriptor);
    if (slot.capacity < bytes) {
      if (slot.host != nullptr) KVTIER_CUDA_CHECK(cudaFreeHost(slot.host));
      slot.host = nullptr;
      slot.capacity = 0;
      KVTIER_CUDA_CHECK(cudaHostAlloc(&slot.host, bytes, cudaHostAllocPortable | cudaHostAllocMapped));
      slot.capacity = bytes;
    }
    std::memcpy(slot.host, list.data(), bytes);
    void* device_list = nullptr;
    KVTIER_CUDA_CHECK(cudaHostGetDevicePointer(&device_list, slot.host, 0));
    if (multiprocessors_ == 0) {
      KVTIER_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount, device_));
    }
    KVTIER_CUDA_CHECK(kernels::launch_copy_pages(static_cast<const CopyDescriptor*>(device_list),
                                                 static_cast<std::uint32_t>(list.size()),
                                                 static_cast<std::uint32_t>(multiprocessors_), stream_));
    KVTIER_CUDA_CHECK(cudaEventRecord(slot.read, stream_));
  }

  void fill_async(void* dst, std::uint8_t value, std::size_t bytes) override {
    if (bytes == 0) return;
    KVTIER_EXPECTS(dst != nullptr, "fill of a null pointer");
    ScopedRange range{"kvtier.fill_async"};
    DeviceScope scope(device_);
    KVTIER_CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, stream_));
  }

  void write_kv_async(const KvWrite& write) override {
    check_kv_write(write);
    if (write.tokens == 0) return;
    ScopedRange range{"kvtier.write_kv_async"};
    DeviceScope scope(device_);
    // K, V and slots are read by the kernel through their mapped addresses.
    KVTIER_CUDA_CHECK(kernels::launch_write_kv(write.slab, *write.layout, write.layer, mapped(write.key),
                                               mapped(write.value), write.tokens, mapped(write.slots), stream_));
  }

  void paged_attention_async(const AttentionDecode& step) override {
    check_attention_decode(step);
    if (step.args.seqs == 0) return;
    ScopedRange range{"kvtier.paged_attention_async"};
    DeviceScope scope(device_);
    KVTIER_CUDA_CHECK(kernels::launch_paged_attention_decode(step.slab, *step.layout, step.args, stream_));
  }

  void write_group_kv_async(const GroupKvWrite& write) override {
    check_group_kv_write(write);
    if (write.tokens == 0) return;
    ScopedRange range{"kvtier.write_group_kv_async"};
    DeviceScope scope(device_);
    // The tokens' values and slots are read by the kernel through their mapped
    // addresses, or where they are when already on the device.
    const auto in = [&](const auto* p) { return write.inputs_on_device ? p : mapped(p); };
    const std::int64_t* slots = in(write.slots);
    if (write.pages.format.content == PageContent::MlaLatent) {
      KVTIER_CUDA_CHECK(kernels::launch_write_mla(write.slab, write.pages, write.layer, in(write.first),
                                                  in(write.second), write.tokens, slots, write.scales, stream_));
    } else {
      KVTIER_CUDA_CHECK(kernels::launch_write_group_kv(write.slab, write.pages, write.layer, in(write.first),
                                                       in(write.second), write.tokens, slots, write.scales, stream_));
    }
  }

  void group_attention_async(const GroupAttentionDecode& step) override {
    check_group_attention_decode(step);
    if (step.args.seqs == 0) return;
    ScopedRange range{"kvtier.group_attention_async"};
    DeviceScope scope(device_);
    KVTIER_CUDA_CHECK(kernels::launch_group_attention_decode(step.slab, step.pages, step.args, stream_));
  }

  void record(detail::EventBackend& event) override {
    KVTIER_CUDA_CHECK(cudaEventRecord(cuda_event(event).handle(), stream_));
  }

  void wait(const detail::EventBackend& event) override {
    KVTIER_CUDA_CHECK(cudaStreamWaitEvent(stream_, cuda_event(event).handle(), 0));
  }

  void synchronize() override { KVTIER_CUDA_CHECK(cudaStreamSynchronize(stream_)); }
  void* native_handle() const noexcept override { return stream_; }

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
  bool owned_ = true;
  bool batch_supported_ = true;
  struct DescriptorSlot {
    void* host = nullptr;  // mapped pinned memory the copy kernel reads
    std::size_t capacity = 0;
    cudaEvent_t read = nullptr;  // recorded after the launch that read it
  };
  std::array<DescriptorSlot, 4> descriptor_slots_{};
  std::size_t next_descriptor_slot_ = 0;
  int multiprocessors_ = 0;
};

}  // namespace

CudaRuntime::CudaRuntime(int device) : device_(device) { KVTIER_CUDA_CHECK(cudaSetDevice(device)); }

int CudaRuntime::device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

DeviceInfo CudaRuntime::device_info() const {
  DeviceScope scope(device_);
  cudaDeviceProp properties{};
  KVTIER_CUDA_CHECK(cudaGetDeviceProperties(&properties, device_));
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  KVTIER_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return DeviceInfo{.name = properties.name,
                    .total_bytes = total_bytes,
                    .free_bytes = free_bytes,
                    .ordinal = device_,
                    .compute_capability_major = properties.major,
                    .compute_capability_minor = properties.minor};
}

DeviceBuffer CudaRuntime::allocate_device(std::size_t bytes) {
  if (bytes == 0) return {};
  DeviceScope scope(device_);
  if (bytes >= kCheckedAllocationBytes) {
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    KVTIER_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    check_allocation_fits(bytes, free_bytes, "device", "free device memory");
  }
  void* data = nullptr;
  KVTIER_CUDA_CHECK(cudaMalloc(&data, bytes));
  DeviceBuffer buffer(data, bytes, [](void* p) { report_release_failure(cudaFree(p), "cudaFree"); });
  KVTIER_CUDA_CHECK(cudaMemset(data, 0, bytes));  // zero-filled, as on every runtime
  return buffer;
}

PinnedBuffer CudaRuntime::allocate_pinned(std::size_t bytes) {
  if (bytes == 0) return {};
  check_host_allocation(bytes, "pinned");  // before the memset below touches every page
  DeviceScope scope(device_);
  void* data = nullptr;
  // Mapped so copy kernels can read it directly; portable across devices.
  KVTIER_CUDA_CHECK(cudaHostAlloc(&data, bytes, cudaHostAllocPortable | cudaHostAllocMapped));
  PinnedBuffer buffer(data, bytes, [](void* p) { report_release_failure(cudaFreeHost(p), "cudaFreeHost"); });
  std::memset(data, 0, bytes);  // zero-filled, as on every runtime
  return buffer;
}

Stream CudaRuntime::create_stream() { return Stream(std::make_unique<CudaStream>(device_)); }

Stream CudaRuntime::create_priority_stream() { return Stream(std::make_unique<CudaStream>(device_, true)); }

Stream CudaRuntime::borrow_stream(void* native) {
  return Stream(std::make_unique<CudaStream>(device_, CudaStream::Borrowed{static_cast<cudaStream_t>(native)}));
}

Event CudaRuntime::create_event() { return Event(std::make_unique<CudaEvent>(device_)); }

}  // namespace kvtier::memory
