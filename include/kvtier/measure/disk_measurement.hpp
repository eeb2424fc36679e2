#pragma once
// G3 bandwidth (`kvtier bench disk`): blocks written into and read back from
// a DiskStore — headers, checksums and verification included — next to the
// same-run ceiling of the file system: one large sequential O_DIRECT write,
// then read, of the same payload bytes in 8 MiB requests, timed right after
// the store in each iteration, and the same store under a tier key (every
// record MACed and checked) beside it. Bandwidths count payload bytes.
#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace kvtier::measure {

struct DiskPoint {
  std::size_t page_bytes = 0;
  unsigned queue_depth = 0;
  std::size_t blocks = 0;  // per iteration
  std::size_t iterations = 0;
  bool direct_io = false;   // false: the file system refused O_DIRECT (page cache in both paths)
  double write_gbps = 0.0;  // medians over the iterations
  double read_gbps = 0.0;
  double ceiling_write_gbps = 0.0;
  double ceiling_read_gbps = 0.0;
  /// The same store under a tier key (HMAC-SHA256 of every record); 0 without OpenSSL.
  double keyed_write_gbps = 0.0;
  double keyed_read_gbps = 0.0;
  std::size_t verified_reads = 0;  // blocks read back that verified (all of them, or the bench fails)
  bool sync_batch = false;         // DiskSync::Batch, and the ceiling's write fdatasynced
  std::uint64_t syncs = 0;         // fdatasyncs the store made (all iterations, unkeyed store)
  /// Medians of each iteration's ratio to the ceiling timed right after it
  /// (a noisy disk moves both together; the ratio of medians would mix iterations).
  double write_of_ceiling = 0.0;
  double read_of_ceiling = 0.0;
  /// What the bench asks of G3 at 64 KiB pages and queue depth 32 and above (issue 36).
  static constexpr double kWriteTarget = 0.8;
  static constexpr double kReadTarget = 0.9;
  /// What the MAC leaves of the bandwidth: keyed over unkeyed.
  double keyed_write_of_unkeyed() const { return write_gbps > 0.0 ? keyed_write_gbps / write_gbps : 0.0; }
  double keyed_read_of_unkeyed() const { return read_gbps > 0.0 ? keyed_read_gbps / read_gbps : 0.0; }
};

/// True when this build has the disk tier (liburing).
bool disk_measurement_available() noexcept;

/// Measures one (page size, queue depth) in `dir` (its files are removed
/// after): about `bytes` of payload per iteration. `sync_batch`: the store
/// runs under DiskSync::Batch (a block is stored once an fdatasync covered
/// it) and the ceiling's write ends with one fdatasync. ConfigError: a page
/// size that is not a multiple of 64 bytes, no liburing, a block that did not
/// read back verified.
DiskPoint measure_disk(const std::filesystem::path& dir, std::size_t page_bytes, unsigned queue_depth,
                       std::size_t bytes, std::size_t iterations, bool sync_batch = false);

}  // namespace kvtier::measure
