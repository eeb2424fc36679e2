// Scattered page copies on the GPU, each path next to the ceiling measured in
// the same run (one plain device-to-device copy of the same bytes):
// copy_pages with all SMs and with a cap, and the runtime's own batched copy
// (cudaMemcpyBatchAsync with the runtime's flags). Inputs are built once;
// each timed iteration is kRuns back-to-back copies between two events on a
// busy stream; every CUDA call is checked and the copied bytes are verified
// after timing. Without a device every benchmark reports an error.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "kvtier/kernels/kv_kernels.hpp"
#include "kvtier/memory/cuda_check.hpp"
#include "kvtier/memory/cuda_runtime.hpp"

namespace {

using kvtier::CopyDescriptor;

constexpr std::size_t kTotalBytes = std::size_t{256} << 20;  // per copy, each way
constexpr int kRuns = 8;                                     // copies between the two events

/// Device memory, chunk lists and timing events for one chunk size, built once.
struct Fixture {
  explicit Fixture(std::size_t chunk_bytes) : chunk(chunk_bytes), chunks(kTotalBytes / chunk_bytes) {
    runtime = std::make_unique<kvtier::memory::CudaRuntime>(0);
    source = runtime->allocate_device(kTotalBytes);
    target = runtime->allocate_device(kTotalBytes);
    stream = std::make_unique<kvtier::memory::Stream>(runtime->create_stream());
    KVTIER_CUDA_CHECK(cudaEventCreate(&start));
    KVTIER_CUDA_CHECK(cudaEventCreate(&stop));
    KVTIER_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    std::vector<std::uint8_t> bytes(kTotalBytes);
    std::mt19937_64 rng(7);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    KVTIER_CUDA_CHECK(cudaMemcpy(source.data(), bytes.data(), kTotalBytes, cudaMemcpyHostToDevice));
    order.resize(chunks);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(1));  // scattered destinations, like real pages
    for (std::size_t i = 0; i < chunks; ++i) {
      descriptors.push_back({source.bytes_data() + i * chunk, target.bytes_data() + order[i] * chunk, chunk});
    }
    // The same descriptors serve the kernel (from device memory) and the runtime's batched copy.
    device_list = runtime->allocate_device(descriptors.size() * sizeof(CopyDescriptor));
    KVTIER_CUDA_CHECK(cudaMemcpy(device_list.data(), descriptors.data(), descriptors.size() * sizeof(CopyDescriptor),
                                 cudaMemcpyHostToDevice));
  }
  ~Fixture() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  cudaStream_t native() const { return static_cast<cudaStream_t>(stream->native_handle()); }

  /// Whether the target holds the source permuted chunk by chunk (`scattered`)
  /// or as one block; the target is cleared afterwards for the next benchmark.
  bool verify(bool scattered) {
    std::vector<std::uint8_t> from(kTotalBytes), to(kTotalBytes);
    KVTIER_CUDA_CHECK(cudaMemcpy(from.data(), source.data(), kTotalBytes, cudaMemcpyDeviceToHost));
    KVTIER_CUDA_CHECK(cudaMemcpy(to.data(), target.data(), kTotalBytes, cudaMemcpyDeviceToHost));
    KVTIER_CUDA_CHECK(cudaMemset(target.data(), 0, kTotalBytes));
    if (!scattered) return from == to;
    for (std::size_t i = 0; i < chunks; ++i) {
      if (std::memcmp(from.data() + i * chunk, to.data() + order[i] * chunk, chunk) != 0) return false;
    }
    return true;
  }

  std::size_t chunk;
  std::size_t chunks;
  int sms = 0;
  std::unique_ptr<kvtier::memory::CudaRuntime> runtime;
  kvtier::memory::DeviceBuffer source;
  kvtier::memory::DeviceBuffer target;
  kvtier::memory::DeviceBuffer device_list;
  std::unique_ptr<kvtier::memory::Stream> stream;
  std::vector<std::size_t> order;
  std::vector<CopyDescriptor> descriptors;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
};

Fixture* fixture(std::size_t chunk_bytes) {
  static std::map<std::size_t, std::unique_ptr<Fixture>> fixtures;
  auto& slot = fixtures[chunk_bytes];
  if (!slot) slot = std::make_unique<Fixture>(chunk_bytes);
  return slot.get();
}

/// Times kRuns enqueues between two events per iteration; verifies afterwards.
template <class Enqueue>
void timed(benchmark::State& state, std::size_t chunk_bytes, bool scattered, Enqueue enqueue) {
  if (kvtier::memory::CudaRuntime::device_count() == 0) {
    state.SkipWithError("no CUDA device");
    return;
  }
  try {
    Fixture& f = *fixture(chunk_bytes);
    enqueue(f);  // warm-up, also checks the path works at all
    KVTIER_CUDA_CHECK(cudaStreamSynchronize(f.native()));
    for (auto _ : state) {
      KVTIER_CUDA_CHECK(cudaEventRecord(f.start, f.native()));
      for (int run = 0; run < kRuns; ++run) enqueue(f);
      KVTIER_CUDA_CHECK(cudaEventRecord(f.stop, f.native()));
      KVTIER_CUDA_CHECK(cudaEventSynchronize(f.stop));
      float ms = 0;
      KVTIER_CUDA_CHECK(cudaEventElapsedTime(&ms, f.start, f.stop));
      state.SetIterationTime(ms / 1000.0 / kRuns);
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kTotalBytes));
    state.counters["chunk_bytes"] = static_cast<double>(chunk_bytes);
    state.counters["sms"] = f.sms;
    if (!f.verify(scattered)) state.SkipWithError("the copied bytes differ from the source");
  } catch (const std::exception& error) {
    state.SkipWithError(error.what());
  }
}

void BM_PlainDeviceToDeviceCopy(benchmark::State& state) {
  timed(state, static_cast<std::size_t>(state.range(0)), false, [](Fixture& f) {
    KVTIER_CUDA_CHECK(
        cudaMemcpyAsync(f.target.data(), f.source.data(), kTotalBytes, cudaMemcpyDeviceToDevice, f.native()));
  });
}

/// range(1): the SM cap; 0 means every SM of the device.
void BM_CopyPagesKernel(benchmark::State& state) {
  timed(state, static_cast<std::size_t>(state.range(0)), true, [&state](Fixture& f) {
    const auto sms = static_cast<std::uint32_t>(state.range(1) == 0 ? f.sms : state.range(1));
    KVTIER_CUDA_CHECK(kvtier::kernels::launch_copy_pages(static_cast<const CopyDescriptor*>(f.device_list.data()),
                                                         static_cast<std::uint32_t>(f.chunks), sms, f.native()));
  });
}

void BM_RuntimeBatchedCopy(benchmark::State& state) {
  timed(state, static_cast<std::size_t>(state.range(0)), true, [](Fixture& f) { f.stream->copy_async(f.descriptors); });
}

BENCHMARK(BM_PlainDeviceToDeviceCopy)->Arg(64 << 10)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CopyPagesKernel)
    ->ArgsProduct({{16 << 10, 64 << 10, 2 << 20}, {0, 32, 8}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RuntimeBatchedCopy)
    ->Arg(16 << 10)
    ->Arg(64 << 10)
    ->Arg(2 << 20)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
