#include "kvtier/tiers/disk/disk_store.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::tiers::disk {

void DiskStore::BusyClock::start() {
  if (in_flight++ == 0) since = std::chrono::steady_clock::now();
}

void DiskStore::BusyClock::stop() {
  if (--in_flight == 0) seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

LowerTierStats DiskStore::stats() const {
  LowerTierStats stats = stats_;
  const auto now = std::chrono::steady_clock::now();
  const auto open = [&](const BusyClock& clock) {
    return clock.seconds + (clock.in_flight > 0 ? std::chrono::duration<double>(now - clock.since).count() : 0.0);
  };
  stats.write_busy_s = open(write_clock_);
  stats.read_busy_s = open(read_clock_);
  return stats;
}

std::optional<g1::TieredBlock> DiskStore::find(const PositionalLineageHash& plh) const {
  const auto it = index_.find(plh);
  if (it == index_.end() || slots_[it->second].state != State::Resident) return std::nullopt;
  return blocks_.at(it->second);
}

std::vector<g1::TieredBlock> DiskStore::resident_blocks() const {
  std::vector<g1::TieredBlock> blocks;
  for (std::uint32_t s = 0; s < slots_.size(); ++s) {
    if (slots_[s].state == State::Resident && slots_[s].pins > 0) blocks.push_back(blocks_.at(s));  // being read
  }
  std::vector<g1::TieredBlock> ordered;
  ordered.reserve(lru_.size() + blocks.size());
  for (const std::uint32_t slot : lru_) ordered.push_back(blocks_.at(slot));
  ordered.insert(ordered.end(), blocks.begin(), blocks.end());
  return ordered;
}

void DiskStore::issue(std::uint64_t tag) {
  const Operation& op = operations_.at(tag);
  (op.phase == Phase::Read ? read_clock_ : write_clock_).start();
  (op.phase == Phase::Read ? waiting_reads_ : waiting_writes_).push_back(tag);
  pump();
}

void DiskStore::pump() {
  while (!queue_.full() && (!waiting_reads_.empty() || !waiting_writes_.empty())) {
    std::deque<std::uint64_t>& waiting = waiting_reads_.empty() ? waiting_writes_ : waiting_reads_;
    const std::uint64_t tag = waiting.front();
    waiting.pop_front();
    const Operation& op = operations_.at(tag);
    const std::uint64_t offset = geometry_.offset(op.slot);
    bool queued = false;
    if (op.phase == Phase::Invalidate) {
      queued = queue_.write(file_.fd(), std::span<const std::byte>(zeroed_header_.get(), geometry_.header_bytes),
                            offset, tag);
    } else if (op.in_place) {
      queued = op.phase == Phase::Read ? queue_.readv(file_.fd(), op.parts, offset, tag)
                                       : queue_.writev(file_.fd(), op.parts, offset, tag);
    } else {
      const std::span<std::byte> slot(buffer(op.buffer), geometry_.slot_bytes);
      queued = op.phase == Phase::Read ? queue_.read(file_.fd(), slot, offset, tag)
                                       : queue_.write(file_.fd(), slot, offset, tag);
    }
    KVTIER_ASSERT(queued, "the I/O queue refused an operation it had room for");
  }
  start_sync();
}

void DiskStore::start_sync() {
  if (unsynced_.empty() || sync_in_flight_ || queue_.full()) return;
  syncing_.swap(unsynced_);
  const std::uint64_t tag = next_tag_++;
  operations_.emplace(tag, Operation{.phase = Phase::Sync});
  write_clock_.start();
  KVTIER_ASSERT(queue_.sync(file_.fd(), tag), "the I/O queue refused a sync it had room for");
  sync_in_flight_ = true;
}

void DiskStore::finish_sync(std::int64_t result, LowerTierProgress& progress) {
  sync_in_flight_ = false;
  if (result == 0) ++stats_.syncs;
  for (const std::uint32_t slot : syncing_) {
    if (result == 0) {
      make_resident(slot, progress);
    } else {
      fail_write(slot, progress);  // not known to be on the disk: never served as stored
    }
  }
  syncing_.clear();
}

void DiskStore::make_resident(std::uint32_t slot, LowerTierProgress& progress) {
  Slot& s = slots_[slot];
  if (disk_full_ && !s.backed) {  // a probe succeeded: the file system has room again
    disk_full_ = false;
    free_.insert(free_.end(), parked_.begin(), parked_.end());
    parked_.clear();
    std::fprintf(stderr, "kvtier: the disk tier's file system has room again under %s\n", file_.path().c_str());
  }
  s.state = State::Resident;
  s.backed = true;
  make_evictable(slot);
  ++stats_.blocks_written;
  stats_.bytes_written += geometry_.slot_bytes;
  progress.stored.push_back(blocks_.at(slot));
}

void DiskStore::fail_write(std::uint32_t slot, LowerTierProgress& progress) {
  ++stats_.write_failures;
  progress.unstored.push_back(blocks_.at(slot));
  if (slots_[slot].no_space) note_disk_full();
  free_slot(slot);  // what reached the disk fails its check at a read: never served
}

DiskStore::~DiskStore() {
  try {
    (void)poll(true);  // a clean close completes the writes in flight, header and all
  } catch (...) {      // a destructor never throws; the I/O in flight still ends before the queue goes
  }
}

std::size_t DiskStore::resident_prefix(std::span<const PositionalLineageHash> plhs) const {
  std::size_t n = 0;
  for (const PositionalLineageHash& plh : plhs) {
    const auto it = index_.find(plh);
    if (it == index_.end() || slots_[it->second].state != State::Resident) break;
    ++n;
  }
  return n;
}

void DiskStore::make_evictable(std::uint32_t slot) { slots_[slot].lru = lru_.insert(lru_.end(), slot); }

void DiskStore::free_slot(std::uint32_t slot) {
  Slot& s = slots_[slot];
  const auto block = blocks_.find(slot);
  if (block != blocks_.end()) {
    index_.erase(block->second.plh);
    blocks_.erase(block);
  }
  const bool backed = s.backed;
  s = Slot{};
  s.backed = backed;
  (disk_full_ && !backed ? parked_ : free_).push_back(slot);  // the file system has no room for a parked one
}

std::optional<std::uint32_t> DiskStore::take_slot(bool probe) {
  if (probe && !parked_.empty()) {
    const std::uint32_t slot = parked_.back();
    parked_.pop_back();
    return slot;
  }
  if (!free_.empty() && !probe) {
    const std::uint32_t slot = free_.back();
    free_.pop_back();
    return slot;
  }
  if ((!disk_full_ || probe) && slots_.size() < capacity_) {
    slots_.emplace_back();
    return static_cast<std::uint32_t>(slots_.size() - 1);
  }
  if (!free_.empty()) {
    const std::uint32_t slot = free_.back();
    free_.pop_back();
    return slot;
  }
  return std::nullopt;
}

void DiskStore::note_disk_full() {
  if (disk_full_) return;
  disk_full_ = true;
  writes_while_full_ = 0;
  // Free slots that never held a block would fail again: parked.
  std::erase_if(free_, [&](std::uint32_t slot) {
    if (slots_[slot].backed) return false;
    parked_.push_back(slot);
    return true;
  });
  std::fprintf(stderr,
               "kvtier: the disk tier's file system is full (ENOSPC) under %s: G3 holds %zu blocks (of %u) and "
               "evicts them to make room, trying a new slot every %u writes\n",
               file_.path().c_str(), blocks_.size(), capacity_, kProbeEvery);
}

void DiskStore::invalidate(std::uint32_t slot) {
  Slot& s = slots_[slot];
  const auto block = blocks_.find(slot);
  if (block != blocks_.end()) {
    index_.erase(block->second.plh);
    blocks_.erase(block);
  }
  s.state = State::Invalidating;
  const std::uint64_t tag = next_tag_++;
  operations_.emplace(tag, Operation{.phase = Phase::Invalidate, .slot = slot});
  issue(tag);
}

LowerTier::WriteStart DiskStore::write(const g1::TieredBlock& block, std::span<const std::byte> payload,
                                       std::vector<g1::TieredBlock>& evicted) {
  KVTIER_EXPECTS(!rows_, "a disk tier of an engine's rows writes in place only");
  return start_write(block, payload, evicted, false);
}

LowerTier::WriteStart DiskStore::write_in_place(const g1::TieredBlock& block, std::span<const std::byte> page,
                                                std::vector<g1::TieredBlock>& evicted) {
  KVTIER_EXPECTS(geometry_.slot_bytes == geometry_.header_bytes + geometry_.payload_bytes,
                 "a disk tier writes in place only pages of whole alignment units");
  KVTIER_EXPECTS(reinterpret_cast<std::uintptr_t>(page.data()) % kRecordAlignment == 0,
                 "a page written in place starts at a multiple of ", kRecordAlignment, " bytes");
  return start_write(block, page, evicted, true);
}

LowerTier::WriteStart DiskStore::start_write(const g1::TieredBlock& block, std::span<const std::byte> payload,
                                             std::vector<g1::TieredBlock>& evicted, bool in_place) {
  KVTIER_EXPECTS(payload.size() == geometry_.payload_bytes, "a disk tier write takes one page of ",
                 geometry_.payload_bytes, " bytes, not ", payload.size());
  KVTIER_EXPECTS(rows_ == !block.engine_key.empty(),
                 rows_ ? "a row store's blocks carry engine keys" : "an engine's keyed blocks go to a row store");
  if (contains(block.plh)) return WriteStart::Present;
  if (!formats_.accepts(block)) {
    ++stats_.format_refusals;  // a record is written only in its key's group and format
    return WriteStart::NoRoom;
  }
  const bool unbacked_left = !parked_.empty() || slots_.size() < capacity_;
  const bool room = !free_.empty() || !lru_.empty() || unbacked_left;
  if (free_buffers_.size() <= read_reserve_ || !room) {
    ++stats_.writes_refused;
    return WriteStart::NoRoom;
  }
  // A full file system: now and then (or when nothing else is left) a slot
  // that never held a block is tried again: room may have come back.
  const bool probe =
      disk_full_ && unbacked_left && ((free_.empty() && lru_.empty()) || ++writes_while_full_ % kProbeEvery == 0);
  std::uint32_t slot;
  if (const auto taken = take_slot(probe)) {
    slot = *taken;
  } else {
    slot = lru_.front();
    lru_.pop_front();
    const auto victim = blocks_.find(slot);
    evicted.push_back(victim->second);
    index_.erase(victim->second.plh);
    blocks_.erase(victim);
    const bool backed = slots_[slot].backed;
    slots_[slot] = Slot{};
    slots_[slot].backed = backed;
    ++stats_.evictions;
  }
  const std::uint32_t b = free_buffers_.back();
  free_buffers_.pop_back();
  // The whole slot in one I/O: the header, which vouches for the payload by
  // its checksum, then the payload and the padding to the slot's end.
  Operation op{.phase = Phase::Write, .slot = slot, .buffer = b, .in_place = in_place};
  const std::span<std::byte> header(buffer(b), geometry_.header_bytes);
  if (in_place) {
    op.source = payload.data();
    op.parts = {iovec{header.data(), header.size()},
                iovec{const_cast<std::byte*>(payload.data()), payload.size()}};  // NOLINT: writev reads it only
  } else {
    const std::span<std::byte> bytes(buffer(b), geometry_.slot_bytes);
    std::memcpy(bytes.data() + geometry_.header_bytes, payload.data(), payload.size());
    std::fill(bytes.begin() + static_cast<std::ptrdiff_t>(geometry_.header_bytes + payload.size()), bytes.end(),
              std::byte{0});
  }
  write_record_header(header, block, formats_, next_generation_++, payload, key());
  Slot& s = slots_[slot];
  s.state = State::Writing;
  blocks_.insert_or_assign(slot, block);
  index_.emplace(block.plh, slot);
  const std::uint64_t tag = next_tag_++;
  operations_.emplace(tag, op);
  issue(tag);
  return WriteStart::Started;
}

std::optional<std::uint64_t> DiskStore::read(std::span<const PositionalLineageHash> plhs,
                                             std::span<std::byte* const> pages) {
  KVTIER_EXPECTS(!rows_, "a disk tier of an engine's rows reads in place only");
  return start_read(plhs, pages, false);
}

std::optional<std::uint64_t> DiskStore::read_in_place(std::span<const PositionalLineageHash> plhs,
                                                      std::span<std::byte* const> pages) {
  KVTIER_EXPECTS(geometry_.slot_bytes == geometry_.header_bytes + geometry_.payload_bytes,
                 "a disk tier reads in place only pages of whole alignment units");
  for (std::byte* const page : pages) {
    KVTIER_EXPECTS(reinterpret_cast<std::uintptr_t>(page) % kRecordAlignment == 0,
                   "a page read in place starts at a multiple of ", kRecordAlignment, " bytes");
  }
  return start_read(plhs, pages, true);
}

void DiskStore::touch(const PositionalLineageHash& plh) {
  const auto it = index_.find(plh);
  if (it == index_.end()) return;
  const Slot& s = slots_[it->second];
  if (s.state == State::Resident && s.pins == 0) lru_.splice(lru_.end(), lru_, s.lru);
}

void DiskStore::demote(const PositionalLineageHash& plh) {
  const auto it = index_.find(plh);
  if (it == index_.end()) return;
  const Slot& s = slots_[it->second];
  if (s.state == State::Resident && s.pins == 0) lru_.splice(lru_.begin(), lru_, s.lru);
}

std::optional<std::uint64_t> DiskStore::start_read(std::span<const PositionalLineageHash> plhs,
                                                   std::span<std::byte* const> pages, bool in_place) {
  KVTIER_EXPECTS(plhs.size() == pages.size(), "a disk tier read needs one page per block");
  KVTIER_EXPECTS(resident_prefix(plhs) == plhs.size(), "a disk tier read of blocks that are not resident");
  if (plhs.empty() || free_buffers_.size() < plhs.size()) return std::nullopt;
  const std::uint64_t id = next_read_++;
  PendingRead& pending = reads_[id];
  pending.remaining = plhs.size();
  pending.done.id = id;
  pending.done.ok.assign(plhs.size(), false);
  for (std::size_t i = 0; i < plhs.size(); ++i) {
    const std::uint32_t slot = index_.at(plhs[i]);
    Slot& s = slots_[slot];
    if (s.pins++ == 0) lru_.erase(s.lru);  // pinned: not evictable while read
    pending.done.blocks.push_back(blocks_.at(slot));
    const std::uint32_t b = free_buffers_.back();
    free_buffers_.pop_back();
    const std::uint64_t tag = next_tag_++;
    Operation op{.phase = Phase::Read,
                 .slot = slot,
                 .buffer = b,
                 .read = id,
                 .position = i,
                 .page = pages[i],
                 .in_place = in_place};
    if (in_place) {
      op.parts = {iovec{buffer(b), geometry_.header_bytes}, iovec{pages[i], geometry_.payload_bytes}};
    }
    operations_.emplace(tag, op);
    issue(tag);
  }
  queue_.submit();
  return id;
}

void DiskStore::inject_faults(const DiskFaults& faults) {
  KVTIER_EXPECTS(faults.write_errno > 0, "an injected write failure needs an errno");
  faults_ = faults;
}

std::int64_t DiskStore::faulted(Phase phase, const Slot& slot, std::int64_t result) {
  const auto due = [](std::uint64_t& countdown) { return countdown != 0 && --countdown == 0; };
  if (phase == Phase::Write && due(faults_.fail_write)) return -faults_.write_errno;
  if (phase == Phase::Write && !slot.backed && faults_.room_for_new_slots) {
    if (*faults_.room_for_new_slots == 0) return -ENOSPC;
    --*faults_.room_for_new_slots;
  }
  if (phase == Phase::Read) {
    const bool fail = due(faults_.fail_read);
    const bool cut = due(faults_.short_read);
    if (fail) return -EIO;
    if (cut && result > 0) return result / 2;
  }
  return result;
}

void DiskStore::finish(const IoQueue::Completion& real, LowerTierProgress& progress) {
  const auto it = operations_.find(real.tag);
  KVTIER_ASSERT(it != operations_.end(), "an I/O completion of no operation");
  const Operation op = it->second;
  operations_.erase(it);
  (op.phase == Phase::Read ? read_clock_ : write_clock_).stop();
  if (op.phase == Phase::Sync) {
    const bool fail = faults_.fail_sync != 0 && --faults_.fail_sync == 0;
    finish_sync(fail ? -EIO : real.result, progress);
    return;
  }
  Slot& s = slots_[op.slot];
  const IoQueue::Completion completion{.tag = real.tag, .result = faulted(op.phase, s, real.result)};
  if (op.phase == Phase::Invalidate) {
    // Zeroed or not, the slot is free again: a failed zeroing leaves a header
    // whose payload fails once more at the next restart's first read.
    s.state = State::Free;
    free_slot(op.slot);
    return;
  }
  if (op.phase != Phase::Read) {
    if (completion.result != static_cast<std::int64_t>(geometry_.slot_bytes))
      s.write_failed = true;  // ENOSPC, EIO, short
    if (completion.result == -ENOSPC) s.no_space = true;
    free_buffers_.push_back(op.buffer);
    if (s.write_failed) {
      fail_write(op.slot, progress);
      return;
    }
    if (sync_ == DiskSync::Batch) {
      unsynced_.push_back(op.slot);  // stored once the next fdatasync completed (pump starts it)
      return;
    }
    make_resident(op.slot, progress);
    return;
  }
  free_buffers_.push_back(op.buffer);  // the payload is checked (and copied out) below, before anything reuses it
  const bool whole = completion.result == static_cast<std::int64_t>(geometry_.slot_bytes);
  PendingRead& pending = reads_.at(op.read);
  bool ok = false;
  if (!whole) {
    ++stats_.read_failures;
  } else {
    BlockRecordMeta meta;
    const std::span<const std::byte> header(buffer(op.buffer), geometry_.header_bytes);
    const std::span<const std::byte> payload(op.in_place ? op.page : buffer(op.buffer) + geometry_.header_bytes,
                                             geometry_.payload_bytes);
    RecordCheck check = read_record_header(header, formats_, meta, key());
    const g1::TieredBlock& expected = blocks_.at(op.slot);
    if (check == RecordCheck::Ok && (meta.block.plh != expected.plh || meta.block.engine_key != expected.engine_key)) {
      check = RecordCheck::HeaderCorrupt;  // another block's record in the slot: never this one's bytes
    }
    if (check == RecordCheck::Ok) check = check_payload(meta, header, payload, key());
    ok = check == RecordCheck::Ok;
    if (ok) {
      if (!op.in_place) std::memcpy(op.page, payload.data(), payload.size());
      ++stats_.blocks_read;
      stats_.bytes_read += geometry_.slot_bytes;
    } else {
      ++stats_.checksum_failures;
      if (check == RecordCheck::OtherLayout) ++stats_.format_refusals;
      if (check == RecordCheck::Unauthenticated || check == RecordCheck::Forged) ++stats_.authentication_failures;
    }
  }
  pending.done.ok[op.position] = ok;
  if (!ok) s.bad = true;
  if (--s.pins == 0) {
    if (s.bad) {
      progress.dropped.push_back(blocks_.at(op.slot));
      invalidate(op.slot);  // its header goes: a restart must not find the block again
    } else {
      make_evictable(op.slot);  // most recently used
    }
  }
  if (--pending.remaining == 0) {
    progress.reads.push_back(std::move(pending.done));
    reads_.erase(op.read);
  }
}

LowerTierProgress DiskStore::wait_some() {
  LowerTierProgress progress;
  pump();
  const std::vector<IoQueue::Completion> ended = queue_.wait();
  // The room they left goes to waiting operations first: the device works
  // while the reads that ended are checked (a row's XXH3 takes a while).
  pump();
  queue_.submit();
  for (const IoQueue::Completion& c : ended) finish(c, progress);
  pump();
  return progress;
}

LowerTierProgress DiskStore::poll(bool wait) {
  LowerTierProgress progress;
  pump();
  for (const IoQueue::Completion& c : queue_.reap()) finish(c, progress);
  pump();
  while (wait && queue_.in_flight() > 0) {
    for (const IoQueue::Completion& c : queue_.wait()) finish(c, progress);
    pump();
  }
  return progress;
}

}  // namespace kvtier::tiers::disk
