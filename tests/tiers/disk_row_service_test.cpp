// G3 as a service of an engine's rows (the vLLM adapter's engine): rows come
// back byte for byte into other rows, after a restart too; a damaged record
// is never a loaded key and misses from then on; capacity holds the newest
// rows; malformed jobs fail as a whole; another namespace is refused.
#include "kvtier/tiers/rows/disk_row_service.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "kvtier/core/errors.hpp"
#include "kvtier/tiers/block_record.hpp"
#include "support/scratch_directory.hpp"

namespace kvtier::tiers::rows {
namespace {

constexpr std::size_t kRowBytes = 2 * 4096;
constexpr std::size_t kRows = 16;

struct Rows {
  std::unique_ptr<std::byte, decltype(&std::free)> memory{
      static_cast<std::byte*>(std::aligned_alloc(4096, kRows* kRowBytes)), &std::free};
  RowRegion region() const { return RowRegion{.base = memory.get(), .count = kRows, .row_bytes = kRowBytes}; }
  std::span<std::byte> row(std::size_t i) const { return {memory.get() + i * kRowBytes, kRowBytes}; }
  void fill(std::size_t i, int seed) const {
    for (std::size_t b = 0; b < kRowBytes; ++b) row(i)[b] = static_cast<std::byte>((seed * 31 + b * 7) & 0xFF);
  }
  bool holds(std::size_t i, int seed) const {
    for (std::size_t b = 0; b < kRowBytes; ++b) {
      if (row(i)[b] != static_cast<std::byte>((seed * 31 + b * 7) & 0xFF)) return false;
    }
    return true;
  }
};

std::vector<std::byte> key(int n) {  // a vLLM offload key: 32 bytes of hash + a 4-byte group
  std::vector<std::byte> k(36, std::byte{0});
  std::memcpy(k.data(), &n, sizeof(n));
  k[35] = std::byte{1};
  return k;
}

RowJob job(std::uint64_t id, RowJobKind kind, std::vector<int> keys, std::vector<std::int64_t> rows) {
  RowJob j{.id = id, .kind = kind};
  for (int n : keys) j.keys.push_back(key(n));
  j.rows = std::move(rows);
  return j;
}

class DiskRowServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { scratch_ = std::make_unique<kvtier::testing::ScratchDirectory>("kvtier-row-service"); }
  DiskRowServiceConfig config(std::uint32_t slots, std::string space = "model-a", bool reformat = false) const {
    return DiskRowServiceConfig{
        .store = {.file = scratch_->path() / "g3.tier", .slots = slots, .queue_depth = 4, .reformat = reformat},
        .namespace_text = std::move(space),
        .events = true};
  }
  static RowJobResult run(DiskRowService& service, RowJob j) {
    const std::uint64_t id = j.id;
    service.submit(std::move(j));
    service.drain();
    std::vector<RowJobResult> done = service.take_finished();
    EXPECT_EQ(done.size(), 1U);
    EXPECT_EQ(done.at(0).id, id);
    return done.at(0);
  }
  std::unique_ptr<kvtier::testing::ScratchDirectory> scratch_;
  Rows rows_;
};

TEST_F(DiskRowServiceTest, RowsComeBackIntoOtherRowsAndAfterARestart) {
  for (int i = 0; i < 5; ++i) rows_.fill(static_cast<std::size_t>(i), i + 1);
  {
    DiskRowService service(config(8), rows_.region());
    EXPECT_FALSE(service.lookup(key(1)));
    EXPECT_TRUE(run(service, job(1, RowJobKind::Store, {1, 2, 3, 4, 5}, {0, 1, 2, 3, 4})).success);
    for (int n = 1; n <= 5; ++n) EXPECT_TRUE(service.lookup(key(n)));
    const RowJobResult load = run(service, job(2, RowJobKind::Load, {1, 2, 3, 4, 5}, {15, 14, 13, 12, 11}));
    EXPECT_TRUE(load.success);
    EXPECT_EQ(load.loaded, (std::vector<std::uint32_t>{0, 1, 2, 3, 4}));
    for (int n = 1; n <= 5; ++n) EXPECT_TRUE(rows_.holds(static_cast<std::size_t>(16 - n), n)) << n;
    const std::vector<RowEvent> events = service.take_events();
    EXPECT_EQ(events.size(), 5U);
  }
  std::memset(rows_.memory.get(), 0, kRows * kRowBytes);
  DiskRowService again(config(8), rows_.region());
  EXPECT_EQ(again.recovered().resident.size(), 5U);
  for (int n = 1; n <= 5; ++n) EXPECT_TRUE(again.lookup(key(n)));
  EXPECT_TRUE(run(again, job(3, RowJobKind::Load, {5, 4}, {0, 1})).success);
  EXPECT_TRUE(rows_.holds(0, 5));
  EXPECT_TRUE(rows_.holds(1, 4));
}

TEST_F(DiskRowServiceTest, AStoreOfKeysHeldWritesNothingAndSucceeds) {
  rows_.fill(0, 1);
  DiskRowService service(config(8), rows_.region());
  EXPECT_TRUE(run(service, job(1, RowJobKind::Store, {1}, {0})).success);
  EXPECT_TRUE(run(service, job(2, RowJobKind::Store, {1}, {0})).success);
  EXPECT_TRUE(run(service, job(3, RowJobKind::Store, {}, {})).success);  // an empty batch
  const RowTierCounters counters = service.counters();
  EXPECT_EQ(counters.keys_stored, 1U);
  EXPECT_EQ(counters.keys_already_held, 1U);
}

TEST_F(DiskRowServiceTest, ADamagedRecordIsNeverLoadedAndMissesFromThenOn) {
  for (int i = 0; i < 3; ++i) rows_.fill(static_cast<std::size_t>(i), i + 1);
  std::uint64_t slot_bytes = 0;
  {
    DiskRowService service(config(8), rows_.region());
    EXPECT_TRUE(run(service, job(1, RowJobKind::Store, {1, 2, 3}, {0, 1, 2})).success);
    slot_bytes = 4096 + kRowBytes;
  }
  // Flip one byte inside each row of the file (same size): the payload of slot 1.
  const std::filesystem::path file = scratch_->path() / "g3.tier";
  const int fd = ::open(file.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  const off_t at = static_cast<off_t>(4096 + slot_bytes + 4096 + 100);
  std::byte b{};
  ASSERT_EQ(::pread(fd, &b, 1, at), 1);
  b ^= std::byte{0x5A};
  ASSERT_EQ(::pwrite(fd, &b, 1, at), 1);
  ::close(fd);

  DiskRowService service(config(8), rows_.region());
  const RowJobResult load = run(service, job(2, RowJobKind::Load, {1, 2, 3}, {10, 11, 12}));
  EXPECT_FALSE(load.success);
  EXPECT_EQ(load.loaded.size(), 2U);  // the two intact ones, whatever slot the damaged one was in
  EXPECT_EQ(service.counters().checksum_failures, 1U);
  int missing = 0;
  for (int n = 1; n <= 3; ++n) missing += service.lookup(key(n)) ? 0 : 1;
  EXPECT_EQ(missing, 1);
  const std::vector<RowEvent> events = service.take_events();
  ASSERT_EQ(events.size(), 1U);
  EXPECT_TRUE(events[0].removed);
}

TEST_F(DiskRowServiceTest, CapacityHoldsTheNewestRows) {
  DiskRowService service(config(4), rows_.region());
  for (int n = 1; n <= 12; ++n) {
    rows_.fill(0, n);
    EXPECT_TRUE(run(service, job(static_cast<std::uint64_t>(n), RowJobKind::Store, {n}, {0})).success);
  }
  const RowTierCounters counters = service.counters();
  EXPECT_EQ(counters.used, 4U);
  EXPECT_EQ(counters.evictions, 8U);
  for (int n = 1; n <= 8; ++n) EXPECT_FALSE(service.lookup(key(n))) << n;
  for (int n = 9; n <= 12; ++n) EXPECT_TRUE(service.lookup(key(n))) << n;
  EXPECT_LE(std::filesystem::file_size(scratch_->path() / "g3.tier"), 4096 + 4 * (4096 + kRowBytes));
}

TEST_F(DiskRowServiceTest, AHitIsAUseThatEvictionSpares) {
  DiskRowService service(config(2), rows_.region());
  rows_.fill(0, 1);
  EXPECT_TRUE(run(service, job(1, RowJobKind::Store, {1, 2}, {0, 1})).success);
  EXPECT_TRUE(service.lookup(key(1)));  // key 1 is now the most recently used
  EXPECT_TRUE(run(service, job(2, RowJobKind::Store, {3}, {2})).success);
  EXPECT_TRUE(service.lookup(key(1)));
  EXPECT_FALSE(service.lookup(key(2)));
}

TEST_F(DiskRowServiceTest, MalformedJobsFailAsAWholeAndMissingKeysFailTheirPositions) {
  DiskRowService service(config(4), rows_.region());
  const RowJobResult outside = run(service, job(1, RowJobKind::Store, {1}, {static_cast<std::int64_t>(kRows)}));
  EXPECT_FALSE(outside.success);
  EXPECT_NE(outside.error.find("outside"), std::string::npos);
  EXPECT_FALSE(run(service, job(2, RowJobKind::Load, {1}, {-1})).success);
  EXPECT_FALSE(run(service, job(3, RowJobKind::Load, {1, 2}, {0})).success);
  rows_.fill(0, 7);
  EXPECT_TRUE(run(service, job(4, RowJobKind::Store, {7}, {0})).success);
  const RowJobResult partial = run(service, job(5, RowJobKind::Load, {7, 8}, {3, 4}));
  EXPECT_FALSE(partial.success);
  EXPECT_EQ(partial.loaded, (std::vector<std::uint32_t>{0}));
  EXPECT_TRUE(rows_.holds(3, 7));
}

TEST_F(DiskRowServiceTest, AnotherNamespaceIsRefusedUnlessReformatted) {
  { DiskRowService service(config(4, "model-a"), rows_.region()); }
  EXPECT_THROW(DiskRowService(config(4, "model-b"), rows_.region()), ConfigError);
  DiskRowService service(config(4, "model-b", true), rows_.region());
  EXPECT_TRUE(service.recovered().reformatted);
}

TEST_F(DiskRowServiceTest, ShutdownEndsEveryJobAndRefusesMore) {
  DiskRowService service(config(8), rows_.region());
  for (int n = 1; n <= 6; ++n) rows_.fill(static_cast<std::size_t>(n), n);
  service.submit(job(1, RowJobKind::Store, {1, 2, 3, 4, 5, 6}, {1, 2, 3, 4, 5, 6}));
  service.shutdown();
  const std::vector<RowJobResult> done = service.take_finished();
  ASSERT_EQ(done.size(), 1U);
  EXPECT_TRUE(done[0].success);
  EXPECT_THROW(service.submit(job(2, RowJobKind::Store, {1}, {1})), ContractError);
  service.shutdown();  // again: nothing
}

TEST_F(DiskRowServiceTest, RowsThatO_DirectCannotMoveAreRefused) {
  const RowRegion odd{.base = rows_.memory.get() + 512, .count = 2, .row_bytes = kRowBytes};
  EXPECT_THROW(DiskRowService(config(4), odd), ConfigError);
  const RowRegion short_rows{.base = rows_.memory.get(), .count = 2, .row_bytes = 1000};
  EXPECT_THROW(DiskRowService(config(4), short_rows), ConfigError);
}

}  // namespace
}  // namespace kvtier::tiers::rows
