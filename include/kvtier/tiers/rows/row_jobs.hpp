#pragma once
// What an engine asks of a tier on its own (docs/architecture.md, "Engine
// adapters"): store or load rows of memory the engine owns, named by the
// engine's keys; what comes back. The engine's interface (vLLM's
// SecondaryTierManager) is mapped onto these by a thin Python adapter.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kvtier::tiers::rows {

/// The engine's rows: `count` rows of `row_bytes`, row i at base + i * row_bytes.
struct RowRegion {
  std::byte* base = nullptr;
  std::size_t count = 0;
  std::size_t row_bytes = 0;

  std::byte* row(std::size_t i) const noexcept { return base + i * row_bytes; }
};

enum class RowJobKind : std::uint8_t { Store, Load };

/// Row `rows[i]` of the region for key `keys[i]`.
struct RowJob {
  std::uint64_t id = 0;
  RowJobKind kind = RowJobKind::Store;
  std::vector<std::vector<std::byte>> keys{};
  std::vector<std::int64_t> rows{};
};

/// How a job ended, reported once. A store succeeds when every key is held
/// (stored now or before); a load when every row holds its key's verified
/// bytes, and otherwise `loaded` names the positions that do.
struct RowJobResult {
  std::uint64_t id = 0;
  RowJobKind kind = RowJobKind::Store;
  bool success = false;
  std::vector<std::uint32_t> loaded{};
  double seconds = 0.0;     // from submit to report
  std::uint64_t bytes = 0;  // row bytes moved
  std::string error{};      // why it failed as a whole (a malformed job), else empty
};

/// A key a tier now holds (stored) or no longer holds (evicted, or dropped
/// because its record did not verify).
struct RowEvent {
  std::vector<std::byte> key{};
  bool removed = false;
};

/// Counters since the tier was opened, for an engine's metrics.
struct RowTierCounters {
  std::uint64_t lookups = 0;
  std::uint64_t lookup_hits = 0;
  std::uint64_t keys_stored = 0;
  std::uint64_t keys_already_held = 0;  // store requests of keys the tier held: nothing written
  std::uint64_t keys_store_failed = 0;
  std::uint64_t keys_loaded = 0;
  std::uint64_t keys_load_failed = 0;
  std::uint64_t bytes_stored = 0;
  std::uint64_t bytes_loaded = 0;
  std::uint64_t checksum_failures = 0;        // records that did not verify (MAC failures included)
  std::uint64_t authentication_failures = 0;  // of those, refused by the tier key
  std::uint64_t evictions = 0;
  std::uint64_t deadline_misses = 0;  // a remote tier: operations past their deadline
  std::uint64_t used = 0;             // keys held now
  std::uint64_t capacity = 0;         // keys it can hold (0: bounded elsewhere)
  bool breaker_open = false;          // a remote tier: its store is considered down
};

}  // namespace kvtier::tiers::rows
