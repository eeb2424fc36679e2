// copy_pages against a plain device-to-device copy of the same bytes, and
// against the batched copy API, for scattered 64 KiB chunks (the issue's
// target: copy_pages >= 80% of the plain copy). GPU time from CUDA events;
// without a device every benchmark reports an error and measures nothing.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "kvtier/kernels/kv_kernels.hpp"

namespace {

using kvtier::kernels::PageChunkCopy;

constexpr std::size_t kChunk = 64 << 10;
constexpr std::size_t kChunks = 4096;  // 256 MiB each way

struct Buffers {
  Buffers() {
    ok = cudaMalloc(&source, kChunk * kChunks) == cudaSuccess && cudaMalloc(&target, kChunk * kChunks) == cudaSuccess &&
         cudaMalloc(reinterpret_cast<void**>(&chunks), kChunks * sizeof(PageChunkCopy)) == cudaSuccess &&
         cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess &&
         cudaEventCreate(&start) == cudaSuccess && cudaEventCreate(&stop) == cudaSuccess;
    if (!ok) return;
    std::vector<std::size_t> order(kChunks);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(1));  // scattered destinations, like real pages
    for (std::size_t i = 0; i < kChunks; ++i) {
      host_chunks.push_back({static_cast<char*>(source) + i * kChunk, static_cast<char*>(target) + order[i] * kChunk, kChunk});
    }
    ok = cudaMemcpy(chunks, host_chunks.data(), kChunks * sizeof(PageChunkCopy), cudaMemcpyHostToDevice) == cudaSuccess;
  }
  ~Buffers() {
    cudaFree(source);
    cudaFree(target);
    cudaFree(chunks);
    if (stream) cudaStreamDestroy(stream);
  }
  bool ok = false;
  void* source = nullptr;
  void* target = nullptr;
  PageChunkCopy* chunks = nullptr;
  std::vector<PageChunkCopy> host_chunks;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
};

Buffers* buffers() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) return nullptr;
  static Buffers b;
  return b.ok ? &b : nullptr;
}

template <class Enqueue>
void timed(benchmark::State& state, Enqueue enqueue) {
  Buffers* b = buffers();
  if (b == nullptr) {
    state.SkipWithError("no CUDA device");
    return;
  }
  for (auto _ : state) {
    cudaEventRecord(b->start, b->stream);
    enqueue(*b);
    cudaEventRecord(b->stop, b->stream);
    cudaEventSynchronize(b->stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, b->start, b->stop);
    state.SetIterationTime(ms / 1000.0);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kChunk * kChunks));
}

void BM_PlainDeviceToDeviceCopy(benchmark::State& state) {
  timed(state, [](Buffers& b) { cudaMemcpyAsync(b.target, b.source, kChunk * kChunks, cudaMemcpyDeviceToDevice, b.stream); });
}
void BM_CopyPagesKernel(benchmark::State& state) {
  const auto sms = static_cast<std::uint32_t>(state.range(0));
  timed(state, [sms](Buffers& b) { kvtier::kernels::launch_copy_pages(b.chunks, kChunks, sms, b.stream); });
}
void BM_MemcpyBatchAsync(benchmark::State& state) {
  timed(state, [](Buffers& b) {
    std::vector<void*> dsts;
    std::vector<const void*> srcs;
    std::vector<std::size_t> sizes;
    for (const auto& c : b.host_chunks) {
      dsts.push_back(c.dst);
      srcs.push_back(c.src);
      sizes.push_back(c.bytes);
    }
    cudaMemcpyAttributes attributes{};
    attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    std::size_t index = 0;
    cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), sizes.size(), &attributes, &index, 1, b.stream);
  });
}
BENCHMARK(BM_PlainDeviceToDeviceCopy)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CopyPagesKernel)->Arg(132)->Arg(32)->Arg(8)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MemcpyBatchAsync)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace
