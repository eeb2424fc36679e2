#pragma once
#include <array>
#include <cstdint>
#include <span>

#include "kvtier/core/strong_id.hpp"
#include "kvtier/memory/runtime.hpp"

namespace kvtier::memory {

/// Packs the block tables of the running requests into one padded int32
/// device tensor [rows, max_blocks] (padding -1) with a single host-to-device
/// copy per step from pinned staging. Staging is double-buffered: a build
/// waits only for the copy made two builds ago before reusing its buffer.
/// Kernels that read the tensor must run on the build's stream (or wait on
/// it); the tensor is rewritten by the next build on that stream.
class BlockTableBuilder {
 public:
  BlockTableBuilder(Runtime& runtime, std::uint32_t max_rows, std::uint32_t max_blocks);

  /// Throws ContractError (too many rows, a table longer than max_blocks)
  /// before enqueuing anything. Returns the device tensor.
  const std::int32_t* build(std::span<const std::span<const PageId>> tables, Stream& stream);

  std::uint32_t max_rows() const noexcept { return max_rows_; }
  std::uint32_t max_blocks() const noexcept { return max_blocks_; }
  const std::int32_t* device_table() const noexcept { return static_cast<const std::int32_t*>(device_.data()); }

 private:
  std::uint32_t max_rows_;
  std::uint32_t max_blocks_;
  DeviceBuffer device_;
  std::array<PinnedBuffer, 2> staging_;
  std::array<Event, 2> copied_;
  std::size_t next_ = 0;
};

}  // namespace kvtier::memory
