#include "kvtier/tiers/disk/disk_store.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"

namespace kvtier::tiers::disk {

void DiskStore::AlignedFree::operator()(std::byte* p) const noexcept { std::free(p); }

DiskStore::DiskStore(const DiskStoreConfig& config, const KvLayout& layout)
    : file_(config.file),
      geometry_(SlotGeometry::of(layout)),
      fingerprint_(layout_fingerprint(layout)),
      queue_(config.queue_depth),
      slots_(config.slots) {
  if (config.slots == 0) throw ConfigError("the disk tier needs at least one slot");
  if (config.queue_depth == 0) throw ConfigError("the disk tier needs a queue depth of at least one");
  recovered_ = scan_slots(file_, geometry_, config.slots, fingerprint_, queue_);
  if (recovered_.other_layout > 0) {
    if (!config.reformat) {
      throw ConfigError("the disk tier's file " + config.file.string() + " holds " +
                        std::to_string(recovered_.other_layout) +
                        " blocks of another layout (model geometry, dtype, block size or page layout); "
                        "reformat it to discard them");
    }
    const std::uint32_t foreign = recovered_.other_layout;
    recovered_ = SlotScan{};  // everything goes
    recovered_.other_layout = foreign;
    file_.resize(0);
  }
  file_.resize(std::uint64_t{config.slots} * geometry_.slot_bytes);  // sparse: disk blocks come with writes
  // Oldest generation first: the least recently written is the first victim.
  std::vector<const ScannedSlot*> by_age;
  for (const ScannedSlot& s : recovered_.resident) by_age.push_back(&s);
  std::sort(by_age.begin(), by_age.end(),
            [](const ScannedSlot* a, const ScannedSlot* b) { return a->meta.generation < b->meta.generation; });
  for (const ScannedSlot* s : by_age) {
    Slot& slot = slots_[s->slot];
    slot.state = State::Resident;
    slot.block = s->meta.block;
    index_.emplace(slot.block.plh, s->slot);
    make_evictable(s->slot);
  }
  for (std::uint32_t s = config.slots; s-- > 0;) {
    if (slots_[s].state == State::Free) free_.push_back(s);  // slot 0 is taken first
  }
  next_generation_ = recovered_.newest_generation + 1;
  const std::size_t buffers = std::size_t{queue_.depth()} + config.backlog;
  buffers_.reset(static_cast<std::byte*>(std::aligned_alloc(kRecordAlignment, buffers * buffer_bytes())));
  if (!buffers_) throw AllocationError("cannot allocate the disk tier's I/O buffers");
  for (auto b = static_cast<std::uint32_t>(buffers); b-- > 0;) free_buffers_.push_back(b);
  read_reserve_ = std::max<std::size_t>(1, buffers / 4);
}

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
  return slots_[it->second].block;
}

std::vector<g1::TieredBlock> DiskStore::resident_blocks() const {
  std::vector<g1::TieredBlock> blocks;
  for (const Slot& slot : slots_) {
    if (slot.state == State::Resident && slot.pins > 0) blocks.push_back(slot.block);  // being read: most recent
  }
  std::vector<g1::TieredBlock> ordered;
  ordered.reserve(lru_.size() + blocks.size());
  for (const std::uint32_t slot : lru_) ordered.push_back(slots_[slot].block);
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
    const std::span<std::byte> slot(buffer(op.buffer), geometry_.slot_bytes);
    const std::uint64_t offset = geometry_.offset(op.slot);
    const bool queued = op.phase == Phase::Read
                            ? queue_.read(file_.fd(), slot, offset, tag)
                            : queue_.write_linked(file_.fd(), slot, offset, tag,
                                                  std::span<const std::byte>(buffer(op.buffer) + geometry_.slot_bytes,
                                                                             geometry_.header_bytes),
                                                  offset, op.header);
    KVTIER_ASSERT(queued, "the I/O queue refused an operation it had room for");
  }
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
  index_.erase(s.block.plh);
  s = Slot{};
  free_.push_back(slot);
}

LowerTier::WriteStart DiskStore::write(const g1::TieredBlock& block, std::span<const std::byte> payload,
                                       std::vector<SequenceHash>& evicted) {
  KVTIER_EXPECTS(payload.size() == geometry_.payload_bytes, "a disk tier write takes one page of ",
                 geometry_.payload_bytes, " bytes, not ", payload.size());
  if (contains(block.plh)) return WriteStart::Present;
  if (free_buffers_.size() <= read_reserve_ || (free_.empty() && lru_.empty())) {
    ++stats_.writes_refused;
    return WriteStart::NoRoom;
  }
  std::uint32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slot = lru_.front();
    lru_.pop_front();
    evicted.push_back(slots_[slot].block.hash);
    index_.erase(slots_[slot].block.plh);
    slots_[slot] = Slot{};
    ++stats_.evictions;
  }
  const std::uint32_t b = free_buffers_.back();
  free_buffers_.pop_back();
  // Phase one: the payload, behind a zeroed header region (the old record is gone first).
  const std::span<std::byte> bytes(buffer(b), geometry_.slot_bytes);
  std::fill(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(geometry_.header_bytes), std::byte{0});
  std::memcpy(bytes.data() + geometry_.header_bytes, payload.data(), payload.size());
  std::fill(bytes.begin() + static_cast<std::ptrdiff_t>(geometry_.header_bytes + payload.size()), bytes.end(),
            std::byte{0});
  // Phase two, linked behind it: the header that makes the slot a record.
  write_record_header(std::span<std::byte>(buffer(b) + geometry_.slot_bytes, geometry_.header_bytes), block,
                      fingerprint_, next_generation_++, payload);
  Slot& s = slots_[slot];
  s.state = State::Writing;
  s.block = block;
  s.writes_pending = 2;
  index_.emplace(block.plh, slot);
  const std::uint64_t tag = next_tag_++;
  const std::uint64_t header = next_tag_++;
  operations_.emplace(tag, Operation{.phase = Phase::Payload, .slot = slot, .buffer = b, .header = header});
  operations_.emplace(header, Operation{.phase = Phase::Header, .slot = slot, .buffer = b});
  write_clock_.start();  // the header's; issue starts the payload's
  issue(tag);
  return WriteStart::Started;
}

std::optional<std::uint64_t> DiskStore::read(std::span<const PositionalLineageHash> plhs,
                                             std::span<std::byte* const> pages) {
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
    pending.done.blocks.push_back(s.block);
    const std::uint32_t b = free_buffers_.back();
    free_buffers_.pop_back();
    const std::uint64_t tag = next_tag_++;
    operations_.emplace(
        tag, Operation{.phase = Phase::Read, .slot = slot, .buffer = b, .read = id, .position = i, .page = pages[i]});
    issue(tag);
  }
  queue_.submit();
  return id;
}

void DiskStore::inject_faults(const DiskFaults& faults) {
  KVTIER_EXPECTS(faults.write_errno > 0, "an injected write failure needs an errno");
  faults_ = faults;
}

std::int64_t DiskStore::faulted(Phase phase, std::int64_t result) {
  const auto due = [](std::uint64_t& countdown) { return countdown != 0 && --countdown == 0; };
  if (phase == Phase::Payload && due(faults_.fail_write)) return -faults_.write_errno;
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
  const IoQueue::Completion completion{.tag = real.tag, .result = faulted(op.phase, real.result)};
  Slot& s = slots_[op.slot];
  if (op.phase != Phase::Read) {
    const std::size_t whole = op.phase == Phase::Payload ? geometry_.slot_bytes : geometry_.header_bytes;
    if (completion.result != static_cast<std::int64_t>(whole)) s.write_failed = true;  // ENOSPC, EIO, short, cancelled
    if (--s.writes_pending > 0) return;
    free_buffers_.push_back(op.buffer);
    if (s.write_failed) {
      ++stats_.write_failures;
      free_slot(op.slot);  // its header region may hold anything but a valid header for other bytes
      return;
    }
    s.state = State::Resident;
    make_evictable(op.slot);
    ++stats_.blocks_written;
    stats_.bytes_written += geometry_.slot_bytes;
    progress.stored.push_back(s.block);
    return;
  }
  free_buffers_.push_back(op.buffer);  // the payload is copied out below, before anything reuses it
  const bool whole = completion.result == static_cast<std::int64_t>(geometry_.slot_bytes);
  PendingRead& pending = reads_.at(op.read);
  bool ok = false;
  if (!whole) {
    ++stats_.read_failures;
  } else {
    const std::span<const std::byte> bytes(buffer(op.buffer), geometry_.slot_bytes);
    BlockRecordMeta meta;
    const std::span<const std::byte> payload = bytes.subspan(geometry_.header_bytes, geometry_.payload_bytes);
    ok = read_record_header(bytes.first(geometry_.header_bytes), fingerprint_, meta) == RecordCheck::Ok &&
         meta.block.plh == s.block.plh && check_payload(meta, payload) == RecordCheck::Ok;
    if (ok) {
      std::memcpy(op.page, payload.data(), payload.size());
      ++stats_.blocks_read;
      stats_.bytes_read += geometry_.slot_bytes;
    } else {
      ++stats_.checksum_failures;
    }
  }
  pending.done.ok[op.position] = ok;
  if (!ok) s.bad = true;
  if (--s.pins == 0) {
    if (s.bad) {
      progress.dropped.push_back(s.block.hash);
      free_slot(op.slot);
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
  for (const IoQueue::Completion& c : queue_.wait()) finish(c, progress);
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
