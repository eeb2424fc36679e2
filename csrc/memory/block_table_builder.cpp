#include "kvtier/memory/block_table_builder.hpp"

#include <algorithm>
#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::memory {
namespace {

std::size_t staging_bytes(std::uint32_t rows, std::uint32_t blocks) {
  if (rows == 0 || blocks == 0) throw ConfigError("a block table needs at least one row and one block");
  return (std::size_t{rows} + std::size_t{rows} * blocks) * sizeof(std::int32_t);
}

}  // namespace

BlockTableBuilder::BlockTableBuilder(Runtime& runtime, std::uint32_t max_rows, std::uint32_t max_blocks)
    : max_rows_(max_rows),
      max_blocks_(max_blocks),
      device_(runtime.allocate_device(staging_bytes(max_rows, max_blocks))),
      staging_{runtime.allocate_pinned(staging_bytes(max_rows, max_blocks)),
               runtime.allocate_pinned(staging_bytes(max_rows, max_blocks))},
      copied_{runtime.create_event(), runtime.create_event()} {}

DeviceBlockTables BlockTableBuilder::build(std::span<const std::span<const PageId>> tables, Stream& stream,
                                           std::span<const std::int32_t> seq_lens, std::uint32_t columns) {
  KVTIER_EXPECTS(tables.size() <= max_rows_, "block table: ", tables.size(), " rows exceed the ", max_rows_,
                 " it was built for");
  KVTIER_EXPECTS(seq_lens.empty() || seq_lens.size() == tables.size(), "block table: ", seq_lens.size(),
                 " sequence lengths for ", tables.size(), " rows");
  std::size_t longest = 0;
  for (const auto table : tables) longest = std::max(longest, table.size());
  const std::size_t width = columns != 0 ? columns : std::max<std::size_t>(longest, 1);
  KVTIER_EXPECTS(width <= max_blocks_, "block table: ", width, " columns exceed the ", max_blocks_,
                 " it was built for");
  KVTIER_EXPECTS(longest <= width, "block table: a row of ", longest, " blocks does not fit ", width, " columns");
  // The copy that read this staging buffer two builds ago must be done.
  copied_[next_].synchronize();
  auto* lengths = static_cast<std::int32_t*>(staging_[next_].data());
  std::int32_t* staged = lengths + max_rows_;
  std::copy(seq_lens.begin(), seq_lens.end(), lengths);
  for (std::size_t row = 0; row < tables.size(); ++row) {
    std::int32_t* out = staged + row * width;
    std::transform(tables[row].begin(), tables[row].end(), out,
                   [](PageId page) { return static_cast<std::int32_t>(page.value()); });
    std::fill(out + tables[row].size(), out + width, -1);
  }
  const std::size_t bytes = (max_rows_ + tables.size() * width) * sizeof(std::int32_t);
  stream.copy_async(CopyDescriptor{lengths, device_.data(), bytes});
  stream.record(copied_[next_]);
  next_ ^= 1;
  const auto* device = static_cast<const std::int32_t*>(device_.data());
  return DeviceBlockTables{.tables = device + max_rows_,
                           .seq_lens = seq_lens.empty() ? nullptr : device,
                           .rows = static_cast<std::uint32_t>(tables.size()),
                           .columns = static_cast<std::uint32_t>(width)};
}

}  // namespace kvtier::memory
