// Opening a G3 store: the checked directory and file, the file header (a
// file that is not a kvtier tier is never written), room on the file system
// and in memory, the restart scan and a smaller capacity's shrink.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kvtier/core/aligned_bytes.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/core/expects.hpp"
#include "kvtier/memory/memory_budget.hpp"
#include "kvtier/tiers/disk/disk_store.hpp"
#include "kvtier/tiers/disk/slot_shrink.hpp"
#include "kvtier/tiers/disk/tier_file_header.hpp"

namespace kvtier::tiers::disk {
namespace {

/// Everything a configuration can get wrong, before the file is touched.
std::uint32_t checked_capacity(const DiskStoreConfig& config) {
  if (config.slots == 0) throw ConfigError("the disk tier needs at least one slot");
  if (config.queue_depth == 0) throw ConfigError("the disk tier needs a queue depth of at least one");
  // A quarter of the buffers (at least one) is kept for reads: one buffer alone would never write.
  if (std::size_t{config.queue_depth} + config.backlog < 2) {
    throw ConfigError("the disk tier needs a queue depth + backlog of at least 2 (one buffer is kept for reads): " +
                      std::to_string(config.queue_depth) + " + " + std::to_string(config.backlog) +
                      " would never write a block");
  }
  if (config.queue_depth > 4096) throw ConfigError("the disk tier's queue depth is at most 4096");
  if (config.backlog > 65536) throw ConfigError("the disk tier's backlog is at most 65536 blocks");
  return config.slots;
}

std::string gigabytes(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GB", static_cast<double>(bytes) / 1e9);
  return text;
}

AlignedBytes aligned_bytes(std::size_t bytes) {
  return allocate_aligned(kRecordAlignment, bytes, std::to_string(bytes) + " bytes for the disk tier");
}

/// The file system must have room for the whole tier: a sparse file fills
/// later, silently. What the file holds already counts as room.
void check_room(const TierDirectory& directory, const std::string& name, const SlotGeometry& geometry,
                std::uint32_t capacity) {
  struct statvfs fs {};
  if (::fstatvfs(directory.fd(), &fs) != 0) {
    throw ConfigError("cannot examine the file system of " + directory.path().string() + ": " + std::strerror(errno));
  }
  struct stat st {};
  const std::uint64_t held =
      ::fstatat(directory.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)
          ? static_cast<std::uint64_t>(st.st_blocks) * 512
          : 0;
  const std::uint64_t room = held + static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
  const std::uint64_t needed = geometry.file_bytes(capacity);
  if (needed <= room) return;
  const std::uint64_t fits = room <= kTierFileHeaderBytes ? 0 : (room - kTierFileHeaderBytes) / geometry.slot_bytes;
  throw ConfigError("the disk tier needs " + gigabytes(needed) + " for " + std::to_string(capacity) + " blocks of " +
                    std::to_string(geometry.slot_bytes) + " bytes, and the file system of " +
                    directory.path().string() + " has " + gigabytes(room - held) + " free (" + gigabytes(held) +
                    " already the tier's): at most " + std::to_string(fits) + " blocks fit");
}

/// Records a reformat discards, counted where the old file's slot size is
/// known (its header's, or a format 1 file's first record's sizes); 0 otherwise.
std::uint32_t count_records(const DirectFile& file, TierFileCheck check, const TierFileIdentity& found) {
  constexpr std::uint64_t kRecordMagic = 0x313043455254564BULL;  // "KVTREC01"
  AlignedBytes page = aligned_bytes(kRecordAlignment);
  const auto magic_at = [&](std::uint64_t offset) {
    if (::pread(file.fd(), page.get(), kRecordAlignment, static_cast<off_t>(offset)) <
        static_cast<ssize_t>(sizeof(kRecordMagic))) {
      return false;
    }
    std::uint64_t magic = 0;
    std::memcpy(&magic, page.get(), sizeof(magic));
    return magic == kRecordMagic;
  };
  std::uint64_t first = kTierFileHeaderBytes;
  std::uint64_t slot_bytes = found.slot_bytes;
  if (check == TierFileCheck::FormatOne && magic_at(0)) {
    std::uint32_t header_bytes = 0;
    std::uint64_t payload_bytes = 0;
    std::memcpy(&header_bytes, page.get() + 12, sizeof(header_bytes));    // format 1: header bytes at 12,
    std::memcpy(&payload_bytes, page.get() + 40, sizeof(payload_bytes));  // payload bytes at 40
    first = 0;
    slot_bytes = header_bytes + (payload_bytes + kRecordAlignment - 1) / kRecordAlignment * kRecordAlignment;
  } else if (check != TierFileCheck::OtherLayout && check != TierFileCheck::OtherKey) {
    return 0;
  }
  if (slot_bytes == 0 || slot_bytes % kRecordAlignment != 0) return 0;
  const std::uint64_t size = file.size();
  std::uint32_t records = 0;
  for (std::uint64_t at = first; at + kRecordAlignment <= size && records < UINT32_MAX; at += slot_bytes) {
    records += magic_at(at) ? 1 : 0;
  }
  return records;
}

/// A row store's slots: rows the size O_DIRECT moves in place.
SlotGeometry checked_rows(const RowShape& rows) {
  if (rows.row_bytes == 0 || rows.row_bytes % kRecordAlignment != 0) {
    throw ConfigError("the disk tier's rows must be a positive multiple of " + std::to_string(kRecordAlignment) +
                      " bytes, not " + std::to_string(rows.row_bytes));
  }
  if (rows.fingerprint == 0) throw ConfigError("the disk tier's rows need a namespace fingerprint other than 0");
  return SlotGeometry::of_rows(rows.row_bytes);
}

}  // namespace

DiskStore::DiskStore(const DiskStoreConfig& config, const KvLayout& layout)
    : DiskStore(config, SlotGeometry::of(layout), layout_fingerprint(layout),
                // a slot record, the block (hashes, token ids) and two hash map entries
                sizeof(Slot) + sizeof(g1::TieredBlock) + layout.geometry().tokens_per_block * sizeof(TokenId) +
                    4 * sizeof(void*) * 4,
                false) {}

DiskStore::DiskStore(const DiskStoreConfig& config, const RowShape& rows)
    : DiskStore(config, checked_rows(rows), rows.fingerprint,
                // a slot record, the block, its engine key (vLLM's: at most 36 bytes) and two hash map entries
                sizeof(Slot) + sizeof(g1::TieredBlock) + 64 + 4 * sizeof(void*) * 4, true) {}

DiskStore::DiskStore(const DiskStoreConfig& config, const SlotGeometry& geometry, std::uint64_t fingerprint,
                     std::size_t index_bytes_per_block, bool rows)
    : key_(config.key),
      geometry_(geometry),
      rows_(rows),
      buffer_bytes_(rows ? geometry.header_bytes : geometry.slot_bytes),
      fingerprint_(fingerprint),
      formats_(fingerprint_, config.group_formats),
      capacity_(checked_capacity(config)),
      queue_(config.queue_depth),
      sync_(config.sync) {
  // Memory first: nothing on disk changes for a tier this machine cannot hold.
  const std::size_t buffers = std::size_t{queue_.depth()} + config.backlog;
  memory::check_host_allocation(buffers * buffer_bytes_, "the disk tier's I/O buffers");
  memory::check_host_allocation(std::size_t{capacity_} * index_bytes_per_block,
                                "the disk tier's index at full capacity");
  directory_.emplace(config.file.has_parent_path() ? config.file.parent_path() : std::filesystem::path("."),
                     TierDirectory::Access::Create);
  try {
    check_room(*directory_, config.file.filename().string(), geometry_, capacity_);
  } catch (...) {
    directory_->remove_if_created();  // refused: nothing is left behind
    throw;
  }
  file_ = DirectFile(*directory_, config.file.filename().string(), DirectFile::Mode::ReadWrite);
  open_file(config);
  buffers_.reset(static_cast<std::byte*>(std::aligned_alloc(kRecordAlignment, buffers * buffer_bytes_)));
  if (!buffers_) throw AllocationError("cannot allocate the disk tier's I/O buffers");
  zeroed_header_.reset(static_cast<std::byte*>(std::aligned_alloc(kRecordAlignment, geometry_.header_bytes)));
  if (!zeroed_header_) throw AllocationError("cannot allocate the disk tier's I/O buffers");
  std::memset(zeroed_header_.get(), 0, geometry_.header_bytes);
  for (auto b = static_cast<std::uint32_t>(buffers); b-- > 0;) free_buffers_.push_back(b);
  read_reserve_ = std::max<std::size_t>(1, buffers / 4);
}

void DiskStore::open_file(const DiskStoreConfig& config) {
  const TierFileIdentity identity{
      .layout_fingerprint = fingerprint_, .slot_bytes = geometry_.slot_bytes, .key_id = key_ ? key_->id() : 0};
  const std::string name = file_.path().string();
  if (file_.size() == 0) {
    write_tier_file_header(file_, identity);
  } else {
    TierFileIdentity found;
    const TierFileCheck check = read_tier_file_header(file_, identity, found);
    if (check == TierFileCheck::NotATierFile) {
      throw ConfigError("the disk tier's file " + name +
                        " is not a kvtier tier file (no tier header): refused and left untouched; remove it or "
                        "give another directory");
    }
    if (check != TierFileCheck::Ok) {
      if (!config.reformat) {
        std::string why = tier_file_check_name(check);
        if (check == TierFileCheck::OtherKey) {
          why = found.key_id == 0      ? "a tier written without a tier key (this one has one)"
                : identity.key_id == 0 ? "a tier written under a tier key (give it, or reformat)"
                                       : "a tier written under another tier key";
        }
        throw ConfigError("the disk tier's file " + name + " holds " + why +
                          " (model geometry, dtype, block size, page layout, format or key differ); reformat it "
                          "(--disk-reformat) to discard its blocks");
      }
      recovered_.discarded = count_records(file_, check, found);
      file_.resize(0);
      write_tier_file_header(file_, identity);
      recovered_.reformatted = true;
    }
  }
  const std::uint64_t file_slots = std::min<std::uint64_t>(geometry_.slots_in(file_.size()), UINT32_MAX);
  {
    const SlotScan before = recovered_;
    recovered_ = scan_slots(file_, geometry_, file_slots, formats_, queue_, key());
    recovered_.reformatted = before.reformatted;
    recovered_.discarded = before.discarded;
  }
  if (recovered_.other_layout > 0 || recovered_.other_version > 0) {
    const std::uint32_t foreign = recovered_.other_layout + recovered_.other_version;
    if (!config.reformat) {
      throw ConfigError("the disk tier's file " + name + " holds " + std::to_string(foreign) +
                        " blocks of another layout, page format or record format version (model geometry, dtype, "
                        "--kv-cache-dtype, KV cache groups, block size, "
                        "page layout or kvtier version); reformat it (--disk-reformat) to discard them");
    }
    const std::uint32_t discarded = static_cast<std::uint32_t>(recovered_.resident.size()) + foreign;
    file_.resize(0);
    write_tier_file_header(file_, identity);
    recovered_ = SlotScan{};
    recovered_.reformatted = true;
    recovered_.discarded = discarded;
  }
  if (file_slots > capacity_ || recovered_.resident.size() > capacity_) {
    recovered_.dropped_on_shrink = shrink_slots(file_, geometry_, recovered_, capacity_, formats_, key());
  }
  file_.resize(geometry_.file_bytes(capacity_));  // sparse: disk blocks come with writes
  // Oldest generation first: the least recently written is the first victim.
  std::vector<const ScannedSlot*> by_age;
  std::uint32_t highest = 0;
  for (const ScannedSlot& s : recovered_.resident) {
    by_age.push_back(&s);
    highest = std::max(highest, s.slot + 1);
  }
  std::sort(by_age.begin(), by_age.end(),
            [](const ScannedSlot* a, const ScannedSlot* b) { return a->meta.generation < b->meta.generation; });
  slots_.resize(highest);
  for (const ScannedSlot* s : by_age) {
    Slot& slot = slots_[s->slot];
    slot.state = State::Resident;
    slot.backed = true;
    blocks_.emplace(s->slot, s->meta.block);
    index_.emplace(s->meta.block.plh, s->slot);
    make_evictable(s->slot);
  }
  for (std::uint32_t s = highest; s-- > 0;) {
    if (slots_[s].state == State::Free) free_.push_back(s);  // the lowest free slot is taken first
  }
  next_generation_ = recovered_.newest_generation + 1;
}

}  // namespace kvtier::tiers::disk
