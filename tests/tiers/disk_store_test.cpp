// G3's store: blocks become visible only when their writes completed, come
// back byte for byte after a verified read, survive a restart, are evicted
// least recently used first, and a damaged slot is never served.
#include "kvtier/tiers/disk/disk_store.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <random>
#include <vector>

#include "kvtier/core/errors.hpp"
#include "support/scratch_directory.hpp"

namespace kvtier::tiers::disk {
namespace {

KvLayout layout(PageLayout kind = PageLayout::PageMajor) {
  return KvLayout(
      KvGeometry{.layers = 2, .kv_heads = 2, .head_dim = 16, .dtype = KvDtype::Bf16, .tokens_per_block = 16}, kind, 8);
}

g1::TieredBlock block(std::uint64_t n) {
  return g1::TieredBlock{.plh = PositionalLineageHash::from_raw(0, n),
                         .hash = SequenceHash(n * 100),
                         .parent = n > 1 ? std::optional<SequenceHash>((n - 1) * 100) : std::nullopt,
                         .local = LocalBlockHash(n),
                         .token_ids = std::nullopt};
}

std::vector<std::byte> page_of(std::uint64_t n, std::size_t bytes) {
  std::vector<std::byte> page(bytes);
  for (std::size_t i = 0; i < bytes; ++i) page[i] = static_cast<std::byte>((n * 37 + i * 11) & 0xFF);
  return page;
}

class DiskStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<kvtier::testing::ScratchDirectory>("kvtier-disk-store");
    dir_ = scratch_->path();
  }
  DiskStoreConfig config(std::uint32_t slots, bool reformat = false) const {
    return DiskStoreConfig{.file = dir_ / "g3.slots", .slots = slots, .queue_depth = 4, .reformat = reformat};
  }
  /// Writes blocks [first, last] and waits until they are visible.
  void put(DiskStore& store, std::uint64_t first, std::uint64_t last, std::vector<g1::TieredBlock>* evicted = nullptr) {
    std::vector<g1::TieredBlock> gone;
    for (std::uint64_t n = first; n <= last; ++n) {
      const auto page = page_of(n, store.geometry().payload_bytes);
      ASSERT_EQ(store.write(block(n), page, gone), DiskStore::WriteStart::Started) << "block " << n;
      (void)store.poll(true);
    }
    if (evicted) *evicted = gone;
  }
  /// Reads block n back; true when it verified and its bytes are its own.
  bool read_back(DiskStore& store, std::uint64_t n, LowerTierProgress* out = nullptr) {
    std::vector<std::byte> page(store.geometry().payload_bytes);
    const std::vector<PositionalLineageHash> plhs{block(n).plh};
    std::byte* const pages[] = {page.data()};
    const auto id = store.read(plhs, pages);
    EXPECT_TRUE(id.has_value());
    LowerTierProgress progress = store.poll(true);
    EXPECT_EQ(progress.reads.size(), 1U);
    const bool ok = !progress.reads.empty() && progress.reads[0].ok[0];
    if (out) *out = progress;
    return ok && page == page_of(n, store.geometry().payload_bytes);
  }
  std::unique_ptr<kvtier::testing::ScratchDirectory> scratch_;
  std::filesystem::path dir_;
};

TEST_F(DiskStoreTest, AWriteIsVisibleOnlyOnceItCompleted) {
  DiskStore store(config(4), layout());
  std::vector<g1::TieredBlock> evicted;
  const auto page = page_of(1, store.geometry().payload_bytes);
  ASSERT_EQ(store.write(block(1), page, evicted), DiskStore::WriteStart::Started);
  const std::vector<PositionalLineageHash> plhs{block(1).plh};
  EXPECT_TRUE(store.contains(block(1).plh));   // the presence filter sees it
  EXPECT_EQ(store.resident_prefix(plhs), 0U);  // but it is not served yet
  EXPECT_EQ(store.write(block(1), page, evicted), DiskStore::WriteStart::Present);
  const LowerTierProgress progress = store.poll(true);
  ASSERT_EQ(progress.stored.size(), 1U);
  EXPECT_EQ(progress.stored[0].hash, block(1).hash);
  EXPECT_EQ(store.resident_prefix(plhs), 1U);
  EXPECT_EQ(store.stats().blocks_written, 1U);
}

TEST_F(DiskStoreTest, BlocksComeBackByteForByte) {
  DiskStore store(config(8), layout());
  put(store, 1, 5);
  const std::vector<PositionalLineageHash> plhs{block(1).plh, block(2).plh, block(3).plh, block(9).plh};
  EXPECT_EQ(store.resident_prefix(plhs), 3U);
  for (std::uint64_t n = 1; n <= 5; ++n) EXPECT_TRUE(read_back(store, n)) << "block " << n;
  EXPECT_EQ(store.stats().blocks_read, 5U);
  EXPECT_EQ(store.stats().checksum_failures, 0U);
}

TEST_F(DiskStoreTest, ARestartFindsWhatTheFileHolds) {
  {
    DiskStore store(config(8), layout());
    put(store, 1, 3);
  }
  {
    DiskStore reopened(config(8), layout());
    EXPECT_EQ(reopened.recovered().resident.size(), 3U);
    EXPECT_EQ(reopened.recovered().newest_generation, 3U);
    EXPECT_EQ(reopened.used(), 3U);
    for (std::uint64_t n = 1; n <= 3; ++n) EXPECT_TRUE(read_back(reopened, n)) << "block " << n;
    put(reopened, 4, 4);  // generations continue where the file left them
  }
  DiskStore again(config(8), layout());
  EXPECT_EQ(again.recovered().resident.size(), 4U);
  EXPECT_EQ(again.recovered().newest_generation, 4U);
}

TEST_F(DiskStoreTest, TheLeastRecentlyUsedBlockIsEvictedFirst) {
  DiskStore store(config(3), layout());
  put(store, 1, 3);
  EXPECT_TRUE(read_back(store, 1));  // 1 is used again: 2 is now the oldest
  std::vector<g1::TieredBlock> evicted;
  put(store, 4, 4, &evicted);
  ASSERT_EQ(evicted.size(), 1U);
  EXPECT_EQ(evicted[0].hash, block(2).hash);
  EXPECT_FALSE(store.contains(block(2).plh));
  EXPECT_EQ(store.stats().evictions, 1U);
}

TEST_F(DiskStoreTest, ADamagedSlotIsNeverServedAndIsDropped) {
  std::uint64_t slot_one = 0;
  std::size_t header_bytes = 0;
  {
    DiskStore store(config(4), layout());
    put(store, 1, 2);
    slot_one = store.geometry().offset(1);
    header_bytes = store.geometry().header_bytes;
  }
  // Flip one payload byte of block 2 (slot 1) between runs.
  const int fd = ::open((dir_ / "g3.slots").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  std::byte b{};
  const off_t at = static_cast<off_t>(slot_one + header_bytes + 100);
  ASSERT_EQ(::pread(fd, &b, 1, at), 1);
  b ^= std::byte{0x40};
  ASSERT_EQ(::pwrite(fd, &b, 1, at), 1);
  ::close(fd);
  DiskStore store(config(4), layout());
  ASSERT_EQ(store.used(), 2U);  // the header still verifies: found at restart
  LowerTierProgress progress;
  EXPECT_FALSE(read_back(store, 2, &progress));
  ASSERT_EQ(progress.dropped.size(), 1U);
  EXPECT_EQ(progress.dropped[0].hash, block(2).hash);
  EXPECT_FALSE(store.contains(block(2).plh));
  EXPECT_EQ(store.stats().checksum_failures, 1U);
  EXPECT_TRUE(read_back(store, 1));
  (void)store.poll(true);  // the dropped slot's header is zeroed before the store closes
}

// A slot is written in one I/O; a power loss may tear it at any 4 KiB
// sector, front sectors first or back sectors first. Every tear of block 2's
// record over block 1's leaves a slot whose first read either serves the
// block its header names, byte for byte, or fails, drops it and zeroes its
// header, so the next restart no longer finds it.
TEST_F(DiskStoreTest, AWriteTornAtAnySectorIsNeverServed) {
  const std::filesystem::path other = dir_ / "other";
  std::filesystem::create_directories(other);
  // A page of several sectors (16 KiB): a slot of five.
  const KvLayout wide(
      KvGeometry{.layers = 2, .kv_heads = 2, .head_dim = 64, .dtype = KvDtype::Bf16, .tokens_per_block = 16},
      PageLayout::PageMajor, 8);
  std::uint64_t slot_bytes = 0;
  std::uint64_t offset = 0;
  {
    DiskStore old_record(config(2), wide);
    put(old_record, 1, 1);
    DiskStoreConfig c = config(2);
    c.file = other / "g3.slots";
    DiskStore new_record(c, wide);
    put(new_record, 2, 2);
    slot_bytes = old_record.geometry().slot_bytes;
    offset = old_record.geometry().offset(0);
  }
  const auto read_slot = [&](const std::filesystem::path& file) {
    std::vector<std::byte> bytes(slot_bytes);
    const int fd = ::open(file.c_str(), O_RDONLY);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::pread(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset)), static_cast<ssize_t>(slot_bytes));
    ::close(fd);
    return bytes;
  };
  const std::vector<std::byte> old_bytes = read_slot(dir_ / "g3.slots");
  const std::vector<std::byte> new_bytes = read_slot(other / "g3.slots");
  const std::size_t sectors = slot_bytes / 4096;
  ASSERT_GE(sectors, 4U);
  int torn = 0;
  for (const bool front_first : {true, false}) {
    for (std::size_t written = 1; written < sectors; ++written) {
      std::vector<std::byte> slot = old_bytes;
      const std::size_t from = front_first ? 0 : sectors - written;
      std::copy_n(new_bytes.begin() + static_cast<std::ptrdiff_t>(from * 4096), written * 4096,
                  slot.begin() + static_cast<std::ptrdiff_t>(from * 4096));
      const int fd = ::open((dir_ / "g3.slots").c_str(), O_WRONLY);
      ASSERT_GE(fd, 0);
      ASSERT_EQ(::pwrite(fd, slot.data(), slot.size(), static_cast<off_t>(offset)), static_cast<ssize_t>(slot_bytes));
      ::close(fd);
      {
        DiskStore store(config(2), wide);
        ASSERT_EQ(store.recovered().resident.size(), 1U) << "the header of either record is whole";
        const std::uint64_t n = store.recovered().resident[0].meta.block.hash.value() / 100;
        EXPECT_EQ(n, front_first ? 2U : 1U);
        LowerTierProgress progress;
        EXPECT_FALSE(read_back(store, n, &progress)) << "a torn slot served block " << n;
        EXPECT_EQ(progress.dropped.size(), 1U);
        EXPECT_EQ(store.stats().checksum_failures, 1U);
        (void)store.poll(true);
      }
      DiskStore again(config(2), wide);
      EXPECT_EQ(again.recovered().resident.size(), 0U) << "a dropped slot was found again";
      ++torn;
    }
  }
  EXPECT_EQ(torn, 2 * static_cast<int>(sectors - 1));
}

// DiskSync::Batch: a write counts as stored only once an fdatasync issued
// after it completed has completed; one fdatasync covers every write that
// completed before it; a failed one stores none of them.
TEST_F(DiskStoreTest, UnderBatchSyncABlockIsStoredOnlyOnceAnFdatasyncCoveredIt) {
  DiskStoreConfig c = config(32);
  c.sync = DiskSync::Batch;
  c.backlog = 32;
  {
    DiskStore store(c, layout());
    store.inject_faults(DiskFaults{.fail_sync = 1});
    std::vector<g1::TieredBlock> evicted;
    const auto page = page_of(1, store.geometry().payload_bytes);
    ASSERT_EQ(store.write(block(1), page, evicted), DiskStore::WriteStart::Started);
    LowerTierProgress progress = store.poll(true);
    EXPECT_TRUE(progress.stored.empty()) << "a block whose fdatasync failed was stored";
    EXPECT_FALSE(store.contains(block(1).plh));
    EXPECT_EQ(store.stats().write_failures, 1U);
    EXPECT_EQ(store.stats().syncs, 0U);
    // Sixteen writes at once, queue depth 4: each is stored after a sync that covered it.
    for (std::uint64_t n = 2; n <= 17; ++n) {
      ASSERT_EQ(store.write(block(n), page_of(n, store.geometry().payload_bytes), evicted),
                DiskStore::WriteStart::Started);
      EXPECT_FALSE(store.find(block(n).plh)) << "visible before its write and sync";
    }
    progress = store.poll(true);
    EXPECT_EQ(progress.stored.size(), 16U);
    EXPECT_GE(store.stats().syncs, 1U);
    EXPECT_LE(store.stats().syncs, 16U);
    for (std::uint64_t n = 2; n <= 17; ++n) EXPECT_TRUE(read_back(store, n)) << "block " << n;
    ASSERT_EQ(store.write(block(18), page_of(18, store.geometry().payload_bytes), evicted),
              DiskStore::WriteStart::Started);
  }  // closing syncs what is still waiting
  DiskStore reopened(c, layout());
  EXPECT_EQ(reopened.used(), 17U);
  EXPECT_TRUE(read_back(reopened, 18));
}

TEST_F(DiskStoreTest, AnotherLayoutIsRefusedUnlessReformatted) {
  {
    DiskStore store(config(4), layout(PageLayout::PageMajor));
    put(store, 1, 2);
  }
  EXPECT_THROW(DiskStore(config(4), layout(PageLayout::LayerMajor)), ConfigError);
  DiskStore reformatted(config(4, /*reformat=*/true), layout(PageLayout::LayerMajor));
  EXPECT_EQ(reformatted.used(), 0U);
  EXPECT_TRUE(reformatted.recovered().reformatted);
  EXPECT_EQ(reformatted.recovered().discarded, 2U);
  put(reformatted, 7, 7);
  EXPECT_TRUE(read_back(reformatted, 7));
}

TEST_F(DiskStoreTest, EveryBufferComesBackOnceItsWritesAndReadsEnded) {
  DiskStore store(config(8), layout());
  const std::size_t room = store.read_room();
  put(store, 1, 8);
  EXPECT_EQ(store.in_flight(), 0U);
  EXPECT_EQ(store.read_room(), room);
  for (int round = 0; round < 3; ++round) {
    for (std::uint64_t n = 1; n <= 8; ++n) ASSERT_TRUE(read_back(store, n));
  }
  EXPECT_EQ(store.in_flight(), 0U);
  EXPECT_EQ(store.read_room(), room);
  EXPECT_EQ(store.stats().blocks_read, 24U);
}

TEST_F(DiskStoreTest, ReadsOfBlocksNotResidentAreContractErrors) {
  DiskStore store(config(4), layout());
  std::vector<std::byte> page(store.geometry().payload_bytes);
  const std::vector<PositionalLineageHash> plhs{block(1).plh};
  std::byte* const pages[] = {page.data()};
  EXPECT_THROW((void)store.read(plhs, pages), ContractError);
  std::vector<g1::TieredBlock> evicted;
  EXPECT_THROW((void)store.write(block(1), std::span<const std::byte>(page).first(10), evicted), ContractError);
}

TEST_F(DiskStoreTest, AProcessKilledWhileWritingLeavesOnlyBlocksThatVerify) {
  std::mt19937 rng(20261204);
  std::uint64_t recovered_total = 0;
  for (int trial = 0; trial < 6; ++trial) {
    const std::uint64_t first = 1 + static_cast<std::uint64_t>(trial) * 100000;  // each child writes new blocks
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {  // writes (and evicts, and overwrites slots) until it is killed
      try {
        DiskStore store(config(16), layout());
        std::vector<g1::TieredBlock> evicted;
        for (std::uint64_t n = first;; ++n) {
          const auto page = page_of(n, store.geometry().payload_bytes);
          while (store.write(block(n), page, evicted) == DiskStore::WriteStart::NoRoom) (void)store.poll(true);
          (void)store.poll(false);
        }
      } catch (...) {
      }
      ::_exit(1);
    }
    ::usleep(static_cast<useconds_t>(std::uniform_int_distribution<int>(1000, 30000)(rng)));
    ASSERT_EQ(::kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer ended on its own";
    DiskStore store(config(16), layout());
    for (const ScannedSlot& slot : store.recovered().resident) {
      const std::uint64_t n = slot.meta.block.hash.value() / 100;
      EXPECT_EQ(slot.meta.block.plh, block(n).plh);
      EXPECT_TRUE(read_back(store, n)) << "trial " << trial << ", block " << n;
    }
    EXPECT_EQ(store.stats().checksum_failures, 0U) << "trial " << trial;
    recovered_total += store.recovered().resident.size();
  }
  EXPECT_GT(recovered_total, 0U);  // the writers got blocks to disk before they died
}

// A manager with KV cache groups: a record carries its group's block format,
// and G3 neither writes nor serves a block in another one (model-geometry.md §5).
TEST_F(DiskStoreTest, ABlockOfAnotherGroupFormatIsRefusedAndCounted) {
  const std::vector<std::uint64_t> formats{0xF0, 0xF1};
  const auto grouped = [&](std::vector<std::uint64_t> groups, bool reformat = false) {
    DiskStoreConfig c = config(4, reformat);
    c.group_formats = std::move(groups);
    return c;
  };
  const auto of_group = [](std::uint64_t n, std::uint64_t group, std::uint64_t format) {
    g1::TieredBlock b = block(n);
    b.plh = g1::group_tier_key(b.hash, group);
    b.format = format;
    return b;
  };
  {
    DiskStore store(grouped(formats), layout());
    std::vector<g1::TieredBlock> evicted;
    const auto page = page_of(1, store.geometry().payload_bytes);
    EXPECT_EQ(store.write(of_group(1, 0, 0xF1), page, evicted), DiskStore::WriteStart::NoRoom);  // group 1's format
    EXPECT_EQ(store.write(of_group(1, 5, 0xF0), page, evicted), DiskStore::WriteStart::NoRoom);  // no group 5
    EXPECT_EQ(store.stats().format_refusals, 2U);
    EXPECT_EQ(store.used(), 0U);
    ASSERT_EQ(store.write(of_group(1, 0, 0xF0), page, evicted), DiskStore::WriteStart::Started);
    ASSERT_EQ(store.write(of_group(1, 1, 0xF1), page, evicted), DiskStore::WriteStart::Started);
    (void)store.poll(true);
    const auto found = store.find(g1::group_tier_key(block(1).hash, 1));
    ASSERT_TRUE(found.has_value());
    EXPECT_EQ(found->format, 0xF1U);  // the record says its group's format
  }
  {
    DiskStore same(grouped(formats), layout());
    EXPECT_EQ(same.recovered().resident.size(), 2U);
    const auto found = same.find(g1::group_tier_key(block(1).hash, 1));
    ASSERT_TRUE(found.has_value());
    EXPECT_EQ(found->format, 0xF1U);  // as its record says, read back at the restart
  }
  // Group 0 in another page format (another --kv-cache-dtype, same page bytes): its record is refused.
  EXPECT_THROW(DiskStore(grouped({0xE0, 0xF1}), layout()), ConfigError);
  DiskStore reformatted(grouped({0xE0, 0xF1}, true), layout());
  EXPECT_TRUE(reformatted.recovered().reformatted);
  EXPECT_FALSE(reformatted.find(g1::group_tier_key(block(1).hash, 0)).has_value());
}

}  // namespace
}  // namespace kvtier::tiers::disk
