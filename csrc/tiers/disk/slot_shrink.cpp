#include "kvtier/tiers/disk/slot_shrink.hpp"
#include "kvtier/core/aligned_bytes.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kvtier/core/errors.hpp"

namespace kvtier::tiers::disk {
namespace {

void read_at(const DirectFile& file, std::span<std::byte> into, std::uint64_t offset) {
  std::size_t done = 0;
  while (done < into.size()) {
    const ssize_t n = ::pread(file.fd(), into.data() + done, into.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw TransferError("moving a block within the disk tier: reading at " + std::to_string(offset) +
                          " failed: " + (n < 0 ? std::strerror(errno) : "end of file"));
    }
    done += static_cast<std::size_t>(n);
  }
}

void write_at(const DirectFile& file, std::span<const std::byte> from, std::uint64_t offset) {
  std::size_t done = 0;
  while (done < from.size()) {
    const ssize_t n = ::pwrite(file.fd(), from.data() + done, from.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw TransferError("moving a block within the disk tier: writing at " + std::to_string(offset) +
                          " failed: " + (n < 0 ? std::strerror(errno) : "nothing written"));
    }
    done += static_cast<std::size_t>(n);
  }
}

/// `slots` reordered by `before` (moved through an index order: GCC 12 misreads
/// a sort's swaps of optional vectors as uninitialized reads).
template <class Before>
std::vector<ScannedSlot> sorted(std::vector<ScannedSlot> slots, Before before) {
  std::vector<std::size_t> order(slots.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return before(slots[a], slots[b]); });
  std::vector<ScannedSlot> out;
  out.reserve(order.size());
  for (const std::size_t i : order) out.push_back(std::move(slots[i]));
  return out;
}

}  // namespace

std::uint32_t shrink_slots(const DirectFile& file, const SlotGeometry& geometry, SlotScan& scan, std::uint32_t capacity,
                           const BlockFormats& formats, const TierKey* key) {
  const bool beyond =
      std::any_of(scan.resident.begin(), scan.resident.end(), [&](const ScannedSlot& s) { return s.slot >= capacity; });
  if (!beyond) return 0;  // every block has a slot below capacity: nothing moves
  std::vector<ScannedSlot> newest = sorted(std::move(scan.resident), [](const ScannedSlot& a, const ScannedSlot& b) {
    return a.meta.generation > b.meta.generation;
  });
  const std::size_t keep = std::min<std::size_t>(capacity, newest.size());
  std::vector<bool> taken(capacity, false);
  for (std::size_t i = 0; i < keep; ++i) {
    if (newest[i].slot < capacity) taken[newest[i].slot] = true;
  }
  std::unique_ptr<std::byte[], AlignedFree> buffer(
      static_cast<std::byte*>(std::aligned_alloc(kRecordAlignment, geometry.slot_bytes)));
  if (!buffer) throw AllocationError("cannot allocate a buffer to move disk tier blocks");
  const std::span<std::byte> slot_bytes(buffer.get(), geometry.slot_bytes);
  const std::span<std::byte> header = slot_bytes.first(geometry.header_bytes);
  // Dropped blocks below capacity lose their header first (a restart must not
  // find them again); then their slots take the blocks that move.
  std::fill(header.begin(), header.end(), std::byte{0});
  for (std::size_t i = keep; i < newest.size(); ++i) {
    if (newest[i].slot < capacity) write_at(file, header, geometry.offset(newest[i].slot));
  }
  std::uint32_t next_free = 0;
  std::vector<ScannedSlot> kept;
  for (std::size_t i = 0; i < keep; ++i) {
    ScannedSlot& s = newest[i];
    if (s.slot < capacity) {
      kept.push_back(std::move(s));
      continue;
    }
    read_at(file, slot_bytes, geometry.offset(s.slot));
    BlockRecordMeta meta;
    const std::span<const std::byte> payload = slot_bytes.subspan(geometry.header_bytes, geometry.payload_bytes);
    if (read_record_header(header, formats, meta, key) != RecordCheck::Ok ||
        check_payload(meta, header, payload, key) != RecordCheck::Ok) {
      ++scan.corrupt;  // not moved: never served
      continue;
    }
    while (taken[next_free]) ++next_free;
    taken[next_free] = true;
    // Payload first behind a zeroed header region, then the header: a kill in
    // between leaves the old copy whole and the new one without a header.
    std::vector<std::byte> saved(header.begin(), header.end());
    std::fill(header.begin(), header.end(), std::byte{0});
    write_at(file, slot_bytes, geometry.offset(next_free));
    std::copy(saved.begin(), saved.end(), header.begin());
    write_at(file, header, geometry.offset(next_free));
    s.slot = next_free;
    kept.push_back(std::move(s));
  }
  scan.resident = sorted(std::move(kept), [](const ScannedSlot& a, const ScannedSlot& b) { return a.slot < b.slot; });
  return static_cast<std::uint32_t>(newest.size() - keep);
}

}  // namespace kvtier::tiers::disk
