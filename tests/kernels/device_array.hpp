#pragma once
// A device copy of a host vector for the GPU kernel tests (label gpu).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace kvtier::kernels::testing {

template <class T>
struct DeviceArray {
  explicit DeviceArray(const std::vector<T>& host) : size(host.size()) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&data), std::max<std::size_t>(1, size) * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(data, host.data(), size * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  explicit DeviceArray(std::size_t n) : size(n) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&data), std::max<std::size_t>(1, n) * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemset(data, 0, n * sizeof(T)), cudaSuccess);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(data); }
  std::vector<T> to_host() const {
    std::vector<T> host(size);
    EXPECT_EQ(cudaMemcpy(host.data(), data, size * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }
  T* data = nullptr;
  std::size_t size;
};

}  // namespace kvtier::kernels::testing
