#pragma once
#include <array>
#include <cstdint>
#include <span>

#include "kvtier/core/strong_id.hpp"
#include "kvtier/memory/runtime.hpp"

namespace kvtier::memory {

/// What one build made: device tensors that work on the build's stream (or
/// waiting on it) reads, rewritten by the next build on that stream.
struct DeviceBlockTables {
  const std::int32_t* tables = nullptr;    // [rows, columns] page ids, -1 padding
  const std::int32_t* seq_lens = nullptr;  // [rows]; null when the build was given none
  std::uint32_t rows = 0;
  std::uint32_t columns = 0;
};

/// Packs the block tables of the running requests (and their lengths) into
/// padded int32 device tensors with a single host-to-device copy per step
/// from pinned staging, as an engine's persistent block table does. Staging
/// is double-buffered: a build waits only for the copy made two builds ago
/// before reusing its buffer; it never allocates.
class BlockTableBuilder {
 public:
  /// ConfigError for no rows or no blocks.
  BlockTableBuilder(Runtime& runtime, std::uint32_t max_rows, std::uint32_t max_blocks);

  /// `columns` 0: as many as the longest table (at least 1), which keeps a
  /// kernel's per-sequence scratch small; otherwise that many. `seq_lens`:
  /// none, or one per table. Throws ContractError (too many rows, a table
  /// longer than the columns or max_blocks, a length count that does not
  /// match) before enqueuing anything.
  DeviceBlockTables build(std::span<const std::span<const PageId>> tables, Stream& stream,
                          std::span<const std::int32_t> seq_lens = {}, std::uint32_t columns = 0);

  std::uint32_t max_rows() const noexcept { return max_rows_; }
  std::uint32_t max_blocks() const noexcept { return max_blocks_; }

 private:
  std::uint32_t max_rows_;
  std::uint32_t max_blocks_;
  // Staging and device share one layout: [max_rows lengths][rows x columns tables].
  DeviceBuffer device_;
  std::array<PinnedBuffer, 2> staging_;
  std::array<Event, 2> copied_;
  std::size_t next_ = 0;
};

}  // namespace kvtier::memory
