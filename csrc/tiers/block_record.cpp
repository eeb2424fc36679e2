#include "kvtier/tiers/block_record.hpp"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "kvtier/core/expects.hpp"

namespace kvtier::tiers {
namespace {

static_assert(std::endian::native == std::endian::little, "records are little-endian: stored as the host holds them");

constexpr std::uint64_t kMagic = 0x313043455254564BULL;  // the bytes "KVTREC01"
constexpr std::uint32_t kVersion = kRecordVersion;
constexpr std::uint32_t kHasParent = 1;
constexpr std::uint32_t kHasTokenIds = 2;
constexpr std::uint32_t kHasEngineKey = 4;

// Field offsets of the header (all little-endian).
constexpr std::size_t kMagicAt = 0;
constexpr std::size_t kVersionAt = 8;
constexpr std::size_t kHeaderBytesAt = 12;
constexpr std::size_t kHeaderChecksumAt = 16;
constexpr std::size_t kFingerprintAt = 24;
constexpr std::size_t kGenerationAt = 32;
constexpr std::size_t kPayloadBytesAt = 40;
constexpr std::size_t kPayloadChecksumAt = 48;
constexpr std::size_t kHashAt = 56;
constexpr std::size_t kPlhHighAt = 64;
constexpr std::size_t kPlhLowAt = 72;
constexpr std::size_t kParentAt = 80;
constexpr std::size_t kLocalAt = 88;
constexpr std::size_t kFlagsAt = 96;
constexpr std::size_t kTokenCountAt = 100;
constexpr std::size_t kKeyIdAt = 104;
constexpr std::size_t kMacAt = 112;
constexpr std::size_t kTokensAt = kMacAt + TierKey::kMacBytes;
// With kHasEngineKey the token ids are followed by the key's length (u32) and its bytes.

template <class T>
void put(std::span<std::byte> out, std::size_t at, T value) noexcept {
  std::memcpy(out.data() + at, &value, sizeof(T));
}
template <class T>
T get(std::span<const std::byte> in, std::size_t at) noexcept {
  T value;
  std::memcpy(&value, in.data() + at, sizeof(T));
  return value;
}

std::size_t used_bytes(std::size_t token_count, std::size_t engine_key_bytes) noexcept {
  return kTokensAt + token_count * sizeof(TokenId) +
         (engine_key_bytes > 0 ? sizeof(std::uint32_t) + engine_key_bytes : 0);
}

std::size_t used_bytes(const g1::TieredBlock& block) noexcept {
  return used_bytes(block.token_ids ? block.token_ids->size() : 0, block.engine_key.size());
}

/// XXH3-64 of the header's used bytes with its own checksum field taken as zero.
std::uint64_t header_checksum(std::span<const std::byte> header, std::size_t used) {
  std::vector<std::byte> copy(header.begin(), header.begin() + static_cast<std::ptrdiff_t>(used));
  std::fill_n(copy.begin() + kHeaderChecksumAt, sizeof(std::uint64_t), std::byte{0});
  return XXH3_64bits(copy.data(), copy.size());
}

/// The MAC of a record: its header's used bytes with the checksum and MAC
/// fields taken as zero (the checksum covers the MAC), then the payload.
TierKey::Mac record_mac(const TierKey& key, std::span<const std::byte> header, std::size_t used,
                        std::span<const std::byte> payload) {
  std::vector<std::byte> copy(header.begin(), header.begin() + static_cast<std::ptrdiff_t>(used));
  std::fill_n(copy.begin() + kHeaderChecksumAt, sizeof(std::uint64_t), std::byte{0});
  std::fill_n(copy.begin() + kMacAt, TierKey::kMacBytes, std::byte{0});
  return key.mac(copy, payload);
}

}  // namespace

std::uint64_t layout_fingerprint(const KvLayout& layout) noexcept {
  const KvGeometry& g = layout.geometry();
  const std::uint64_t fields[] = {kVersion,
                                  g.layers,
                                  g.kv_heads,
                                  g.head_dim,
                                  static_cast<std::uint64_t>(g.dtype),
                                  g.tokens_per_block,
                                  static_cast<std::uint64_t>(layout.layout()),
                                  layout.page_bytes()};
  return XXH3_64bits(fields, sizeof(fields));
}

PositionalLineageHash engine_key_plh(std::span<const std::byte> key) noexcept {
  const XXH128_hash_t hash = XXH3_128bits(key.data(), key.size());
  return PositionalLineageHash::from_raw(hash.high64, hash.low64);
}

std::size_t record_header_bytes(std::size_t token_count, std::size_t engine_key_bytes) noexcept {
  const std::size_t used = used_bytes(token_count, engine_key_bytes);
  return (used + kRecordAlignment - 1) / kRecordAlignment * kRecordAlignment;
}

BlockRecordMeta write_record_header(std::span<std::byte> header, const g1::TieredBlock& block,
                                    const BlockFormats& formats, std::uint64_t generation,
                                    std::span<const std::byte> payload, const TierKey* key) {
  const std::uint64_t fingerprint = formats.of(block.plh);
  const std::size_t tokens = block.token_ids ? block.token_ids->size() : 0;
  const std::size_t key_bytes = block.engine_key.size();
  KVTIER_EXPECTS(key_bytes <= kMaxEngineKeyBytes, "an engine key of ", key_bytes, " bytes (at most ",
                 kMaxEngineKeyBytes, ")");
  KVTIER_EXPECTS(key_bytes == 0 || block.plh == engine_key_plh(block.engine_key),
                 "a block with an engine key is named by the key's hash (engine_key_plh)");
  const std::size_t bytes = record_header_bytes(tokens, key_bytes);
  KVTIER_EXPECTS(header.size() >= bytes, "a record header of ", tokens, " token ids and a key of ", key_bytes,
                 " bytes needs ", bytes, " bytes, not ", header.size());
  std::fill(header.begin(), header.begin() + static_cast<std::ptrdiff_t>(bytes), std::byte{0});
  BlockRecordMeta meta{.block = block,
                       .layout_fingerprint = fingerprint,
                       .generation = generation,
                       .payload_bytes = payload.size(),
                       .payload_checksum = XXH3_64bits(payload.data(), payload.size())};
  put(header, kMagicAt, kMagic);
  put(header, kVersionAt, kVersion);
  put(header, kHeaderBytesAt, static_cast<std::uint32_t>(bytes));
  put(header, kFingerprintAt, fingerprint);
  put(header, kGenerationAt, generation);
  put(header, kPayloadBytesAt, meta.payload_bytes);
  put(header, kPayloadChecksumAt, meta.payload_checksum);
  put(header, kHashAt, block.hash.value());
  put(header, kPlhHighAt, block.plh.high());
  put(header, kPlhLowAt, block.plh.low());
  put(header, kParentAt, block.parent ? block.parent->value() : 0);
  put(header, kLocalAt, block.local.value());
  put(header, kFlagsAt,
      (block.parent ? kHasParent : 0) | (block.token_ids ? kHasTokenIds : 0) | (key_bytes > 0 ? kHasEngineKey : 0));
  put(header, kTokenCountAt, static_cast<std::uint32_t>(tokens));
  if (tokens > 0) std::memcpy(header.data() + kTokensAt, block.token_ids->data(), tokens * sizeof(TokenId));
  if (key_bytes > 0) {
    const std::size_t at = kTokensAt + tokens * sizeof(TokenId);
    put(header, at, static_cast<std::uint32_t>(key_bytes));
    std::memcpy(header.data() + at + sizeof(std::uint32_t), block.engine_key.data(), key_bytes);
  }
  const std::size_t used = used_bytes(block);
  if (key != nullptr) {
    meta.key_id = key->id();
    put(header, kKeyIdAt, meta.key_id);
    meta.mac = record_mac(*key, header, used, payload);
    std::memcpy(header.data() + kMacAt, meta.mac.data(), meta.mac.size());
  }
  put(header, kHeaderChecksumAt, header_checksum(header, used));
  return meta;
}

const char* record_check_name(RecordCheck check) noexcept {
  switch (check) {
    case RecordCheck::Ok:
      return "ok";
    case RecordCheck::NotARecord:
      return "not a record";
    case RecordCheck::Truncated:
      return "truncated";
    case RecordCheck::HeaderCorrupt:
      return "header checksum mismatch";
    case RecordCheck::OtherVersion:
      return "another record format version";
    case RecordCheck::OtherLayout:
      return "another layout";
    case RecordCheck::PayloadCorrupt:
      return "payload checksum mismatch";
    case RecordCheck::Unauthenticated:
      return "no MAC of this tier key";
    case RecordCheck::Forged:
      return "MAC mismatch";
  }
  return "?";
}

std::size_t stored_header_bytes(std::span<const std::byte> bytes) noexcept {
  if (bytes.size() < kTokensAt || get<std::uint64_t>(bytes, kMagicAt) != kMagic) return 0;
  return get<std::uint32_t>(bytes, kHeaderBytesAt);
}

RecordCheck read_record_header(std::span<const std::byte> bytes, const BlockFormats& formats, BlockRecordMeta& out,
                               const TierKey* key) {
  if (bytes.size() < sizeof(std::uint64_t) || get<std::uint64_t>(bytes, kMagicAt) != kMagic) {
    return RecordCheck::NotARecord;
  }
  if (bytes.size() < kVersionAt + sizeof(std::uint32_t)) return RecordCheck::Truncated;
  // Another version's fields lie elsewhere: nothing past the version is read.
  if (get<std::uint32_t>(bytes, kVersionAt) != kVersion) return RecordCheck::OtherVersion;
  if (bytes.size() < kTokensAt) return RecordCheck::Truncated;
  const std::uint32_t tokens = get<std::uint32_t>(bytes, kTokenCountAt);
  const std::size_t header_bytes = get<std::uint32_t>(bytes, kHeaderBytesAt);
  const std::uint32_t flags = get<std::uint32_t>(bytes, kFlagsAt);
  // The size fields are checked before any is trusted: a torn header must not read past its bytes.
  if (header_bytes < kTokensAt || tokens > (header_bytes - kTokensAt) / sizeof(TokenId)) {
    return RecordCheck::HeaderCorrupt;
  }
  const std::size_t key_length_at = kTokensAt + std::size_t{tokens} * sizeof(TokenId);
  std::uint32_t key_bytes = 0;
  if ((flags & kHasEngineKey) != 0) {
    if (key_length_at + sizeof(std::uint32_t) > header_bytes) return RecordCheck::HeaderCorrupt;
    if (bytes.size() < key_length_at + sizeof(std::uint32_t)) return RecordCheck::Truncated;
    key_bytes = get<std::uint32_t>(bytes, key_length_at);
    if (key_bytes == 0 || key_bytes > kMaxEngineKeyBytes) return RecordCheck::HeaderCorrupt;
  }
  if (header_bytes != record_header_bytes(tokens, key_bytes)) return RecordCheck::HeaderCorrupt;
  const std::size_t used = used_bytes(tokens, key_bytes);
  if (bytes.size() < used) return RecordCheck::Truncated;
  if (header_checksum(bytes, used) != get<std::uint64_t>(bytes, kHeaderChecksumAt)) {
    return RecordCheck::HeaderCorrupt;
  }
  const auto plh =
      PositionalLineageHash::from_raw(get<std::uint64_t>(bytes, kPlhHighAt), get<std::uint64_t>(bytes, kPlhLowAt));
  const std::uint64_t fingerprint = formats.of(plh);
  if (fingerprint == 0 || get<std::uint64_t>(bytes, kFingerprintAt) != fingerprint) return RecordCheck::OtherLayout;
  const std::uint64_t key_id = get<std::uint64_t>(bytes, kKeyIdAt);
  if (key != nullptr && key_id != key->id()) return RecordCheck::Unauthenticated;
  // The MAC covers the token ids the header says it has: none unless they are the block's.
  if ((flags & kHasTokenIds) == 0 && tokens != 0) return RecordCheck::HeaderCorrupt;
  g1::TieredBlock block{.plh = plh,
                        .hash = SequenceHash(get<std::uint64_t>(bytes, kHashAt)),
                        .parent = (flags & kHasParent) != 0
                                      ? std::optional<SequenceHash>(get<std::uint64_t>(bytes, kParentAt))
                                      : std::nullopt,
                        .local = LocalBlockHash(get<std::uint64_t>(bytes, kLocalAt)),
                        .token_ids = std::nullopt,
                        .format = formats.format_of(plh)};
  if ((flags & kHasTokenIds) != 0) {
    block.token_ids.emplace(tokens);
    std::memcpy(block.token_ids->data(), bytes.data() + kTokensAt, tokens * sizeof(TokenId));
  }
  if (key_bytes > 0) {
    const std::byte* key_at = bytes.data() + key_length_at + sizeof(std::uint32_t);
    block.engine_key.assign(key_at, key_at + key_bytes);
    // A record an engine stored is named by its key's hash: one that is not was not written by a tier.
    if (engine_key_plh(block.engine_key) != plh) return RecordCheck::HeaderCorrupt;
  }
  out = BlockRecordMeta{.block = std::move(block),
                        .layout_fingerprint = fingerprint,
                        .generation = get<std::uint64_t>(bytes, kGenerationAt),
                        .payload_bytes = get<std::uint64_t>(bytes, kPayloadBytesAt),
                        .payload_checksum = get<std::uint64_t>(bytes, kPayloadChecksumAt),
                        .key_id = key_id,
                        .mac = {}};
  std::memcpy(out.mac.data(), bytes.data() + kMacAt, out.mac.size());
  return RecordCheck::Ok;
}

RecordCheck check_payload(const BlockRecordMeta& meta, std::span<const std::byte> header,
                          std::span<const std::byte> payload, const TierKey* key) {
  if (payload.size() < meta.payload_bytes) return RecordCheck::Truncated;
  if (payload.size() != meta.payload_bytes || XXH3_64bits(payload.data(), payload.size()) != meta.payload_checksum) {
    return RecordCheck::PayloadCorrupt;
  }
  if (key == nullptr) return RecordCheck::Ok;
  const std::size_t used = used_bytes(meta.block);
  KVTIER_EXPECTS(header.size() >= used, "a record's MAC check needs its header's ", used, " bytes, not ",
                 header.size());
  if (meta.key_id != key->id()) return RecordCheck::Unauthenticated;
  return same_mac(record_mac(*key, header, used, payload), meta.mac) ? RecordCheck::Ok : RecordCheck::Forged;
}

}  // namespace kvtier::tiers
