#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "kvtier/core/copy_descriptor.hpp"
#include "kvtier/core/kv_layout.hpp"
#include "kvtier/kernels/reference/paged_attention.hpp"
#include "kvtier/memory/group_work.hpp"

namespace kvtier::memory {

enum class RuntimeKind : std::uint8_t { Host, Cuda };
const char* runtime_kind_name(RuntimeKind kind) noexcept;

/// An asynchronous copy's descriptor: its pointers stay valid until the copy
/// has completed (an event recorded after it is complete).
using kvtier::CopyDescriptor;

enum class EventStatus : std::uint8_t { Pending, Complete, Failed };

/// One layer's K/V of `tokens` new tokens written into a pool's pages, as
/// vLLM's reshape_and_cache does: key/value are [tokens, kv_heads, head_dim]
/// floats and slots[t] = page * block_size + offset (< 0: padding). key,
/// value and slots live in pinned host memory (the CUDA kernel reads them
/// mapped) and stay valid, like a copy's pointers, until the write completed.
struct KvWrite {
  std::byte* slab = nullptr;
  const KvLayout* layout = nullptr;
  std::uint32_t layer = 0;
  const float* key = nullptr;
  const float* value = nullptr;
  std::uint32_t tokens = 0;
  const std::int64_t* slots = nullptr;
};
/// Throws ContractError for a write no runtime may enqueue: a null pointer or
/// a layer outside the layout (slots are the runtime's to bound).
void check_kv_write(const KvWrite& write);

/// One decode step of paged attention over a pool's pages (semantics:
/// kernels/reference/paged_attention.hpp). Every pointer in `args` is the
/// runtime's device memory (host memory on HostRuntime) and stays valid,
/// like a copy's, until the step completed; the block tables and lengths may
/// be written by earlier work on the same stream (BlockTableBuilder).
struct AttentionDecode {
  const std::byte* slab = nullptr;
  const KvLayout* layout = nullptr;
  kernels::PagedAttentionArgs args;
};
/// Throws ContractError for a step no runtime may enqueue: a null pointer, a
/// query-head count that is not a multiple of the KV heads, a layer outside
/// the layout, no block-table column. Tables and lengths are device data:
/// the runtime bounds them when the step runs.
void check_attention_decode(const AttentionDecode& step);

struct DeviceInfo {
  std::string name;
  std::size_t total_bytes = 0;
  std::size_t free_bytes = 0;
  int ordinal = 0;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
};

/// Move-only owner of one allocation; the release function runs exactly once,
/// in the destructor, and never throws.
template <class Tag>
class OwnedMemory {
 public:
  using Release = std::function<void(void*) /*noexcept*/>;
  OwnedMemory() = default;
  OwnedMemory(void* data, std::size_t bytes, Release release)
      : data_(data), bytes_(bytes), release_(std::move(release)) {}
  OwnedMemory(OwnedMemory&& other) noexcept { swap(other); }
  OwnedMemory& operator=(OwnedMemory&& other) noexcept {
    OwnedMemory(std::move(other)).swap(*this);
    return *this;
  }
  OwnedMemory(const OwnedMemory&) = delete;
  OwnedMemory& operator=(const OwnedMemory&) = delete;
  ~OwnedMemory() {
    if (data_ && release_) release_(data_);
  }

  void* data() const noexcept { return data_; }
  std::byte* bytes_data() const noexcept { return static_cast<std::byte*>(data_); }
  std::size_t size() const noexcept { return bytes_; }
  explicit operator bool() const noexcept { return data_ != nullptr; }

 private:
  void swap(OwnedMemory& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    std::swap(release_, other.release_);
  }
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  Release release_;
};

struct DeviceMemoryTag;
struct PinnedMemoryTag;
/// Device memory (a G1 slab). On HostRuntime it is ordinary host memory.
using DeviceBuffer = OwnedMemory<DeviceMemoryTag>;
/// Page-locked host memory, the source/target of fast asynchronous copies.
using PinnedBuffer = OwnedMemory<PinnedMemoryTag>;

namespace detail {
class EventBackend {
 public:
  virtual ~EventBackend() = default;
  virtual EventStatus status() const = 0;
  virtual void synchronize() const = 0;
};

class StreamBackend {
 public:
  virtual ~StreamBackend() = default;
  virtual void copy_async(std::span<const CopyDescriptor> copies) = 0;
  /// Default: the copy engines' path (HostRuntime has no other).
  virtual void gather_async(std::span<const CopyDescriptor> copies) { copy_async(copies); }
  virtual void fill_async(void* dst, std::uint8_t value, std::size_t bytes) = 0;
  virtual void write_kv_async(const KvWrite& write) = 0;
  virtual void paged_attention_async(const AttentionDecode& step) = 0;
  virtual void write_group_kv_async(const GroupKvWrite& write) = 0;
  virtual void group_attention_async(const GroupAttentionDecode& step) = 0;
  virtual void record(EventBackend& event) = 0;
  virtual void wait(const EventBackend& event) = 0;
  virtual void synchronize() = 0;
  virtual void* native_handle() const noexcept { return nullptr; }
};
}  // namespace detail

/// A completion marker. Recording it on a stream makes it pending until all
/// work enqueued on that stream before the record has run. An event never
/// recorded is Complete. If any of that work failed the event is Failed: on
/// HostRuntime only work since the previous record on that stream counts, so
/// each transfer bracketed by its own record fails alone; CUDA's asynchronous
/// errors are sticky and fail every later event.
class Event {
 public:
  explicit Event(std::unique_ptr<detail::EventBackend> backend) : backend_(std::move(backend)) {}
  EventStatus status() const { return backend_->status(); }
  bool ready() const { return status() != EventStatus::Pending; }
  /// Blocks until complete; throws TransferError / CudaError if the work failed.
  void synchronize() const { backend_->synchronize(); }
  detail::EventBackend& backend() const noexcept { return *backend_; }

 private:
  std::unique_ptr<detail::EventBackend> backend_;
};

/// An in-order queue of asynchronous work. Work on different streams runs
/// concurrently unless ordered with events. Enqueue calls validate their
/// arguments and throw before enqueuing anything; failures while the work runs
/// surface through events recorded later and through synchronize().
class Stream {
 public:
  explicit Stream(std::unique_ptr<detail::StreamBackend> backend) : backend_(std::move(backend)) {}

  /// One batched operation: the descriptors may run in any order relative to
  /// each other (they must not overlap), but all after earlier work.
  void copy_async(std::span<const CopyDescriptor> copies) { backend_->copy_async(copies); }
  void copy_async(const CopyDescriptor& copy) { backend_->copy_async(std::span<const CopyDescriptor>(&copy, 1)); }
  /// The same copies moved by the device's compute units — one copy kernel
  /// launch — instead of one copy-engine descriptor each: faster for many
  /// small chunks between device memory and mapped pinned memory. Same
  /// ordering and failure rules as copy_async. HostRuntime: copy_async.
  void gather_async(std::span<const CopyDescriptor> copies) { backend_->gather_async(copies); }
  void fill_async(void* dst, std::uint8_t value, std::size_t bytes) { backend_->fill_async(dst, value, bytes); }
  /// Writes one layer's K/V of new tokens through their slots: the write_kv
  /// kernel on CUDA, its CPU reference on HostRuntime. Throws ContractError
  /// (null pointer, layer outside the layout; HostRuntime also a slot past
  /// the pool) before enqueuing anything; the CUDA kernel never writes a
  /// slot past the pool.
  void write_kv_async(const KvWrite& write) { backend_->write_kv_async(write); }
  /// One decode step of paged attention through device block tables: the
  /// paged-attention kernel on CUDA, its CPU reference on HostRuntime.
  /// Throws ContractError (check_attention_decode) before enqueuing
  /// anything. Tables and lengths are read when the step runs: CUDA clamps a
  /// length past its table and skips pages outside the pool; HostRuntime
  /// refuses them, failing the step (TransferError through later events and
  /// synchronize()) with nothing written to `out`.
  void paged_attention_async(const AttentionDecode& step) { backend_->paged_attention_async(step); }
  /// Writes new tokens into a KV cache group's pages in its page format
  /// (the group kernels, or their CPU references on HostRuntime).
  void write_group_kv_async(const GroupKvWrite& write) { backend_->write_group_kv_async(write); }
  /// One decode step of attention over a KV cache group's pages.
  void group_attention_async(const GroupAttentionDecode& step) { backend_->group_attention_async(step); }
  void record(Event& event) { backend_->record(event.backend()); }
  /// Later work on this stream waits for the event's most recent record.
  void wait(const Event& event) { backend_->wait(event.backend()); }
  /// Blocks until all enqueued work ran; throws if any of it failed since the
  /// last synchronize.
  void synchronize() { backend_->synchronize(); }
  /// The native stream (a cudaStream_t on CUDA; null on the host runtime), so
  /// kernels launched by the caller are ordered with this stream's copies.
  /// Borrowed: valid while this Stream lives.
  void* native_handle() const noexcept { return backend_->native_handle(); }

 private:
  std::unique_ptr<detail::StreamBackend> backend_;
};

/// Faults a runtime injects for reliability tests and the script. Numbers
/// count from 1 since the plan was installed; 0 disables that fault.
struct FaultPlan {
  /// The Nth Stream::copy_async call fails when it runs: nothing is copied,
  /// and the failure surfaces as TransferError through events recorded after
  /// it and through the stream's synchronize().
  std::uint64_t fail_copy_number = 0;
  /// The Nth allocation (device or pinned) throws AllocationError.
  std::uint64_t fail_allocation_number = 0;
};

/// What a runtime that can fail on demand offers (HostRuntime; a CUDA copy
/// cannot be made to fail without corrupting the context).
class FaultInjector {
 public:
  /// Installs a plan and restarts its counters.
  virtual void inject_faults(FaultPlan plan) = 0;

 protected:
  ~FaultInjector() = default;
};

/// The device behind one small interface (DESIGN.md rule 2): memory, streams,
/// events and asynchronous copies. Implementations: HostRuntime, CudaRuntime.
/// Objects it creates must not outlive it.
class Runtime {
 public:
  virtual ~Runtime() = default;
  virtual RuntimeKind kind() const noexcept = 0;
  virtual DeviceInfo device_info() const = 0;
  /// Zero-filled memory on every runtime. Throws AllocationError (host) or
  /// CudaError (CUDA); never returns null for bytes > 0.
  virtual DeviceBuffer allocate_device(std::size_t bytes) = 0;
  virtual PinnedBuffer allocate_pinned(std::size_t bytes) = 0;
  virtual Stream create_stream() = 0;
  /// A stream whose work the device schedules ahead of other streams' where it
  /// can (CUDA: the greatest stream priority): swap-ins that requests wait on.
  /// HostRuntime: every stream has its own worker already, so create_stream().
  virtual Stream create_priority_stream() { return create_stream(); }
  virtual Event create_event() = 0;
  /// A Stream over a native stream someone else owns (a cudaStream_t, e.g.
  /// torch.cuda.current_stream().cuda_stream; null = the legacy default
  /// stream), so kvtier's work is ordered with theirs. It never destroys the
  /// native stream; the owner keeps it alive past the Stream. ContractError
  /// on a runtime without native streams (HostRuntime).
  virtual Stream borrow_stream(void* native);
  /// Fault injection, or nullptr where this runtime has none.
  virtual FaultInjector* faults() noexcept { return nullptr; }
};

}  // namespace kvtier::memory
