// G3 against a careless or hostile operator (issue 31): a link or a foreign
// file at the tier's name is never written, a directory another user could
// change is refused, files are private, a forged slot is refused under a
// tier key, a smaller capacity keeps the newest blocks and says how many it
// dropped, a full file system turns into eviction, a dropped slot stays
// dropped, and settings that could never work are refused before anything
// is made.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "kvtier/core/errors.hpp"
#include "kvtier/session/disk_tier_factory.hpp"
#include "kvtier/tiers/disk/disk_store.hpp"
#include "support/record_forgery.hpp"
#include "support/scratch_directory.hpp"
#include "support/tier_test_blocks.hpp"

namespace kvtier::tiers::disk {
namespace {

KvLayout layout(std::uint32_t layers = 2, std::uint32_t heads = 2, std::uint32_t dim = 16) {
  return kvtier::testing::tier_test_layout(layers, heads, dim);
}
g1::TieredBlock block(std::uint64_t n) { return kvtier::testing::tier_test_block(n, 1); }
std::vector<std::byte> page_of(std::uint64_t n, std::size_t bytes) { return kvtier::testing::tier_test_page(n, bytes); }
TierKey key_of(char fill) { return kvtier::testing::tier_test_key(fill); }

std::string contents(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

mode_t mode_of(const std::filesystem::path& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

class DiskStoreHostile : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<kvtier::testing::ScratchDirectory>("kvtier-g3-hostile");
    dir_ = scratch_->path() / "tier";
    file_ = dir_ / "g3.slots";
  }
  DiskStoreConfig config(std::uint32_t slots, std::optional<TierKey> key = std::nullopt, bool reformat = false) const {
    return DiskStoreConfig{.file = file_, .slots = slots, .queue_depth = 4, .reformat = reformat, .key = key};
  }
  void put(DiskStore& store, std::uint64_t first, std::uint64_t last) {
    std::vector<g1::TieredBlock> gone;
    for (std::uint64_t n = first; n <= last; ++n) {
      ASSERT_EQ(store.write(block(n), page_of(n, store.page_bytes()), gone), DiskStore::WriteStart::Started);
      (void)store.poll(true);
    }
  }
  /// True when block n reads back verified and byte for byte.
  bool read_back(DiskStore& store, std::uint64_t n) {
    if (!store.find(block(n).plh)) return false;
    std::vector<std::byte> page(store.page_bytes());
    const std::vector<PositionalLineageHash> plhs{block(n).plh};
    std::byte* const pages[] = {page.data()};
    EXPECT_TRUE(store.read(plhs, pages).has_value());
    const LowerTierProgress progress = store.poll(true);
    return progress.reads.size() == 1 && progress.reads[0].ok[0] && page == page_of(n, store.page_bytes());
  }
  /// Rewrites block n's slot in the file with its payload changed and both checksums recomputed.
  void forge_slot(const SlotGeometry& geometry, std::uint32_t slot) {
    const int fd = ::open(file_.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    std::vector<std::byte> bytes(geometry.slot_bytes);
    ASSERT_EQ(::pread(fd, bytes.data(), bytes.size(), static_cast<off_t>(geometry.offset(slot))),
              static_cast<ssize_t>(bytes.size()));
    kvtier::testing::forge_record(bytes, geometry.header_bytes);
    ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(geometry.offset(slot))),
              static_cast<ssize_t>(bytes.size()));
    ::close(fd);
  }

  std::unique_ptr<kvtier::testing::ScratchDirectory> scratch_;
  std::filesystem::path dir_;
  std::filesystem::path file_;
};

// C1: `ln -s ~/important DIR/kvtier-g3.slots` made the tier truncate the victim.
TEST_F(DiskStoreHostile, ALinkAtTheTiersNameIsRefusedAndItsTargetUntouched) {
  std::filesystem::create_directories(dir_);
  const std::filesystem::path victim = scratch_->path() / "important";
  std::ofstream(victim) << "someone's thesis";
  std::filesystem::create_symlink(victim, file_);
  try {
    DiskStore store(config(64), layout());
    FAIL() << "a link was opened";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("symbolic link"), std::string::npos) << e.what();
  }
  EXPECT_THROW(DiskStore(config(64, std::nullopt, /*reformat=*/true), layout()), ConfigError);
  EXPECT_EQ(contents(victim), "someone's thesis");
  EXPECT_TRUE(std::filesystem::is_symlink(file_));
}

TEST_F(DiskStoreHostile, AFileThatIsNotATierIsRefusedAndLeftAsItIs) {
  std::filesystem::create_directories(dir_);
  std::ofstream(file_) << "not a tier";
  ::chmod(file_.c_str(), 0600);
  for (const bool reformat : {false, true}) {
    try {
      DiskStore store(config(64, std::nullopt, reformat), layout());
      FAIL() << "a foreign file was taken (reformat " << reformat << ")";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("not a kvtier tier file"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(contents(file_), "not a tier");
}

TEST_F(DiskStoreHostile, AHardLinkToAnotherFileIsRefused) {
  std::filesystem::create_directories(dir_);
  const std::filesystem::path other = scratch_->path() / "other";
  std::ofstream(other) << "";
  std::filesystem::create_hard_link(other, file_);
  EXPECT_THROW(DiskStore(config(8), layout()), ConfigError);
}

TEST_F(DiskStoreHostile, ADirectoryAnotherUserCouldChangeIsRefused) {
  std::filesystem::create_directories(dir_);
  ASSERT_EQ(::chmod(dir_.c_str(), 0777), 0);  // anyone may plant a file here
  EXPECT_THROW(DiskStore(config(8), layout()), ConfigError);
  EXPECT_FALSE(std::filesystem::exists(file_));
  ASSERT_EQ(::chmod(dir_.c_str(), 01777), 0);  // sticky, as /var/tmp: others cannot replace our file
  { DiskStore store(config(8), layout()); }
  std::filesystem::remove(file_);
  if (::geteuid() == 0) {  // only root can give a directory away
    ASSERT_EQ(::chmod(dir_.c_str(), 0700), 0);
    ASSERT_EQ(::chown(dir_.c_str(), 65534, 65534), 0);
    try {
      DiskStore store(config(8), layout());
      FAIL() << "another user's directory was used";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("belongs to uid 65534"), std::string::npos) << e.what();
    }
    ASSERT_EQ(::chown(dir_.c_str(), 0, 0), 0);
  }
  const std::filesystem::path link = scratch_->path() / "link";
  std::filesystem::create_directory_symlink(dir_, link);
  EXPECT_THROW(DiskStore(DiskStoreConfig{.file = link / "g3.slots", .slots = 8}, layout()), ConfigError);
}

// L15: the tier's file and a directory it makes are private.
TEST_F(DiskStoreHostile, TheDirectoryAndFileAreMadePrivate) {
  const mode_t old_mask = ::umask(022);
  { DiskStore store(config(8), layout()); }
  ::umask(old_mask);
  EXPECT_EQ(mode_of(dir_), 0700U);
  EXPECT_EQ(mode_of(file_), 0600U);
  ASSERT_EQ(::chmod(file_.c_str(), 0644), 0);  // as kvtier made them before
  { DiskStore store(config(8), layout()); }
  EXPECT_EQ(mode_of(file_), 0600U);
}

// C2: flip a payload and recompute both checksums — served as verified without a key.
TEST_F(DiskStoreHostile, AForgedSlotIsServedWithoutAKeyAndRefusedWithOne) {
  SlotGeometry geometry;
  {
    DiskStore store(config(8), layout());
    put(store, 1, 3);
    geometry = store.geometry();
  }
  forge_slot(geometry, 1);
  {
    DiskStore store(config(8), layout());
    ASSERT_TRUE(store.find(block(2).plh));
    EXPECT_FALSE(read_back(store, 2));  // read and "verified", but its bytes are the forger's
    EXPECT_EQ(store.stats().checksum_failures, 0U) << "the threat docs/disk.md describes";
  }
  const TierKey key = key_of('k');
  std::filesystem::remove(file_);
  {
    DiskStore store(config(8, key), layout());
    put(store, 1, 3);
  }
  forge_slot(geometry, 1);
  DiskStore store(config(8, key), layout());
  ASSERT_TRUE(store.find(block(2).plh));
  EXPECT_FALSE(read_back(store, 2));
  EXPECT_FALSE(store.find(block(2).plh));  // refused and dropped
  EXPECT_EQ(store.stats().checksum_failures, 1U);
  EXPECT_EQ(store.stats().authentication_failures, 1U);
  EXPECT_EQ(store.stats().blocks_read, 0U);
  EXPECT_TRUE(read_back(store, 1));
  EXPECT_TRUE(read_back(store, 3));
}

TEST_F(DiskStoreHostile, ATierOfAnotherKeyOrNoneIsRefusedUnlessReformatted) {
  { DiskStore store(config(8, key_of('a')), layout()); }
  EXPECT_THROW(DiskStore(config(8, key_of('b')), layout()), ConfigError);
  EXPECT_THROW(DiskStore(config(8), layout()), ConfigError);
  { DiskStore store(config(8, key_of('b'), /*reformat=*/true), layout()); }
  DiskStore store(config(8, key_of('b')), layout());
  EXPECT_EQ(store.used(), 0U);
}

// C3: a 6,000-slot tier holding 4,282 blocks reopened with 1,000 kept 1,000, silently.
TEST_F(DiskStoreHostile, ASmallerCapacityKeepsTheNewestBlocksAndCountsTheRest) {
  std::uint64_t big_file = 0;
  {
    DiskStore store(config(16), layout());
    put(store, 1, 10);
    big_file = std::filesystem::file_size(file_);
  }
  {
    DiskStore store(config(4), layout());
    EXPECT_EQ(store.recovered().dropped_on_shrink, 6U);
    EXPECT_EQ(store.used(), 4U);
    for (std::uint64_t n = 7; n <= 10; ++n) EXPECT_TRUE(read_back(store, n)) << "block " << n;
    for (std::uint64_t n = 1; n <= 6; ++n) EXPECT_FALSE(store.contains(block(n).plh)) << "block " << n;
  }
  EXPECT_LT(std::filesystem::file_size(file_), big_file);
  DiskStore again(config(16), layout());
  EXPECT_EQ(again.recovered().dropped_on_shrink, 0U);
  EXPECT_EQ(again.used(), 4U);  // what was dropped does not come back
}

// L1: a slot dropped for a bad checksum came back at the next restart.
TEST_F(DiskStoreHostile, ASlotDroppedForABadChecksumStaysDroppedAfterARestart) {
  SlotGeometry geometry;
  {
    DiskStore store(config(8), layout());
    put(store, 1, 3);
    geometry = store.geometry();
  }
  const int fd = ::open(file_.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  const off_t at = static_cast<off_t>(geometry.offset(1) + geometry.header_bytes + 5);
  std::byte b{};
  ASSERT_EQ(::pread(fd, &b, 1, at), 1);
  b ^= std::byte{1};
  ASSERT_EQ(::pwrite(fd, &b, 1, at), 1);
  ::close(fd);
  {
    DiskStore store(config(8), layout());
    EXPECT_FALSE(read_back(store, 2));
  }
  DiskStore store(config(8), layout());
  EXPECT_FALSE(store.contains(block(2).plh));
  EXPECT_EQ(store.used(), 2U);
}

// H4: at ENOSPC every write failed, silently, and the tier never evicted to make room again.
TEST_F(DiskStoreHostile, AFullFileSystemTurnsIntoEvictionAndSaysSo) {
  DiskStore store(config(16), layout());
  store.inject_faults(DiskFaults{.room_for_new_slots = 3});
  ::testing::internal::CaptureStderr();
  std::vector<g1::TieredBlock> evicted;
  std::size_t started = 0;
  for (std::uint64_t n = 1; n <= 12; ++n) {
    started += store.write(block(n), page_of(n, store.page_bytes()), evicted) == DiskStore::WriteStart::Started;
    (void)store.poll(true);
  }
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("full (ENOSPC)"), std::string::npos) << said;
  EXPECT_TRUE(store.disk_full());
  EXPECT_EQ(store.stats().write_failures, 1U);  // the one write that found the disk full
  EXPECT_EQ(started, 12U);
  EXPECT_EQ(store.used(), 3U);  // it goes on in the slots it has
  EXPECT_EQ(store.stats().blocks_written, 11U);
  for (std::uint64_t n = 10; n <= 12; ++n) EXPECT_TRUE(read_back(store, n)) << "block " << n;
  EXPECT_FALSE(evicted.empty());
}

TEST_F(DiskStoreHostile, ATierLargerThanTheFileSystemIsRefusedWithWhatFits) {
  // 4 MiB pages: 1,000,000 of them are 4 TB.
  const KvLayout big = layout(64, 8, 128);
  try {
    DiskStore store(DiskStoreConfig{.file = file_, .slots = 1000000, .queue_depth = 2, .backlog = 0}, big);
    FAIL() << "a 4 TB tier was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("blocks fit"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir_));  // refused: nothing made
}

// L3: queue depth 1 and backlog 0 never wrote a block; L12/L14: a huge tier was std::bad_alloc.
TEST_F(DiskStoreHostile, SettingsThatCouldNeverWorkAreRefusedBeforeAnythingIsMade) {
  EXPECT_THROW(DiskStore(DiskStoreConfig{.file = file_, .slots = 8, .queue_depth = 1, .backlog = 0}, layout()),
               ConfigError);
  try {
    DiskStore store(DiskStoreConfig{.file = file_, .slots = 0xFFFFFFFFU, .queue_depth = 4}, layout());
    FAIL() << "an index of 4 billion blocks was accepted";
  } catch (const AllocationError& e) {
    EXPECT_NE(std::string(e.what()).find("index"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir_));
}

/// Resident memory of this process, in bytes.
std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

// L14: G3 took ~105 B of RAM per slot before a block was stored (30M slots: 3.2 GB).
TEST_F(DiskStoreHostile, ALargeTierTakesNoMemoryPerSlotBeforeItHoldsBlocks) {
  std::filesystem::create_directories(dir_);
  struct statvfs fs {};
  ASSERT_EQ(::statvfs(dir_.c_str(), &fs), 0);
  const std::uint32_t slots = 1000000;  // 8 KiB slots: 8 GB of sparse file
  if (static_cast<double>(fs.f_bavail) * static_cast<double>(fs.f_frsize) < 9e9)
    GTEST_SKIP() << "needs 9 GB free for the sparse file";
  const std::size_t before = resident_bytes();
  DiskStore store(DiskStoreConfig{.file = file_, .slots = slots, .queue_depth = 4, .backlog = 4}, layout());
  EXPECT_LT(resident_bytes() - before, std::size_t{16} << 20);  // was over 100 MB
  put(store, 1, 4);
  EXPECT_TRUE(read_back(store, 3));
}

// L5: records of another format version were overwritten.
TEST_F(DiskStoreHostile, ARecordOfAnotherVersionIsKeptUnlessReformatted) {
  SlotGeometry geometry;
  {
    DiskStore store(config(8), layout());
    put(store, 1, 2);
    geometry = store.geometry();
  }
  const int fd = ::open(file_.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  const std::uint32_t version = kRecordVersion + 1;
  ASSERT_EQ(::pwrite(fd, &version, sizeof(version), static_cast<off_t>(geometry.offset(0) + 8)), 4);
  ::close(fd);
  const std::string before = contents(file_);
  EXPECT_THROW(DiskStore(config(8), layout()), ConfigError);
  EXPECT_EQ(contents(file_), before);
  DiskStore store(config(8, std::nullopt, /*reformat=*/true), layout());
  EXPECT_EQ(store.recovered().discarded, 2U);
  EXPECT_EQ(store.used(), 0U);
}

TEST_F(DiskStoreHostile, AFormatOneFileIsRefusedUnlessReformatted) {
  std::filesystem::create_directories(dir_);
  std::vector<char> v1(8192, 0);
  std::memcpy(v1.data(), "KVTREC01", 8);
  std::ofstream(file_, std::ios::binary).write(v1.data(), static_cast<std::streamsize>(v1.size()));
  try {
    DiskStore store(config(8), layout());
    FAIL() << "a format 1 file was taken";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("format 1"), std::string::npos) << e.what();
  }
  DiskStore store(config(8, std::nullopt, /*reformat=*/true), layout());
  EXPECT_TRUE(store.recovered().reformatted);
}

// L6: `kvtier info` made directories and a full-size sparse file.
TEST_F(DiskStoreHostile, InspectingATierChangesNothing) {
  const KvLayout ours = layout();
  const session::DiskTierInspection none = session::inspect_disk_tier(dir_, ours, 4);
  EXPECT_FALSE(none.exists);
  EXPECT_FALSE(std::filesystem::exists(dir_));
  const session::DiskTierSettings settings{.path = dir_, .blocks = 16};
  {
    auto tier = session::open_disk_tier(settings, ours);
    auto& store = dynamic_cast<DiskStore&>(*tier);
    put(store, 1, 6);
  }
  const std::filesystem::path file = dir_ / session::kDiskTierFile;
  const std::string before = contents(file);
  const auto when = std::filesystem::last_write_time(file);
  const session::DiskTierInspection seen = session::inspect_disk_tier(dir_, ours, 4);
  EXPECT_TRUE(seen.exists);
  EXPECT_EQ(seen.state, "ok");
  EXPECT_EQ(seen.blocks, 6U);
  EXPECT_EQ(seen.would_drop, 2U);
  EXPECT_EQ(contents(file), before);
  EXPECT_EQ(std::filesystem::last_write_time(file), when);
  const session::DiskTierInspection other = session::inspect_disk_tier(dir_, layout(4), std::nullopt);
  EXPECT_EQ(other.state, "a tier of another layout");
}

}  // namespace
}  // namespace kvtier::tiers::disk
