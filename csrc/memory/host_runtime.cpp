#include "kvtier/memory/host_runtime.hpp"

#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"
#include "kvtier/kernels/reference/write_group_kv.hpp"
#include "kvtier/kernels/reference/write_kv.hpp"
#include "kvtier/memory/memory_budget.hpp"

namespace kvtier::memory {

struct HostRuntime::FaultState {
  std::mutex mutex;
  FaultPlan plan;
  std::uint64_t copies = 0;
  std::uint64_t allocations = 0;

  bool next_copy_fails(std::uint64_t& number) {
    std::lock_guard lock(mutex);
    number = ++copies;
    return plan.fail_copy_number != 0 && number == plan.fail_copy_number;
  }
  bool next_allocation_fails(std::uint64_t& number) {
    std::lock_guard lock(mutex);
    number = ++allocations;
    return plan.fail_allocation_number != 0 && number == plan.fail_allocation_number;
  }
};

namespace {

constexpr std::size_t kAlignment = 256;  // what cudaMalloc guarantees, so layouts behave alike

/// Completion state shared by an event and the stream tasks that record it or
/// wait on it. Each record gets a generation; the event reflects the latest.
class HostEventState {
 public:
  std::uint64_t begin_record() {
    std::lock_guard lock(mutex_);
    return ++recorded_;
  }
  std::uint64_t latest_record() const {
    std::lock_guard lock(mutex_);
    return recorded_;
  }
  void complete(std::uint64_t generation, std::optional<std::string> failure) {
    {
      std::lock_guard lock(mutex_);
      if (generation <= completed_) return;  // an older record finishing late
      completed_ = generation;
      failure_ = std::move(failure);
    }
    done_.notify_all();
  }
  /// Blocks until record `generation` has completed; returns its failure, if any.
  std::optional<std::string> wait_for(std::uint64_t generation) const {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return completed_ >= generation; });
    return failure_;
  }
  EventStatus status() const {
    std::lock_guard lock(mutex_);
    if (completed_ < recorded_) return EventStatus::Pending;
    return failure_ ? EventStatus::Failed : EventStatus::Complete;
  }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable done_;
  std::uint64_t recorded_ = 0;
  std::uint64_t completed_ = 0;
  std::optional<std::string> failure_;
};

class HostEvent final : public detail::EventBackend {
 public:
  EventStatus status() const override { return state_->status(); }
  void synchronize() const override {
    if (auto failure = state_->wait_for(state_->latest_record())) throw TransferError(*failure);
  }
  const std::shared_ptr<HostEventState>& state() const noexcept { return state_; }

 private:
  std::shared_ptr<HostEventState> state_ = std::make_shared<HostEventState>();
};

const HostEvent& host_event(const detail::EventBackend& event) {
  const auto* host = dynamic_cast<const HostEvent*>(&event);
  KVTIER_EXPECTS(host != nullptr, "event belongs to a different runtime than this host stream");
  return *host;
}

// A batch this large is bound by memory, not cache: its stores stream past the
// cache (as glibc's memmove does for one huge copy), so a batch of many
// page-sized copies moves about as fast as one copy of the same bytes.
constexpr std::size_t kStreamingBatchBytes = std::size_t{32} << 20;
constexpr std::size_t kStreamingCopyBytes = 4096;

bool overlaps(const CopyDescriptor& copy) {
  const auto* src = static_cast<const std::byte*>(copy.src);
  const auto* dst = static_cast<const std::byte*>(copy.dst);
  return src < dst + copy.bytes && dst < src + copy.bytes;
}

void streaming_copy(void* dst, const void* src, std::size_t bytes) {
#if defined(__SSE2__)
  auto* out = static_cast<std::byte*>(dst);
  const auto* in = static_cast<const std::byte*>(src);
  const std::size_t head = (16 - reinterpret_cast<std::uintptr_t>(out) % 16) % 16;
  std::memcpy(out, in, head);
  out += head;
  in += head;
  bytes -= head;
  for (; bytes >= 64; bytes -= 64, out += 64, in += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(out), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + 48), d);
  }
  std::memcpy(out, in, bytes);
#else
  std::memmove(dst, src, bytes);
#endif
}

void copy_batch(const std::vector<CopyDescriptor>& batch) {
  std::size_t total = 0;
  for (const CopyDescriptor& copy : batch) total += copy.bytes;
  const bool streaming = total >= kStreamingBatchBytes;
  for (const CopyDescriptor& copy : batch) {
    if (copy.bytes == 0) continue;
    if (streaming && copy.bytes >= kStreamingCopyBytes && !overlaps(copy)) {
      streaming_copy(copy.dst, copy.src, copy.bytes);
    } else {
      std::memmove(copy.dst, copy.src, copy.bytes);
    }
  }
#if defined(__SSE2__)
  if (streaming) _mm_sfence();  // streamed stores are visible before the event completes
#endif
}

void check_copies(std::span<const CopyDescriptor> copies) {
  for (std::size_t i = 0; i < copies.size(); ++i) {
    KVTIER_EXPECTS(copies[i].bytes == 0 || (copies[i].src != nullptr && copies[i].dst != nullptr),
                   "copy descriptor " + std::to_string(i) + " has a null pointer");
  }
}

/// A worker thread running its queue in order. `failure_` (the first failure
/// since the last synchronize) is touched only by the worker.
class HostStream final : public detail::StreamBackend {
 public:
  explicit HostStream(std::shared_ptr<HostRuntime::FaultState> faults)
      : faults_(std::move(faults)), worker_([this] { run(); }) {}

  ~HostStream() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    worker_.join();  // drains the queue first: enqueued work always runs
  }

  void copy_async(std::span<const CopyDescriptor> copies) override {
    check_copies(copies);
    std::uint64_t number = 0;
    const bool fails = faults_->next_copy_fails(number);
    enqueue([this, fails, number, batch = std::vector<CopyDescriptor>(copies.begin(), copies.end())] {
      if (fails) {
        fail("injected fault: copy #" + std::to_string(number) + " failed");
        return;
      }
      copy_batch(batch);
    });
  }

  void fill_async(void* dst, std::uint8_t value, std::size_t bytes) override {
    KVTIER_EXPECTS(bytes == 0 || dst != nullptr, "fill of a null pointer");
    enqueue([dst, value, bytes] {
      if (bytes != 0) std::memset(dst, value, bytes);
    });
  }

  void write_kv_async(const KvWrite& write) override {
    check_kv_write(write);
    if (write.tokens == 0) return;
    const auto slots = static_cast<std::int64_t>(write.layout->capacity()) * write.layout->geometry().tokens_per_block;
    for (std::uint32_t t = 0; t < write.tokens; ++t) {
      KVTIER_EXPECTS(write.slots[t] < slots,
                     "write_kv: slot " + std::to_string(write.slots[t]) + " is outside the pool");
    }
    enqueue([this, write, layout = *write.layout] {
      try {  // the slots were checked, but a failure here must fail events, not the worker thread
        kernels::reference::write_kv(write.slab, layout, write.layer, write.key, write.value, write.tokens,
                                     write.slots);
      } catch (const std::exception& error) {
        fail(std::string("write_kv failed: ") + error.what());
      }
    });
  }

  void paged_attention_async(const AttentionDecode& step) override {
    check_attention_decode(step);
    if (step.args.seqs == 0) return;
    enqueue([this, step, layout = *step.layout] {
      try {  // tables and lengths are read now, as the kernel reads them: a bad one fails the step
        kernels::reference::paged_attention_decode(step.slab, layout, step.args);
      } catch (const std::exception& error) {
        fail(std::string("paged attention failed: ") + error.what());
      }
    });
  }

  void write_group_kv_async(const GroupKvWrite& write) override {
    check_group_kv_write(write);
    if (write.tokens == 0) return;
    for (std::uint32_t t = 0; t < write.tokens; ++t) {
      KVTIER_EXPECTS(write.slots[t] < 0 || static_cast<std::uint64_t>(write.slots[t]) < write.pages.slots(),
                     "write_group_kv: slot " + std::to_string(write.slots[t]) + " is outside the pool");
    }
    enqueue([this, write] {
      try {
        if (write.pages.format.content == PageContent::MlaLatent) {
          kernels::reference::write_mla(write.slab, write.pages, write.layer, write.first, write.second, write.tokens,
                                        write.slots, write.scales);
        } else {
          kernels::reference::write_group_kv(write.slab, write.pages, write.layer, write.first, write.second,
                                             write.tokens, write.slots, write.scales);
        }
      } catch (const std::exception& error) {
        fail(std::string("write_group_kv failed: ") + error.what());
      }
    });
  }

  void group_attention_async(const GroupAttentionDecode& step) override {
    check_group_attention_decode(step);
    if (step.args.seqs == 0) return;
    enqueue([this, step] {
      try {  // tables and lengths are read now, as the kernel reads them: a bad one fails the step
        kernels::reference::group_attention_decode(step.slab, step.pages, step.args);
      } catch (const std::exception& error) {
        fail(std::string("group attention failed: ") + error.what());
      }
    });
  }

  void record(detail::EventBackend& event) override {
    auto state = host_event(event).state();
    const std::uint64_t generation = state->begin_record();
    enqueue(
        [this, state, generation] { state->complete(generation, std::exchange(failure_since_record_, std::nullopt)); });
  }

  void wait(const detail::EventBackend& event) override {
    auto state = host_event(event).state();
    const std::uint64_t generation = state->latest_record();
    if (generation == 0) return;  // never recorded: nothing to wait for
    enqueue([this, state, generation] {
      if (auto failure = state->wait_for(generation)) fail("waited-on event failed: " + *failure);
    });
  }

  void synchronize() override {
    std::promise<std::optional<std::string>> outcome;
    auto result = outcome.get_future();
    enqueue([this, &outcome] { outcome.set_value(std::exchange(failure_, std::nullopt)); });
    if (auto failure = result.get()) throw TransferError(*failure);
  }

 private:
  void fail(std::string message) {
    if (!failure_since_record_) failure_since_record_ = message;
    if (!failure_) failure_ = std::move(message);
  }

  void enqueue(std::function<void()> task) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(task));
    }
    wake_.notify_one();
  }

  void run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  std::shared_ptr<HostRuntime::FaultState> faults_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::optional<std::string> failure_;  // since the last synchronize
  // Since the last record: an event fails only for the work between its
  // record and the one before, so one failed transfer does not fail the next.
  std::optional<std::string> failure_since_record_;
  std::thread worker_;  // last: starts after every other member exists
};

}  // namespace

HostRuntime::HostRuntime() : faults_(std::make_shared<FaultState>()) {}
HostRuntime::~HostRuntime() = default;

void HostRuntime::inject_faults(FaultPlan plan) {
  std::lock_guard lock(faults_->mutex);
  faults_->plan = plan;
  faults_->copies = 0;
  faults_->allocations = 0;
}

DeviceInfo HostRuntime::device_info() const {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return DeviceInfo{
      .name = "host memory (no GPU)",
      .total_bytes = static_cast<std::size_t>(sysconf(_SC_PHYS_PAGES)) * page,
      // What allocations are checked against (MemAvailable, the cgroup's room), not MemFree.
      .free_bytes = available_host_memory().value_or(static_cast<std::size_t>(sysconf(_SC_AVPHYS_PAGES)) * page),
  };
}

void* HostRuntime::allocate(std::size_t bytes, const char* what) {
  std::uint64_t number = 0;
  if (faults_->next_allocation_fails(number)) {
    throw AllocationError(std::string("injected fault: ") + what + " allocation #" + std::to_string(number) + " of " +
                          std::to_string(bytes) + " bytes failed");
  }
  if (bytes == 0) return nullptr;
  if (bytes > std::numeric_limits<std::size_t>::max() - kAlignment) {
    throw AllocationError(std::string(what) + " allocation of " + std::to_string(bytes) + " bytes is impossible");
  }
  check_host_allocation(bytes, what);  // before the memset below touches every page
  const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* data = std::aligned_alloc(kAlignment, rounded);
  if (data == nullptr) {
    throw AllocationError(std::string(what) + " allocation of " + std::to_string(bytes) + " bytes failed");
  }
  std::memset(data, 0, rounded);  // deterministic contents: a never-written page never matches a pattern
  return data;
}

DeviceBuffer HostRuntime::allocate_device(std::size_t bytes) {
  return DeviceBuffer(allocate(bytes, "device"), bytes, [](void* p) { std::free(p); });
}

PinnedBuffer HostRuntime::allocate_pinned(std::size_t bytes) {
  return PinnedBuffer(allocate(bytes, "pinned"), bytes, [](void* p) { std::free(p); });
}

Stream HostRuntime::create_stream() { return Stream(std::make_unique<HostStream>(faults_)); }

Event HostRuntime::create_event() { return Event(std::make_unique<HostEvent>()); }

}  // namespace kvtier::memory
