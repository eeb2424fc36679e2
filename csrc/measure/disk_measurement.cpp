#include "kvtier/measure/disk_measurement.hpp"
#include "kvtier/core/aligned_bytes.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/kv_layout.hpp"
#include "tier_bench_blocks.hpp"

#if KVTIER_WITH_URING
#include "kvtier/tiers/disk/direct_file.hpp"
#include "kvtier/tiers/disk/disk_store.hpp"
#endif

namespace kvtier::measure {

bool disk_measurement_available() noexcept { return KVTIER_WITH_URING != 0; }

#if KVTIER_WITH_URING
namespace {

using detail::Clock;
using detail::median;
using detail::seconds_since;
constexpr std::size_t kCeilingChunk = std::size_t{8} << 20;

KvLayout disk_page_layout(std::size_t page_bytes) { return detail::tier_bench_layout(page_bytes, "disk"); }
using detail::tier_bench_block;

/// The store's side: writes `blocks` fresh blocks keeping the queue full, then
/// reads them all back (verified) the same way; seconds of each.
std::pair<double, double> time_store(tiers::disk::DiskStore& store, std::span<const std::byte> payload,
                                     std::uint64_t first, std::size_t blocks, std::size_t& verified_total) {
  std::vector<g1::TieredBlock> evicted;
  const auto start_write = Clock::now();
  for (std::size_t i = 0; i < blocks; ++i) {
    while (store.write(tier_bench_block(first + i), payload, evicted) == tiers::LowerTier::WriteStart::NoRoom) {
      if (store.in_flight() == 0) throw ConfigError("the disk tier refuses a write with nothing in flight");
      (void)store.wait_some();
    }
  }
  (void)store.poll(true);
  const double write_s = seconds_since(start_write);

  std::vector<std::byte> page(payload.size());
  const auto start_read = Clock::now();
  std::size_t next = 0;
  std::size_t verified = 0;
  while (next < blocks || verified < blocks) {
    const std::size_t n = std::min(store.read_room(), blocks - next);
    if (n > 0) {
      std::vector<PositionalLineageHash> plhs;
      std::vector<std::byte*> pages(n,
                                    page.data());  // every block lands in the same page: the bytes are checked before
      for (std::size_t i = 0; i < n; ++i) plhs.push_back(tier_bench_block(first + next + i).plh);
      if (store.read(plhs, pages)) next += n;
    }
    const tiers::LowerTierProgress progress = store.wait_some();
    if (n == 0 && progress.reads.empty() && store.in_flight() == 0) {
      throw ConfigError("the disk tier has no buffer for a read and nothing in flight");
    }
    for (const tiers::LowerRead& read : progress.reads) {
      for (const bool ok : read.ok) {
        if (!ok) throw ConfigError("a block written by the disk bench did not read back verified");
        ++verified;
      }
    }
  }
  const double read_s = seconds_since(start_read);
  verified_total += verified;
  return {write_s, read_s};
}

/// The ceiling: `bytes` written (then, with `sync`, fdatasynced) and read sequentially in 8 MiB requests.
std::pair<double, double> time_ceiling(const std::filesystem::path& path, std::size_t bytes, bool sync) {
  tiers::disk::DirectFile file(path);
  const std::size_t chunk = std::min(kCeilingChunk, bytes);
  std::unique_ptr<std::byte, AlignedFree> buffer(static_cast<std::byte*>(std::aligned_alloc(4096, chunk)));
  if (!buffer) throw AllocationError("cannot allocate the disk bench's ceiling buffer");
  std::memset(buffer.get(), 0x5a, chunk);
  const auto io = [&](bool write) {
    for (std::size_t done = 0; done < bytes;) {
      const std::size_t n = std::min(chunk, bytes - done);
      const ssize_t moved = write ? ::pwrite(file.fd(), buffer.get(), n, static_cast<off_t>(done))
                                  : ::pread(file.fd(), buffer.get(), n, static_cast<off_t>(done));
      if (moved <= 0) throw ConfigError(std::string("the disk bench's ceiling I/O failed: ") + std::strerror(errno));
      done += static_cast<std::size_t>(moved);
    }
  };
  const auto start_write = Clock::now();
  io(true);
  if (sync && ::fdatasync(file.fd()) != 0) {
    throw ConfigError(std::string("the disk bench's ceiling fdatasync failed: ") + std::strerror(errno));
  }
  const double write_s = seconds_since(start_write);
  const auto start_read = Clock::now();
  io(false);
  return {write_s, seconds_since(start_read)};
}

}  // namespace

DiskPoint measure_disk(const std::filesystem::path& dir, std::size_t page_bytes, unsigned queue_depth,
                       std::size_t bytes, std::size_t iterations, bool sync_batch) {
  const KvLayout layout = disk_page_layout(page_bytes);
  if (iterations == 0) throw ConfigError("the disk bench needs at least one iteration");
  std::filesystem::create_directories(dir);
  const std::filesystem::path store_file = dir / "bench-g3.slots";
  const std::filesystem::path keyed_file = dir / "bench-g3-keyed.slots";
  const std::filesystem::path ceiling_file = dir / "bench-ceiling";
  DiskPoint point{.page_bytes = page_bytes,
                  .queue_depth = queue_depth,
                  .blocks = std::max<std::size_t>(queue_depth, bytes / page_bytes),
                  .iterations = iterations,
                  .sync_batch = sync_batch};
  // The ceiling's bytes round up to its 4 KiB-aligned requests.
  const std::size_t payload_bytes = (point.blocks * page_bytes + 4095) / 4096 * 4096;
  std::vector<double> writes, reads, keyed_writes, keyed_reads, ceiling_writes, ceiling_reads, write_ratios,
      read_ratios;
  {
    const auto open = [&](const std::filesystem::path& file, std::optional<tiers::TierKey> key) {
      return std::make_unique<tiers::disk::DiskStore>(
          tiers::disk::DiskStoreConfig{.file = file,
                                       .slots = static_cast<std::uint32_t>(point.blocks),
                                       .queue_depth = queue_depth,
                                       .backlog = queue_depth,
                                       .reformat = true,
                                       .key = std::move(key),
                                       .sync = sync_batch ? tiers::disk::DiskSync::Batch : tiers::disk::DiskSync::None},
          layout);
    };
    const auto store = open(store_file, std::nullopt);
    const std::optional<tiers::TierKey> key = detail::tier_bench_key();
    const auto keyed = key ? open(keyed_file, key) : nullptr;
    point.direct_io = store->direct_io();
    std::vector<std::byte> payload(page_bytes);
    for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::byte>(i * 131 + 7);
    const double bytes_moved = static_cast<double>(point.blocks * page_bytes);
    for (std::size_t it = 0; it < iterations; ++it) {
      const auto [w, r] = time_store(*store, payload, it * point.blocks, point.blocks, point.verified_reads);
      writes.push_back(detail::gbps(bytes_moved, w));
      reads.push_back(detail::gbps(bytes_moved, r));
      if (keyed) {
        const auto [kw, kr] = time_store(*keyed, payload, it * point.blocks, point.blocks, point.verified_reads);
        keyed_writes.push_back(detail::gbps(bytes_moved, kw));
        keyed_reads.push_back(detail::gbps(bytes_moved, kr));
      }
      const auto [cw, cr] = time_ceiling(ceiling_file, payload_bytes, sync_batch);
      ceiling_writes.push_back(detail::gbps(static_cast<double>(payload_bytes), cw));
      ceiling_reads.push_back(detail::gbps(static_cast<double>(payload_bytes), cr));
      point.syncs = store->stats().syncs;
      write_ratios.push_back(writes.back() / ceiling_writes.back());
      read_ratios.push_back(reads.back() / ceiling_reads.back());
    }
  }
  std::filesystem::remove(store_file);
  std::filesystem::remove(keyed_file);
  std::filesystem::remove(ceiling_file);
  point.write_gbps = median(writes);
  point.read_gbps = median(reads);
  point.keyed_write_gbps = median(keyed_writes);
  point.keyed_read_gbps = median(keyed_reads);
  point.ceiling_write_gbps = median(ceiling_writes);
  point.ceiling_read_gbps = median(ceiling_reads);
  point.write_of_ceiling = median(write_ratios);
  point.read_of_ceiling = median(read_ratios);
  return point;
}

#else

DiskPoint measure_disk(const std::filesystem::path&, std::size_t, unsigned, std::size_t, std::size_t, bool) {
  throw ConfigError("this kvtier was built without liburing: no disk tier to measure");
}

#endif

}  // namespace kvtier::measure
