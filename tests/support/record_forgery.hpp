#pragma once
// What someone who can write a G3 file or a G4 store can do without the tier
// key (issue 31, C2): change a record's payload and recompute both XXH3
// checksums — the payload's and the header's — at the offsets docs/disk.md
// publishes. Checksums catch accidents; only the MAC catches this.
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace kvtier::testing {

/// Makes the checksums of the record in `record` (a header of
/// `header_bytes`, then the payload) match what it holds now.
inline void recompute_checksums(std::span<std::byte> record, std::size_t header_bytes) {
  constexpr std::size_t kHeaderChecksumAt = 16;
  constexpr std::size_t kPayloadBytesAt = 40;
  constexpr std::size_t kPayloadChecksumAt = 48;
  constexpr std::size_t kTokenCountAt = 100;
  constexpr std::size_t kTokensAt = 144;
  std::uint64_t payload_bytes = 0;
  std::memcpy(&payload_bytes, record.data() + kPayloadBytesAt, sizeof(payload_bytes));
  const std::byte* payload = record.data() + header_bytes;
  const std::uint64_t payload_sum = XXH3_64bits(payload, payload_bytes);
  std::memcpy(record.data() + kPayloadChecksumAt, &payload_sum, sizeof(payload_sum));
  std::uint32_t tokens = 0;
  std::memcpy(&tokens, record.data() + kTokenCountAt, sizeof(tokens));
  std::vector<std::byte> used(record.begin(), record.begin() + static_cast<std::ptrdiff_t>(kTokensAt + tokens * 4));
  std::memset(used.data() + kHeaderChecksumAt, 0, sizeof(std::uint64_t));
  const std::uint64_t header_sum = XXH3_64bits(used.data(), used.size());
  std::memcpy(record.data() + kHeaderChecksumAt, &header_sum, sizeof(header_sum));
}

/// Changes one payload byte and recomputes both checksums.
inline void forge_record(std::span<std::byte> record, std::size_t header_bytes, std::size_t payload_byte = 17) {
  record[header_bytes + payload_byte] ^= std::byte{0x5A};
  recompute_checksums(record, header_bytes);
}

}  // namespace kvtier::testing
