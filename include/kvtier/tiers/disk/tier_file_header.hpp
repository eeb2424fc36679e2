#pragma once
// The first 4096 bytes of a G3 tier file (docs/disk.md, "The file"): what
// makes a file a kvtier tier, which format, layout and key wrote it. A file
// without it is never taken for an empty tier: it is refused and left as it is.
#include <cstddef>
#include <cstdint>
#include <span>

#include "kvtier/tiers/disk/direct_file.hpp"

namespace kvtier::tiers::disk {

inline constexpr std::size_t kTierFileHeaderBytes = 4096;
/// 2: the first format with a file header (format 1 files began with slot 0).
inline constexpr std::uint32_t kTierFileVersion = 2;

/// What a tier file was written for.
struct TierFileIdentity {
  std::uint64_t layout_fingerprint = 0;
  std::uint64_t slot_bytes = 0;
  std::uint64_t key_id = 0;  // 0: written without a tier key
  friend bool operator==(const TierFileIdentity&, const TierFileIdentity&) = default;
};

enum class TierFileCheck : std::uint8_t {
  Ok,
  NotATierFile,  // no kvtier magic: someone else's file, never written
  FormatOne,     // a tier of kvtier before file headers (its first bytes are a record)
  OtherVersion,  // a tier file of another format version
  Damaged,       // the magic, but the header's checksum fails
  OtherLayout,   // another layout fingerprint or slot size
  OtherKey,      // written under another tier key, or with one where none is given (or none where one is)
};
const char* tier_file_check_name(TierFileCheck check) noexcept;

/// Writes the header for `identity` into `out` (kTierFileHeaderBytes).
void write_tier_file_header(std::span<std::byte> out, const TierFileIdentity& identity);
/// Reads the header at the start of `in` and compares it with `expected`;
/// `found` gets what the file says when the magic and checksum are good.
TierFileCheck read_tier_file_header(std::span<const std::byte> in, const TierFileIdentity& expected,
                                    TierFileIdentity& found);

/// The same at the start of `file` (a file too short for a header is NotATierFile).
/// ConfigError when it cannot be read or written.
TierFileCheck read_tier_file_header(const DirectFile& file, const TierFileIdentity& expected, TierFileIdentity& found);
void write_tier_file_header(const DirectFile& file, const TierFileIdentity& identity);

}  // namespace kvtier::tiers::disk
