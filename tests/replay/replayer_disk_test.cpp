// The replay over three tiers: a prefix G2 evicted comes back from G3 with
// its bytes, on both backends; the shared Mooncake trace gains G3 hits with
// zero mismatches, and a second replay in a new session on the same
// directory hits G3 from its first requests.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>

#include <fcntl.h>
#include <unistd.h>

#include <fstream>

#include "kvtier/memory/host_runtime.hpp"
#include "kvtier/replay/replayer.hpp"
#include "kvtier/tiers/disk/slot_scan.hpp"
#include "support/record_forgery.hpp"
#include "support/scratch_directory.hpp"

namespace kvtier::replay {
namespace {

class ReplayerDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<kvtier::testing::ScratchDirectory>("kvtier-replay-g3");
    dir_ = scratch_->path() / "g3";
  }

  ReplayConfig config(g1::G1Backend backend, std::uint32_t capacity, std::uint32_t block_size,
                      std::uint32_t host_blocks, std::uint32_t disk_blocks) const {
    ReplayConfig c;
    c.session.manager = g1::G1ManagerConfig{.capacity = capacity, .block_size = block_size, .backend = backend};
    c.session.geometry = KvGeometry{.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype = KvDtype::Bf16};
    c.session.host_blocks = host_blocks;
    c.session.disk = session::DiskTierSettings{.path = dir_, .blocks = disk_blocks};
    c.verify = VerifyMode::Full;
    return c;
  }

  memory::HostRuntime runtime_;
  std::unique_ptr<kvtier::testing::ScratchDirectory> scratch_;
  std::filesystem::path dir_;
};

TraceRequest request(double at, std::vector<std::uint64_t> ids) {
  return TraceRequest{
      .timestamp_ms = at, .input_length = ids.size() * kTraceBlockTokens, .output_length = 0, .hash_ids = ids};
}

TEST_F(ReplayerDisk, APrefixG2EvictedComesBackFromG3WithItsBytes) {
  for (const g1::G1Backend backend : {g1::G1Backend::Native, g1::G1Backend::Kvbm}) {
    std::filesystem::remove_all(dir_);
    ReplayConfig c = config(backend, 24, 64, 8, 64);  // 24 G1 pages, 8 G2 pages
    c.max_running = 1;
    // 1, 2 and 3 fill G1; 4 pushes 1 to G2, 6 pushes 2 there and 1 on to G3; 1 comes back.
    const auto report = replay(
        runtime_, c,
        {request(0, {1}), request(1, {2}), request(2, {3}), request(3, {4}), request(4, {6}), request(5, {1, 5})});
    EXPECT_EQ(report.g3_hit_blocks, 8U) << g1::backend_name(backend);
    EXPECT_EQ(report.g2_hit_blocks, 0U);
    EXPECT_EQ(report.g3_blocks_read, 8U);
    EXPECT_GE(report.g3_blocks_written, 8U);
    EXPECT_EQ(report.g3_checksum_failures, 0U);
    EXPECT_GE(report.pages_verified, 8U);
    EXPECT_EQ(report.mismatches, 0U);
    EXPECT_NEAR(report.g3_hit_rate(), 8.0 / static_cast<double>(report.prompt_blocks), 1e-12);
  }
}

TEST_F(ReplayerDisk, TheSharedTraceHitsG3AndASecondProcessHitsItFromItsFirstRequests) {
  const auto trace = read_trace_file(KVTIER_MOONCAKE_TRACE, 200);
  const ReplayConfig c = config(g1::G1Backend::Native, 1500, 128, 500, 20000);
  const auto first = replay(runtime_, c, trace);
  EXPECT_GT(first.g3_hit_blocks, 0U);
  EXPECT_EQ(first.g3_recovered_blocks, 0U);
  EXPECT_EQ(first.g3_checksum_failures, 0U);
  EXPECT_EQ(first.mismatches, 0U);
  EXPECT_GT(first.pages_verified, 0U);

  // A new session on the same directory: what the first one demoted is there.
  const std::vector<TraceRequest> opening(trace.begin(), trace.begin() + 20);
  const auto second = replay(runtime_, c, opening);
  EXPECT_GT(second.g3_recovered_blocks, 0U);
  EXPECT_GT(second.g3_hit_blocks, 0U);
  EXPECT_EQ(second.g1_hit_blocks + second.g2_hit_blocks, 0U);  // a cold G1 and G2: every hit came from disk
  EXPECT_EQ(second.mismatches, 0U);
  EXPECT_GE(second.pages_verified, second.g3_hit_blocks);
}

// Issue 31, L4: G3 with --instances failed ("in use by another kvtier
// process": every instance opened the one file). Each instance keeps a tier
// of its own, in DIR/instance-<i>; a second run finds each one's blocks.
TEST_F(ReplayerDisk, SeveralInstancesKeepATierEachInTheirOwnDirectory) {
  const auto trace = read_trace_file(KVTIER_MOONCAKE_TRACE, 60);
  ReplayConfig c = config(g1::G1Backend::Native, 1500, 128, 500, 20000);
  c.instances = 2;
  const auto first = replay_instances(runtime_, c, trace);
  ASSERT_EQ(first.size(), 2U);
  for (std::size_t i = 0; i < first.size(); ++i) {
    EXPECT_GT(first[i].g3_blocks_written, 0U) << "instance " << i;
    EXPECT_TRUE(std::filesystem::exists(dir_ / ("instance-" + std::to_string(i)) / session::kDiskTierFile));
    EXPECT_EQ(first[i].mismatches, 0U);
  }
  const auto second = replay_instances(runtime_, c, std::vector<TraceRequest>(trace.begin(), trace.begin() + 20));
  for (std::size_t i = 0; i < second.size(); ++i) {
    EXPECT_GT(second[i].g3_recovered_blocks, 0U) << "instance " << i;
  }
}

/// Rewrites every record in the G3 file of `c` with its payload changed and
/// both checksums recomputed, as someone who can write the file would.
std::size_t forge_every_slot(const ReplayConfig& c, const std::filesystem::path& file) {
  KvGeometry g = c.session.geometry;
  g.tokens_per_block = c.session.manager.block_size;
  const auto geometry = tiers::disk::SlotGeometry::of(KvLayout(g, PageLayout::PageMajor, 1));
  const int fd = ::open(file.c_str(), O_RDWR);
  EXPECT_GE(fd, 0);
  std::vector<std::byte> slot(geometry.slot_bytes);
  std::size_t forged = 0;
  for (std::uint32_t s = 0;; ++s) {
    if (::pread(fd, slot.data(), slot.size(), static_cast<off_t>(geometry.offset(s))) !=
        static_cast<ssize_t>(slot.size())) {
      break;
    }
    if (std::memcmp(slot.data(), "KVTREC01", 8) != 0) continue;
    kvtier::testing::forge_record(slot, geometry.header_bytes);
    EXPECT_EQ(::pwrite(fd, slot.data(), slot.size(), static_cast<off_t>(geometry.offset(s))),
              static_cast<ssize_t>(slot.size()));
    ++forged;
  }
  ::close(fd);
  return forged;
}

// Issue 31, C2: flip a payload and recompute both checksums in the slot file,
// and the replay fetched 4,353 blocks "verified" with mismatches. Under a tier
// key every one is refused and counted, and no wrong byte is served.
TEST_F(ReplayerDisk, ForgedSlotsAreServedWithoutATierKeyAndRefusedWithOne) {
  const auto trace = read_trace_file(KVTIER_MOONCAKE_TRACE, 60);
  const std::vector<TraceRequest> opening(trace.begin(), trace.begin() + 20);
  const std::filesystem::path key = scratch_->path() / "key";
  std::ofstream(key) << "a tier key of more than thirty-two bytes of secret";
  std::filesystem::permissions(key, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  for (const bool keyed : {false, true}) {
    std::filesystem::remove_all(dir_);
    ReplayConfig c = config(g1::G1Backend::Native, 1500, 128, 500, 20000);
    if (keyed) c.session.tier_key_file = key;
    const auto first = replay(runtime_, c, trace);
    ASSERT_GT(first.g3_blocks_written, 0U);
    EXPECT_GT(forge_every_slot(c, dir_ / session::kDiskTierFile), 0U);
    const auto second = replay(runtime_, c, opening);
    if (!keyed) {
      EXPECT_GT(second.mismatches, 0U) << "the threat docs/disk.md describes";
      continue;
    }
    EXPECT_EQ(second.mismatches, 0U);
    EXPECT_EQ(second.g3_hit_blocks, 0U);
    EXPECT_GT(second.g3_authentication_failures, 0U);
    EXPECT_EQ(second.g3_authentication_failures, second.g3_checksum_failures);
  }
}

}  // namespace
}  // namespace kvtier::replay
