#include "kvtier/tiers/disk/tier_file_header.hpp"
#include "kvtier/core/aligned_bytes.hpp"

#include <xxhash.h>

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::tiers::disk {
namespace {

static_assert(std::endian::native == std::endian::little, "tier files are little-endian");

constexpr std::uint64_t kMagic = 0x334752454954564BULL;        // the bytes "KVTIERG3"
constexpr std::uint64_t kRecordMagic = 0x313043455254564BULL;  // "KVTREC01": a format 1 file's slot 0
constexpr std::size_t kMagicAt = 0;
constexpr std::size_t kVersionAt = 8;
constexpr std::size_t kChecksumAt = 16;
constexpr std::size_t kFingerprintAt = 24;
constexpr std::size_t kSlotBytesAt = 32;
constexpr std::size_t kKeyIdAt = 40;
constexpr std::size_t kUsedBytes = 48;

template <class T>
T get(std::span<const std::byte> in, std::size_t at) noexcept {
  T value;
  std::memcpy(&value, in.data() + at, sizeof(T));
  return value;
}
template <class T>
void put(std::span<std::byte> out, std::size_t at, T value) noexcept {
  std::memcpy(out.data() + at, &value, sizeof(T));
}

std::uint64_t checksum(std::span<const std::byte> header) noexcept {
  std::byte copy[kUsedBytes];
  std::memcpy(copy, header.data(), kUsedBytes);
  std::memset(copy + kChecksumAt, 0, sizeof(std::uint64_t));
  return XXH3_64bits(copy, kUsedBytes);
}

/// One header's bytes, aligned for O_DIRECT.
std::unique_ptr<std::byte[], AlignedFree> header_buffer() {
  std::unique_ptr<std::byte[], AlignedFree> out(
      static_cast<std::byte*>(std::aligned_alloc(kTierFileHeaderBytes, kTierFileHeaderBytes)));
  if (!out) throw AllocationError("cannot allocate a disk tier file header");
  std::memset(out.get(), 0, kTierFileHeaderBytes);
  return out;
}

}  // namespace

const char* tier_file_check_name(TierFileCheck check) noexcept {
  switch (check) {
    case TierFileCheck::Ok:
      return "ok";
    case TierFileCheck::NotATierFile:
      return "not a kvtier tier file";
    case TierFileCheck::FormatOne:
      return "a tier of format 1 (an older kvtier)";
    case TierFileCheck::OtherVersion:
      return "a tier of another format version";
    case TierFileCheck::Damaged:
      return "a damaged tier file header";
    case TierFileCheck::OtherLayout:
      return "a tier of another layout";
    case TierFileCheck::OtherKey:
      return "a tier written under another tier key";
  }
  return "?";
}

void write_tier_file_header(std::span<std::byte> out, const TierFileIdentity& identity) {
  KVTIER_EXPECTS(out.size() >= kTierFileHeaderBytes, "a tier file header takes ", kTierFileHeaderBytes, " bytes");
  std::fill_n(out.begin(), kTierFileHeaderBytes, std::byte{0});
  put(out, kMagicAt, kMagic);
  put(out, kVersionAt, kTierFileVersion);
  put(out, kFingerprintAt, identity.layout_fingerprint);
  put(out, kSlotBytesAt, identity.slot_bytes);
  put(out, kKeyIdAt, identity.key_id);
  put(out, kChecksumAt, checksum(out));
}

TierFileCheck read_tier_file_header(std::span<const std::byte> in, const TierFileIdentity& expected,
                                    TierFileIdentity& found) {
  if (in.size() < kUsedBytes) return TierFileCheck::NotATierFile;
  const std::uint64_t magic = get<std::uint64_t>(in, kMagicAt);
  if (magic == kRecordMagic) return TierFileCheck::FormatOne;
  if (magic != kMagic) return TierFileCheck::NotATierFile;
  if (get<std::uint32_t>(in, kVersionAt) != kTierFileVersion) return TierFileCheck::OtherVersion;
  if (checksum(in) != get<std::uint64_t>(in, kChecksumAt)) return TierFileCheck::Damaged;
  found = TierFileIdentity{.layout_fingerprint = get<std::uint64_t>(in, kFingerprintAt),
                           .slot_bytes = get<std::uint64_t>(in, kSlotBytesAt),
                           .key_id = get<std::uint64_t>(in, kKeyIdAt)};
  if (found.layout_fingerprint != expected.layout_fingerprint || found.slot_bytes != expected.slot_bytes) {
    return TierFileCheck::OtherLayout;
  }
  if (found.key_id != expected.key_id) return TierFileCheck::OtherKey;
  return TierFileCheck::Ok;
}

}  // namespace kvtier::tiers::disk

namespace kvtier::tiers::disk {

TierFileCheck read_tier_file_header(const DirectFile& file, const TierFileIdentity& expected, TierFileIdentity& found) {
  const auto header = header_buffer();
  const ssize_t n = ::pread(file.fd(), header.get(), kTierFileHeaderBytes, 0);
  if (n < 0) {
    throw ConfigError("cannot read the disk tier's file " + file.path().string() + ": " + std::strerror(errno));
  }
  return read_tier_file_header(std::span<const std::byte>(header.get(), static_cast<std::size_t>(n)), expected, found);
}

void write_tier_file_header(const DirectFile& file, const TierFileIdentity& identity) {
  const auto header = header_buffer();
  write_tier_file_header(std::span(header.get(), kTierFileHeaderBytes), identity);
  if (::pwrite(file.fd(), header.get(), kTierFileHeaderBytes, 0) != static_cast<ssize_t>(kTierFileHeaderBytes)) {
    throw ConfigError("cannot write the disk tier's file header in " + file.path().string() + ": " +
                      std::strerror(errno));
  }
}

}  // namespace kvtier::tiers::disk
