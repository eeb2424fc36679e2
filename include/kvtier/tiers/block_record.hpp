#pragma once
// One block as the tiers below G2 store it (docs/architecture.md, "The
// lower-tier seam"): a header — the block's hashes, parent, token ids, the
// layout fingerprint, the XXH3-64 of the payload, a generation and, under a
// tier key, an HMAC-SHA256 of header and payload — then the page's bytes.
// G3 writes one record per disk slot and G4 one per store value; both write
// and check it here, and serve no byte that did not check.
#include <cstddef>
#include <cstdint>
#include <span>

#include "kvtier/core/kv_layout.hpp"
#include "kvtier/g1/offload_tier.hpp"
#include "kvtier/tiers/block_formats.hpp"
#include "kvtier/tiers/tier_key.hpp"

namespace kvtier::tiers {

/// Records are laid out in units of this many bytes: the O_DIRECT alignment
/// of the file systems kvtier runs on, so the payload of a record that
/// starts aligned starts aligned too.
inline constexpr std::size_t kRecordAlignment = 4096;

/// The record format this build writes and serves (2: the MAC fields; 3: an
/// engine's key after the token ids).
inline constexpr std::uint32_t kRecordVersion = 3;

/// The longest engine key a record holds (vLLM's offload keys are 20 or 36 bytes).
inline constexpr std::size_t kMaxEngineKeyBytes = 1024;

/// The tier key of a block an engine names by `key` (TieredBlock::engine_key):
/// the key's XXH3-128. Records keep the key whole; this only indexes them.
PositionalLineageHash engine_key_plh(std::span<const std::byte> key) noexcept;

/// What identifies the bytes of a page: geometry, dtype, block size and page
/// layout (not the capacity). A record of another fingerprint is another
/// model's or another layout's and is never served.
std::uint64_t layout_fingerprint(const KvLayout& layout) noexcept;

/// What an engine's rows are (an engine adapter's G3 or G4): `row_bytes`
/// each (G3: a multiple of kRecordAlignment), compatible only under
/// `fingerprint` (the engine's namespace: model, dtype, chunk, parallel
/// layout, row bytes). Their records carry engine keys, no token ids.
struct RowShape {
  std::size_t row_bytes = 0;
  std::uint64_t fingerprint = 0;
};

/// The header of a record: everything but the payload.
struct BlockRecordMeta {
  g1::TieredBlock block;
  std::uint64_t layout_fingerprint = 0;
  /// Counts up per write of the tier: of two records of one block, the later wins.
  std::uint64_t generation = 0;
  std::uint64_t payload_bytes = 0;
  std::uint64_t payload_checksum = 0;  // XXH3-64
  /// The id of the tier key that wrote it (0: written without one) and its MAC.
  std::uint64_t key_id = 0;
  TierKey::Mac mac{};
};

/// Bytes of the header of a block with `token_count` token ids (and an
/// engine key of `engine_key_bytes`), a multiple of kRecordAlignment.
std::size_t record_header_bytes(std::size_t token_count, std::size_t engine_key_bytes = 0) noexcept;

/// Writes the header of `block` with `payload`'s size and checksum into
/// `header` (record_header_bytes of its token ids; ContractError if smaller)
/// and, with `key`, the MAC of header and payload. Returns the meta it wrote.
/// The fingerprint is `formats.of(block.plh)`: with groups, the layout's and
/// the block's group's together.
BlockRecordMeta write_record_header(std::span<std::byte> header, const g1::TieredBlock& block,
                                    const BlockFormats& formats, std::uint64_t generation,
                                    std::span<const std::byte> payload, const TierKey* key = nullptr);

/// How reading a record's header or payload ended.
enum class RecordCheck : std::uint8_t {
  Ok,
  NotARecord,       // no record magic: an empty or foreign slot
  Truncated,        // fewer bytes than the header says it has
  HeaderCorrupt,    // the header's own checksum fails
  OtherVersion,     // another record format version: kept for the kvtier that wrote it, never served
  OtherLayout,      // another layout fingerprint
  PayloadCorrupt,   // the payload's checksum or size fails
  Unauthenticated,  // a tier key is required and the record has no MAC, or one of another key
  Forged,           // its MAC does not match header and payload: someone wrote it without the key
};
const char* record_check_name(RecordCheck check) noexcept;

/// Reads and checks a header from the first bytes of a record. Ok fills
/// `out` (its block's format is its group's). With `key`, a record written
/// without it is Unauthenticated (its MAC is checked with the payload, by
/// check_payload). A fingerprint other than `formats.of` the record's key —
/// another layout, or with groups another group or page format — is OtherLayout.
RecordCheck read_record_header(std::span<const std::byte> bytes, const BlockFormats& formats, BlockRecordMeta& out,
                               const TierKey* key = nullptr);
/// The header's size as the header at the start of `bytes` says (0 if it is not a record's).
std::size_t stored_header_bytes(std::span<const std::byte> bytes) noexcept;
/// Checks a payload against its header: its size, its XXH3-64 and, with
/// `key`, the record's MAC over `header` (the header's bytes as stored) and
/// the payload. Without a key a keyed record is checked as any other: the
/// MAC guards the instances that hold the key.
RecordCheck check_payload(const BlockRecordMeta& meta, std::span<const std::byte> header,
                          std::span<const std::byte> payload, const TierKey* key = nullptr);

}  // namespace kvtier::tiers
