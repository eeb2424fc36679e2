// The rules every tier below G2 keeps (docs/architecture.md, "The lower-tier
// seam"), written once and run on G3 (DiskStore) and G4 (SharedStore on a
// real redis-server), each without and with a tier key: a block is visible
// only once its write completed; a read serves a block's own bytes, verified;
// a record changed behind the tier's back with both checksums recomputed is
// served without a key (the threat the docs describe) and refused, counted
// and dropped with one; a failure is a miss, never an exception.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "kvtier/tiers/disk/disk_store.hpp"
#include "kvtier/tiers/shared/redis_node.hpp"
#include "kvtier/tiers/shared/shared_store.hpp"
#include "support/record_forgery.hpp"
#include "support/redis_servers.hpp"
#include "support/scratch_directory.hpp"
#include "support/tier_test_blocks.hpp"

namespace kvtier::tiers {
namespace {

KvLayout layout(std::uint32_t layers = 2, std::uint32_t heads = 2, std::uint32_t dim = 16) {
  return kvtier::testing::tier_test_layout(layers, heads, dim);
}
g1::TieredBlock block(std::uint64_t n) { return kvtier::testing::tier_test_block(n, 5); }
std::vector<std::byte> page_of(std::uint64_t n, std::size_t bytes) { return kvtier::testing::tier_test_page(n, bytes); }

enum class Kind { Disk, Shared };
struct Mode {
  Kind kind;
  bool keyed;
};

class LowerTierContract : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<kvtier::testing::ScratchDirectory>("kvtier-lower-contract");
    if (GetParam().keyed) key_ = kvtier::testing::tier_test_key(0x42);
    if (GetParam().kind == Kind::Shared) {
      if (!kvtier::testing::RedisServers::available()) GTEST_SKIP() << "no redis-server";
      redis_ = std::make_unique<kvtier::testing::RedisServers>(1);
      ASSERT_TRUE(redis_->ok());
    }
    tier_ = open();
  }
  std::unique_ptr<LowerTier> open() {
    if (GetParam().kind == Kind::Disk) {
      return std::make_unique<disk::DiskStore>(
          disk::DiskStoreConfig{.file = scratch_->path() / "g3.slots", .slots = 16, .queue_depth = 4, .key = key_},
          layout());
    }
    shared::SharedStoreConfig c{
        .endpoints = {shared::parse_redis_url(redis_->urls()[0])}, .key_namespace = "contract", .key = key_};
    c.timeout = std::chrono::milliseconds(500);
    return std::make_unique<shared::SharedStore>(std::move(c), layout());
  }
  /// Writes blocks [first, last]; how many the tier said were stored.
  std::size_t put(LowerTier& tier, std::uint64_t first, std::uint64_t last) {
    std::vector<g1::TieredBlock> evicted;
    for (std::uint64_t n = first; n <= last; ++n) {
      EXPECT_EQ(tier.write(block(n), page_of(n, tier.page_bytes()), evicted), LowerTier::WriteStart::Started);
    }
    return tier.poll(true).stored.size();
  }
  /// Reads block n into a page that starts as 0xEE; what the read said and the page.
  std::pair<bool, std::vector<std::byte>> get(LowerTier& tier, std::uint64_t n) {
    std::vector<std::byte> page(tier.page_bytes(), std::byte{0xEE});
    const std::vector<PositionalLineageHash> plhs{block(n).plh};
    const auto found = tier.lookup(plhs);
    if (!found[0]) return {false, page};
    std::byte* const pages[] = {page.data()};
    EXPECT_TRUE(tier.read(plhs, pages).has_value());
    const LowerTierProgress progress = tier.poll(true);
    return {progress.reads.size() == 1 && progress.reads[0].ok[0], page};
  }
  /// Changes block n's stored payload and recomputes both checksums, behind the tier's back.
  void forge(std::uint64_t n) {
    if (GetParam().kind == Kind::Disk) {
      tier_.reset();  // the file is one process's while open
      const auto geometry = disk::SlotGeometry::of(layout());
      const int fd = ::open((scratch_->path() / "g3.slots").c_str(), O_RDWR);
      ASSERT_GE(fd, 0);
      std::vector<std::byte> slot(geometry.slot_bytes);
      bool done = false;
      for (std::uint32_t s = 0; s < 16 && !done; ++s) {
        ASSERT_EQ(::pread(fd, slot.data(), slot.size(), static_cast<off_t>(geometry.offset(s))),
                  static_cast<ssize_t>(slot.size()));
        BlockRecordMeta meta;
        if (read_record_header(slot, layout_fingerprint(layout()), meta) != RecordCheck::Ok ||
            meta.block.hash != block(n).hash) {
          continue;
        }
        kvtier::testing::forge_record(slot, geometry.header_bytes);
        ASSERT_EQ(::pwrite(fd, slot.data(), slot.size(), static_cast<off_t>(geometry.offset(s))),
                  static_cast<ssize_t>(slot.size()));
        done = true;
      }
      ::close(fd);
      ASSERT_TRUE(done) << "block " << n << " is in no slot";
      tier_ = open();
      return;
    }
    const std::string key = dynamic_cast<shared::SharedStore&>(*tier_).key(block(n).plh);
    shared::RedisNode node(shared::parse_redis_url(redis_->urls()[0]), shared::RedisNodeLimits{});
    const shared::RedisCommand get_value{.args = {"GET", key}};
    auto got = node.pipeline(std::span(&get_value, 1));
    ASSERT_NE(got[0], nullptr);
    std::string value(got[0]->str, got[0]->len);
    kvtier::testing::forge_record(std::as_writable_bytes(std::span(value.data(), value.size())),
                                  record_header_bytes(16));
    const shared::RedisCommand set_value{.args = {"SET", key, value}};
    ASSERT_NE(node.pipeline(std::span(&set_value, 1))[0], nullptr);
  }

  std::unique_ptr<kvtier::testing::ScratchDirectory> scratch_;
  std::unique_ptr<kvtier::testing::RedisServers> redis_;
  std::optional<TierKey> key_;
  std::unique_ptr<LowerTier> tier_;
};

TEST_P(LowerTierContract, ABlockIsVisibleOnlyOnceItsWriteCompleted) {
  std::vector<g1::TieredBlock> evicted;
  ASSERT_EQ(tier_->write(block(1), page_of(1, tier_->page_bytes()), evicted), LowerTier::WriteStart::Started);
  EXPECT_TRUE(tier_->contains(block(1).plh));  // the presence filter: not written twice
  EXPECT_FALSE(tier_->find(block(1).plh));     // but not readable yet
  EXPECT_EQ(tier_->write(block(1), page_of(1, tier_->page_bytes()), evicted), LowerTier::WriteStart::Present);
  const LowerTierProgress progress = tier_->poll(true);
  ASSERT_EQ(progress.stored.size(), 1U);
  EXPECT_EQ(progress.stored[0].hash, block(1).hash);
  EXPECT_TRUE(tier_->find(block(1).plh));
}

TEST_P(LowerTierContract, AReadServesTheBlocksOwnBytesVerified) {
  ASSERT_EQ(put(*tier_, 1, 4), 4U);
  for (std::uint64_t n = 1; n <= 4; ++n) {
    const auto [ok, page] = get(*tier_, n);
    EXPECT_TRUE(ok) << "block " << n;
    EXPECT_EQ(page, page_of(n, tier_->page_bytes())) << "block " << n;
  }
  EXPECT_EQ(tier_->stats().checksum_failures, 0U);
}

TEST_P(LowerTierContract, AForgedRecordIsRefusedUnderAKeyAndServedOnlyWithoutOne) {
  ASSERT_EQ(put(*tier_, 1, 3), 3U);
  forge(2);
  const auto [ok, page] = get(*tier_, 2);
  if (!GetParam().keyed) {
    EXPECT_TRUE(ok) << "the forgery no longer works without a key: the docs' warning is out of date";
    EXPECT_NE(page, page_of(2, tier_->page_bytes()));
    return;
  }
  EXPECT_FALSE(ok);
  EXPECT_EQ(page, std::vector<std::byte>(tier_->page_bytes(), std::byte{0xEE})) << "a refused read wrote the page";
  EXPECT_EQ(tier_->stats().authentication_failures, 1U);
  EXPECT_EQ(tier_->stats().checksum_failures, 1U);
  EXPECT_FALSE(tier_->find(block(2).plh));  // dropped
  EXPECT_TRUE(get(*tier_, 1).first);
  EXPECT_TRUE(get(*tier_, 3).first);
}

TEST_P(LowerTierContract, AReadOfABlockThatLeftIsAMissNotAnException) {
  ASSERT_EQ(put(*tier_, 1, 2), 2U);
  if (GetParam().kind == Kind::Shared) {
    ASSERT_EQ(redis_->cli(0, "FLUSHALL"), "OK");  // gone between lookup and read
  }
  const std::vector<PositionalLineageHash> plhs{block(1).plh};
  std::vector<std::byte> page(tier_->page_bytes(), std::byte{0xEE});
  std::byte* const pages[] = {page.data()};
  if (GetParam().kind == Kind::Disk) {
    auto& store = dynamic_cast<disk::DiskStore&>(*tier_);
    store.inject_faults(disk::DiskFaults{.fail_read = 1});
  }
  ASSERT_TRUE(tier_->find(block(1).plh));
  ASSERT_TRUE(tier_->read(plhs, pages).has_value());
  LowerTierProgress progress;
  EXPECT_NO_THROW(progress = tier_->poll(true));
  ASSERT_EQ(progress.reads.size(), 1U);
  EXPECT_FALSE(progress.reads[0].ok[0]);
  EXPECT_EQ(page, std::vector<std::byte>(tier_->page_bytes(), std::byte{0xEE}));
}

INSTANTIATE_TEST_SUITE_P(Tiers, LowerTierContract,
                         ::testing::Values(Mode{Kind::Disk, false}, Mode{Kind::Disk, true}, Mode{Kind::Shared, false},
                                           Mode{Kind::Shared, true}),
                         [](const ::testing::TestParamInfo<Mode>& mode) {
                           return std::string(mode.param.kind == Kind::Disk ? "g3" : "g4") +
                                  (mode.param.keyed ? "_keyed" : "_unkeyed");
                         });

}  // namespace
}  // namespace kvtier::tiers
