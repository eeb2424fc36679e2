#pragma once
// A tier key (docs/disk.md and docs/shared-tier.md, "Who can inject K/V"):
// a secret the instances that trust each other's G3 and G4 records share.
// XXH3 catches accidents, not someone who can write the store and recompute
// it; with a key every record carries an HMAC-SHA256 over its header and its
// payload, and a record without a valid one is never served.
// HMAC-SHA256 (OpenSSL) over libsodium's keyed BLAKE2b: the faster of the two
// on the machines kvtier runs on (SHA extensions; docs/performance.md).
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>

namespace kvtier::tiers {

class TierKey {
 public:
  static constexpr std::size_t kMacBytes = 32;
  /// The fewest secret bytes a key file may hold.
  static constexpr std::size_t kMinSecretBytes = 32;
  using Mac = std::array<std::byte, kMacBytes>;

  /// The key in `path` (a link is followed: secrets are often mounted as
  /// links): its bytes, trailing whitespace stripped, are the secret.
  /// ConfigError: missing, not a regular file, readable or writable by group
  /// or others, fewer than kMinSecretBytes or over 4096 bytes, or a build
  /// without OpenSSL.
  static TierKey from_file(const std::filesystem::path& path);
  /// A key from secret bytes (at least kMinSecretBytes; ConfigError otherwise).
  static TierKey from_secret(std::span<const std::byte> secret);

  /// Names the key without revealing it (a MAC of a fixed text): records and
  /// files say which key wrote them, so one of another key is told apart
  /// from a forgery.
  std::uint64_t id() const noexcept { return id_; }
  /// HMAC-SHA256 of `first` then `second`. Thread-safe.
  Mac mac(std::span<const std::byte> first, std::span<const std::byte> second) const;

  struct State;  // the keyed MAC, ready to be copied per call

 private:
  explicit TierKey(std::shared_ptr<const State> state);
  std::shared_ptr<const State> state_;
  std::uint64_t id_ = 0;
};

/// True when this build can load a tier key (OpenSSL was found).
bool tier_keys_available() noexcept;

/// KVTIER_TIER_KEY_FILE when it is set and not empty: where a key comes
/// from when no option names one.
std::optional<std::filesystem::path> tier_key_file_from_environment();

/// Compares two MACs in time that does not depend on where they differ.
bool same_mac(const TierKey::Mac& a, const TierKey::Mac& b) noexcept;

}  // namespace kvtier::tiers
