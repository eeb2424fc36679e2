#include "kvtier/tiers/block_formats.hpp"

#include <xxhash.h>

namespace kvtier::tiers {

std::uint64_t BlockFormats::of(const PositionalLineageHash& plh) const noexcept {
  if (!grouped()) return layout_;
  if (plh.high() >= groups_.size()) return 0;
  const std::uint64_t fields[] = {layout_, plh.high(), groups_[plh.high()]};
  const std::uint64_t mixed = XXH3_64bits(fields, sizeof(fields));
  return mixed != 0 ? mixed : 1;  // 0 means "no group"
}

std::uint64_t BlockFormats::format_of(const PositionalLineageHash& plh) const noexcept {
  return grouped() && plh.high() < groups_.size() ? groups_[plh.high()] : 0;
}

bool BlockFormats::accepts(const g1::TieredBlock& block) const noexcept {
  if (!grouped()) return block.format == 0;
  return block.plh.high() < groups_.size() && block.format == groups_[block.plh.high()];
}

}  // namespace kvtier::tiers
