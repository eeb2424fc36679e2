#pragma once
// G4 bandwidth and latency (`kvtier bench shared`): blocks published to and
// fetched back from a SharedStore — record headers, the pipelined lookup and
// verification included — next to the same-run ceiling of the store itself:
// raw pipelined SETs, then GETs, of values of the same size (header + page)
// in batches of the same size, on a connection of the same client, timed
// right after the store in each iteration, and the same store under a tier
// key (every value MACed and checked) beside it. Bandwidths count payload bytes.
#include <cstddef>
#include <string>
#include <vector>

namespace kvtier::measure {

struct SharedPoint {
  std::size_t page_bytes = 0;
  std::size_t batch = 0;   // blocks per publish burst, per lookup and read
  std::size_t blocks = 0;  // per iteration
  std::size_t iterations = 0;
  double put_gbps = 0.0;  // medians over the iterations
  double get_gbps = 0.0;
  double ceiling_put_gbps = 0.0;
  double ceiling_get_gbps = 0.0;
  double put_batch_ms = 0.0;          // median wall time of one batch: published and answered
  double get_batch_ms = 0.0;          // one lookup + read of a batch, verified
  double ceiling_get_batch_ms = 0.0;  // one raw GET pipeline of a batch
  /// The work a verified fetch adds to the raw GET on the client, timed on
  /// the ceiling's own replies: XXH3 of a batch's payloads and their copy
  /// into pages. The ratio is the most a fetch that verifies and copies could
  /// reach on this machine: raw / (raw + verify and copy), per iteration.
  double verify_copy_batch_ms = 0.0;
  double verified_ceiling_of_ceiling = 0.0;
  /// The same store under a tier key (HMAC-SHA256 of every value); 0 without OpenSSL.
  double keyed_put_gbps = 0.0;
  double keyed_get_gbps = 0.0;
  std::size_t verified_reads = 0;  // blocks fetched that verified (all, or the bench fails)
  /// Medians of each iteration's ratio to the ceiling measured right after it
  /// (the store and the ceiling share a noisy machine; the ratio of medians would mix iterations).
  double put_of_ceiling = 0.0;
  double get_of_ceiling = 0.0;
  /// What the bench asks of G4 (issue 36): fetch at batches of 16 and up, at batch 1, and publish.
  static constexpr double kGetTarget = 0.8;
  static constexpr double kGetTargetBatchOne = 0.6;
  static constexpr double kPutTarget = 0.85;
  double keyed_put_of_unkeyed() const { return put_gbps > 0.0 ? keyed_put_gbps / put_gbps : 0.0; }
  double keyed_get_of_unkeyed() const { return get_gbps > 0.0 ? keyed_get_gbps / get_gbps : 0.0; }
};

/// True when this build has the shared tier (hiredis).
bool shared_measurement_available() noexcept;

/// Measures one (page size, batch) on the store at `urls` (what it writes
/// is deleted after): about `bytes` of payload per iteration. ConfigError: a
/// page size that is not a multiple of 64 bytes, no hiredis, a store that
/// does not answer, a block that did not come back verified.
SharedPoint measure_shared(const std::vector<std::string>& urls, std::size_t page_bytes, std::size_t batch,
                           std::size_t bytes, std::size_t iterations);

}  // namespace kvtier::measure
