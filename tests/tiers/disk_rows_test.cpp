// G3 as a service of an engine's rows (what kvtier.vllm's KvtierDiskTier drives): rows come
// back byte for byte into other rows, after a restart too; a damaged record
// is never a loaded key and misses from then on; capacity holds the newest
// rows; malformed jobs fail as a whole; another namespace is refused.
#include "kvtier/tiers/rows/disk_rows.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "kvtier/core/errors.hpp"
#include "kvtier/tiers/block_record.hpp"
#include "support/engine_rows.hpp"
#include "support/scratch_directory.hpp"

namespace kvtier::tiers::rows {
namespace {

using kvtier::testing::job;
using kvtier::testing::key;
using kvtier::testing::kRowBytes;
using kvtier::testing::kRows;
using kvtier::testing::Rows;
using kvtier::testing::run;

std::uint64_t opened(const RowService& service, const std::string& what) {
  for (const auto& [name, value] : service.opened()) {
    if (name == what) return value;
  }
  ADD_FAILURE() << "no " << what;
  return 0;
}

class DiskRowsTest : public ::testing::Test {
 protected:
  void SetUp() override { scratch_ = std::make_unique<kvtier::testing::ScratchDirectory>("kvtier-row-service"); }
  DiskRowsConfig config(std::uint32_t slots, std::string space = "model-a", bool reformat = false) const {
    return DiskRowsConfig{
        .store = {.file = scratch_->path() / "g3.tier", .slots = slots, .queue_depth = 4, .reformat = reformat},
        .namespace_text = std::move(space)};
  }
  std::unique_ptr<RowService> open(const DiskRowsConfig& c) const {
    return std::make_unique<RowService>(open_disk_rows(c, rows_.region()), rows_.region(), true);
  }
  std::unique_ptr<kvtier::testing::ScratchDirectory> scratch_;
  Rows rows_;
};

TEST_F(DiskRowsTest, RowsComeBackIntoOtherRowsAndAfterARestart) {
  for (int i = 0; i < 5; ++i) rows_.fill(static_cast<std::size_t>(i), i + 1);
  {
    auto service_owner = open(config(8));
    RowService& service = *service_owner;
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
  auto again_owner = open(config(8));
  RowService& again = *again_owner;
  EXPECT_EQ(opened(again, "resident"), 5U);
  for (int n = 1; n <= 5; ++n) EXPECT_TRUE(again.lookup(key(n)));
  EXPECT_TRUE(run(again, job(3, RowJobKind::Load, {5, 4}, {0, 1})).success);
  EXPECT_TRUE(rows_.holds(0, 5));
  EXPECT_TRUE(rows_.holds(1, 4));
}

TEST_F(DiskRowsTest, AStoreOfKeysHeldWritesNothingAndSucceeds) {
  rows_.fill(0, 1);
  auto service_owner = open(config(8));
  RowService& service = *service_owner;
  EXPECT_TRUE(run(service, job(1, RowJobKind::Store, {1}, {0})).success);
  EXPECT_TRUE(run(service, job(2, RowJobKind::Store, {1}, {0})).success);
  EXPECT_TRUE(run(service, job(3, RowJobKind::Store, {}, {})).success);  // an empty batch
  const RowTierCounters counters = service.counters();
  EXPECT_EQ(counters.keys_stored, 1U);
  EXPECT_EQ(counters.keys_already_held, 1U);
}

TEST_F(DiskRowsTest, ADamagedRecordIsNeverLoadedAndMissesFromThenOn) {
  for (int i = 0; i < 3; ++i) rows_.fill(static_cast<std::size_t>(i), i + 1);
  std::uint64_t slot_bytes = 0;
  {
    auto service_owner = open(config(8));
    RowService& service = *service_owner;
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

  auto service_owner = open(config(8));
  RowService& service = *service_owner;
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

TEST_F(DiskRowsTest, CapacityHoldsTheNewestRows) {
  auto service_owner = open(config(4));
  RowService& service = *service_owner;
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

TEST_F(DiskRowsTest, AHitIsAUseThatEvictionSpares) {
  auto service_owner = open(config(2));
  RowService& service = *service_owner;
  rows_.fill(0, 1);
  EXPECT_TRUE(run(service, job(1, RowJobKind::Store, {1, 2}, {0, 1})).success);
  EXPECT_TRUE(service.lookup(key(1)));  // key 1 is now the most recently used
  EXPECT_TRUE(run(service, job(2, RowJobKind::Store, {3}, {2})).success);
  EXPECT_TRUE(service.lookup(key(1)));
  EXPECT_FALSE(service.lookup(key(2)));
}

TEST_F(DiskRowsTest, MalformedJobsFailAsAWholeAndMissingKeysFailTheirPositions) {
  auto service_owner = open(config(4));
  RowService& service = *service_owner;
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

TEST_F(DiskRowsTest, AnotherNamespaceIsRefusedUnlessReformatted) {
  (void)open(config(4, "model-a"));
  EXPECT_THROW(open(config(4, "model-b")), ConfigError);
  auto service_owner = open(config(4, "model-b", true));
  RowService& service = *service_owner;
  EXPECT_EQ(opened(service, "reformatted"), 1U);
}

TEST_F(DiskRowsTest, ShutdownEndsEveryJobAndRefusesMore) {
  auto service_owner = open(config(8));
  RowService& service = *service_owner;
  for (int n = 1; n <= 6; ++n) rows_.fill(static_cast<std::size_t>(n), n);
  service.submit(job(1, RowJobKind::Store, {1, 2, 3, 4, 5, 6}, {1, 2, 3, 4, 5, 6}));
  service.shutdown();
  const std::vector<RowJobResult> done = service.take_finished();
  ASSERT_EQ(done.size(), 1U);
  EXPECT_TRUE(done[0].success);
  EXPECT_THROW(service.submit(job(2, RowJobKind::Store, {1}, {1})), ContractError);
  service.shutdown();  // again: nothing
}

TEST_F(DiskRowsTest, LookupsFromAnotherThreadWhileJobsRunSeeOnlyWholeRows) {
  auto service_owner = open(config(8));
  RowService& service = *service_owner;
  for (int n = 0; n < 8; ++n) rows_.fill(static_cast<std::size_t>(n), n + 1);
  std::atomic<bool> done{false};
  std::atomic<int> hits{0};
  std::thread looker([&] {
    while (!done.load()) {
      for (int n = 1; n <= 24; ++n) hits += service.lookup(key(n)) ? 1 : 0;
      (void)service.counters();
      (void)service.take_events();
    }
  });
  for (int j = 0; j < 24; ++j) {  // three times the capacity, one key a job, rows reused
    service.submit(job(static_cast<std::uint64_t>(j), RowJobKind::Store, {j + 1}, {j % 8}));
  }
  service.drain();
  std::vector<RowJobResult> stored = service.take_finished();
  EXPECT_EQ(stored.size(), 24U);
  for (const RowJobResult& r : stored) EXPECT_TRUE(r.success) << r.id;
  done = true;
  looker.join();
  // Which 8 keys stayed depends on the hits (uses) the other thread made; each loads whole.
  std::vector<int> held;
  for (int n = 1; n <= 24; ++n) {
    if (service.lookup(key(n))) held.push_back(n);
  }
  ASSERT_EQ(held.size(), 8U);
  std::vector<std::int64_t> into;
  for (std::size_t i = 0; i < held.size(); ++i) into.push_back(static_cast<std::int64_t>(8 + i));
  EXPECT_TRUE(run(service, job(100, RowJobKind::Load, held, into)).success);
  for (std::size_t i = 0; i < held.size(); ++i) EXPECT_TRUE(rows_.holds(8 + i, (held[i] - 1) % 8 + 1)) << held[i];
  EXPECT_GT(hits.load(), 0);
  EXPECT_EQ(service.counters().used, 8U);
}

TEST_F(DiskRowsTest, RowsThatO_DirectCannotMoveAreRefused) {
  const RowRegion odd{.base = rows_.memory.get() + 512, .count = 2, .row_bytes = kRowBytes};
  EXPECT_THROW(open_disk_rows(config(4), odd), ConfigError);
  const RowRegion short_rows{.base = rows_.memory.get(), .count = 2, .row_bytes = 1000};
  EXPECT_THROW(open_disk_rows(config(4), short_rows), ConfigError);
}

}  // namespace
}  // namespace kvtier::tiers::rows
