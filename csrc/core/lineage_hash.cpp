#include "kvtier/core/lineage_hash.hpp"

#include <array>
#include <cstdio>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier {
namespace {

__extension__ typedef unsigned __int128 u128;

struct ModeWidths {
  unsigned position;
  unsigned fragment;  // parent and current fields are equally wide
};
constexpr std::array<ModeWidths, 3> kModes{{{8, 59}, {16, 55}, {24, 51}}};

unsigned mode_for(std::uint64_t position) {
  if (position < (std::uint64_t{1} << 8)) return 0;
  if (position < (std::uint64_t{1} << 16)) return 1;
  return 2;
}

constexpr std::uint64_t low_bits(std::uint64_t value, unsigned bits) {
  return bits >= 64 ? value : value & ((std::uint64_t{1} << bits) - 1);
}

}  // namespace

PositionalLineageHash::PositionalLineageHash(SequenceHash current, std::optional<SequenceHash> parent,
                                             std::uint64_t position) {
  KVTIER_EXPECTS(position <= kMaxPosition,
                 "Position " + std::to_string(position) + " exceeds maximum supported value (2^24 - 1 = 16,777,215)");
  const unsigned mode = mode_for(position);
  const ModeWidths widths = kModes[mode];
  // The child (position + 1) stores our fragment in its parent field, which may
  // be narrower when the child crosses into the next mode.
  const unsigned current_bits = position == kMaxPosition ? widths.fragment : kModes[mode_for(position + 1)].fragment;
  const u128 value = (u128{mode} << 126) | (u128{position} << (2 * widths.fragment)) |
                     (u128{low_bits(parent ? parent->value() : 0, widths.fragment)} << widths.fragment) |
                     u128{low_bits(current.value(), current_bits)};
  high_ = static_cast<std::uint64_t>(value >> 64);
  low_ = static_cast<std::uint64_t>(value);
}

std::string PositionalLineageHash::to_string() const {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%llu:%016llx:%016llx", static_cast<unsigned long long>(position()),
                static_cast<unsigned long long>(parent_fragment()),
                static_cast<unsigned long long>(current_fragment()));
  return buffer;
}

}  // namespace kvtier
