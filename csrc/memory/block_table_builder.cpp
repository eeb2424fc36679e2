#include "kvtier/memory/block_table_builder.hpp"

#include <algorithm>
#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::memory {
namespace {

std::size_t table_bytes(std::uint32_t rows, std::uint32_t blocks) {
  if (rows == 0 || blocks == 0) throw ConfigError("a block table needs at least one row and one block");
  return std::size_t{rows} * blocks * sizeof(std::int32_t);
}

}  // namespace

BlockTableBuilder::BlockTableBuilder(Runtime& runtime, std::uint32_t max_rows, std::uint32_t max_blocks)
    : max_rows_(max_rows),
      max_blocks_(max_blocks),
      device_(runtime.allocate_device(table_bytes(max_rows, max_blocks))),
      staging_{runtime.allocate_pinned(table_bytes(max_rows, max_blocks)),
               runtime.allocate_pinned(table_bytes(max_rows, max_blocks))},
      copied_{runtime.create_event(), runtime.create_event()} {}

const std::int32_t* BlockTableBuilder::build(std::span<const std::span<const PageId>> tables, Stream& stream) {
  KVTIER_EXPECTS(tables.size() <= max_rows_, "block table: " + std::to_string(tables.size()) + " rows exceed the " +
                                                 std::to_string(max_rows_) + " it was built for");
  for (std::size_t row = 0; row < tables.size(); ++row) {
    KVTIER_EXPECTS(tables[row].size() <= max_blocks_, "block table: row " + std::to_string(row) + " has " +
                                                          std::to_string(tables[row].size()) + " blocks, more than " +
                                                          std::to_string(max_blocks_));
  }
  // The copy that read this staging buffer two builds ago must be done.
  copied_[next_].synchronize();
  auto* staged = static_cast<std::int32_t*>(staging_[next_].data());
  for (std::size_t row = 0; row < tables.size(); ++row) {
    std::int32_t* out = staged + row * max_blocks_;
    std::transform(tables[row].begin(), tables[row].end(), out,
                   [](PageId page) { return static_cast<std::int32_t>(page.value()); });
    std::fill(out + tables[row].size(), out + max_blocks_, -1);
  }
  const std::size_t bytes = std::max<std::size_t>(tables.size(), 1) * max_blocks_ * sizeof(std::int32_t);
  if (tables.empty()) std::fill(staged, staged + max_blocks_, -1);
  stream.copy_async(CopyDescriptor{staged, device_.data(), bytes});
  stream.record(copied_[next_]);
  next_ ^= 1;
  return device_table();
}

}  // namespace kvtier::memory
