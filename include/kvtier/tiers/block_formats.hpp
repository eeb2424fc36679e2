#pragma once
// Which format a tier's records are in (docs/page-formats.md, "Through the
// tiers"). Without groups every record of a tier is one layout's: its
// fingerprint is the layout's. With KV cache groups a page's bytes are its
// group's format, and the group rides in the tier key's high word
// (g1::group_tier_key): a record carries the fingerprint of the layout and
// its group's block fingerprint together, so a block is served only into the
// group and format it was stored with — another model, --kv-cache-dtype or
// group of the same page size reads as another layout, refused and counted.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvtier/core/lineage_hash.hpp"
#include "kvtier/g1/offload_tier.hpp"

namespace kvtier::tiers {

class BlockFormats {
 public:
  /// Every block one layout's (a manager without groups: a KVBM key's high
  /// word is lineage, not a group).
  BlockFormats(std::uint64_t layout_fingerprint) noexcept
      : layout_(layout_fingerprint) {}  // NOLINT: a layout is its formats
  /// One fingerprint per group (ModelGeometry::block_fingerprint), in group order.
  BlockFormats(std::uint64_t layout_fingerprint, std::vector<std::uint64_t> groups)
      : layout_(layout_fingerprint), groups_(std::move(groups)) {}

  bool grouped() const noexcept { return !groups_.empty(); }
  std::uint64_t layout() const noexcept { return layout_; }
  /// The fingerprint a record of `plh` carries; 0 when `plh` names no group
  /// of these (no record is served for it).
  std::uint64_t of(const PositionalLineageHash& plh) const noexcept;
  /// The block format (TieredBlock::format) of `plh`'s group; 0 without groups.
  std::uint64_t format_of(const PositionalLineageHash& plh) const noexcept;
  /// Whether `block` is in its key's format: a tier refuses (and counts) one that is not.
  bool accepts(const g1::TieredBlock& block) const noexcept;

 private:
  std::uint64_t layout_;
  std::vector<std::uint64_t> groups_;
};

}  // namespace kvtier::tiers
