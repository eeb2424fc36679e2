#include "kvtier/tiers/disk/slot_scan.hpp"
#include "kvtier/core/aligned_bytes.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::tiers::disk {
namespace {

std::size_t aligned_up(std::size_t bytes) noexcept {
  return (bytes + kRecordAlignment - 1) / kRecordAlignment * kRecordAlignment;
}

}  // namespace

SlotGeometry SlotGeometry::of(const KvLayout& layout) noexcept {
  SlotGeometry g;
  g.header_bytes = record_header_bytes(layout.geometry().tokens_per_block);
  g.payload_bytes = layout.page_bytes();
  g.slot_bytes = g.header_bytes + aligned_up(g.payload_bytes);
  return g;
}

SlotGeometry SlotGeometry::of_rows(std::size_t row_bytes) noexcept {
  SlotGeometry g;
  g.header_bytes = record_header_bytes(0, kMaxEngineKeyBytes);
  g.payload_bytes = row_bytes;
  g.slot_bytes = g.header_bytes + aligned_up(g.payload_bytes);
  return g;
}

SlotScan scan_slots(const DirectFile& file, const SlotGeometry& geometry, std::uint64_t slots,
                    const BlockFormats& formats, IoQueue& queue, const TierKey* key) {
  KVTIER_EXPECTS(queue.in_flight() == 0, "the disk slot scan needs an idle I/O queue");
  SlotScan scan;
  const std::size_t depth = queue.depth();
  // One aligned header buffer per read in flight (O_DIRECT needs aligned memory).
  std::unique_ptr<std::byte[], AlignedFree> buffers(
      static_cast<std::byte*>(std::aligned_alloc(kRecordAlignment, depth * geometry.header_bytes)));
  if (!buffers) throw AllocationError("cannot allocate the disk tier's scan buffers");
  std::vector<std::uint32_t> free_buffers;
  for (std::size_t b = depth; b-- > 0;) free_buffers.push_back(static_cast<std::uint32_t>(b));
  std::unordered_map<std::uint64_t, std::uint32_t> slot_of;       // tag -> slot, per buffer in flight
  std::unordered_map<PositionalLineageHash, std::size_t> newest;  // plh -> index in scan.resident

  const auto take = [&](const IoQueue::Completion& done) {
    const auto buffer = static_cast<std::uint32_t>(done.tag);
    const std::uint32_t slot = slot_of.at(done.tag);
    slot_of.erase(done.tag);
    free_buffers.push_back(buffer);
    if (done.result < 0) {
      throw TransferError("reading the header of disk slot " + std::to_string(slot) +
                          " failed: " + std::strerror(static_cast<int>(-done.result)));
    }
    const std::span<const std::byte> header(buffers.get() + std::size_t{buffer} * geometry.header_bytes,
                                            static_cast<std::size_t>(done.result));
    BlockRecordMeta meta;
    switch (read_record_header(header, formats, meta, key)) {
      case RecordCheck::Ok:
        break;
      case RecordCheck::NotARecord:
        ++scan.empty;
        return;
      case RecordCheck::OtherLayout:
        ++scan.other_layout;
        return;
      case RecordCheck::OtherVersion:
        ++scan.other_version;
        return;
      case RecordCheck::Unauthenticated:
        ++scan.unauthenticated;
        return;
      default:  // torn, damaged or cut short: never served
        ++scan.corrupt;
        return;
    }
    scan.newest_generation = std::max(scan.newest_generation, meta.generation);
    const auto [it, inserted] = newest.try_emplace(meta.block.plh, scan.resident.size());
    if (inserted) {
      scan.resident.push_back(ScannedSlot{.slot = slot, .meta = std::move(meta)});
      return;
    }
    ++scan.superseded;
    ScannedSlot& kept = scan.resident[it->second];
    if (meta.generation > kept.meta.generation) {
      kept.slot = slot;
      kept.meta = std::move(meta);
    }
  };

  const std::uint64_t file_bytes = file.size();
  KVTIER_EXPECTS(slots <= UINT32_MAX, "a disk tier has at most 2^32 - 1 slots");
  for (std::uint32_t slot = 0; slot < slots; ++slot) {
    if (geometry.offset(slot) + geometry.header_bytes > file_bytes) {
      ++scan.empty;  // past the end of the file: never written
      continue;
    }
    while (free_buffers.empty()) {
      for (const IoQueue::Completion& done : queue.wait()) take(done);
    }
    const std::uint32_t buffer = free_buffers.back();
    free_buffers.pop_back();
    slot_of.emplace(buffer, slot);
    const bool queued = queue.read(
        file.fd(),
        std::span<std::byte>(buffers.get() + std::size_t{buffer} * geometry.header_bytes, geometry.header_bytes),
        geometry.offset(slot), buffer);
    if (!queued) throw TransferError("the disk tier's I/O queue is busy with other work during its scan");
  }
  while (queue.in_flight() > 0) {
    for (const IoQueue::Completion& done : queue.wait()) take(done);
  }
  // Slot order, whatever order the reads completed in (moved, not swapped:
  // GCC 12 misreads a sort's swaps of optional vectors as uninitialized reads).
  std::vector<std::size_t> order(scan.resident.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return scan.resident[a].slot < scan.resident[b].slot; });
  std::vector<ScannedSlot> sorted;
  sorted.reserve(order.size());
  for (const std::size_t i : order) sorted.push_back(std::move(scan.resident[i]));
  scan.resident = std::move(sorted);
  return scan;
}

}  // namespace kvtier::tiers::disk
