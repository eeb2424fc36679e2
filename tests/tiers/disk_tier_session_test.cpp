// G3 under G2 on a session, both backends: blocks G2 evicts are demoted to
// the disk tier, a request whose prompt only G3 holds comes back through G2
// byte for byte (in this process and in a new session on the same
// directory), and every fault — a flipped byte in the file, a failed or
// short read, a full disk, a truncated file — serves nothing wrong, loses
// nothing G1/G2 hold, and is counted.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <set>

#include "kvtier/core/errors.hpp"
#include "kvtier/driver/request_driver.hpp"
#include "kvtier/session/session.hpp"
#include "kvtier/tiers/disk/disk_store.hpp"
#include "support/scratch_directory.hpp"
#include "support/tier_event_view.hpp"

namespace kvtier::tiers::disk {
namespace {

constexpr std::uint32_t kBlock = 4;

class DiskTierSession : public ::testing::TestWithParam<g1::G1Backend> {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<kvtier::testing::ScratchDirectory>("kvtier-g3-session");
    dir_ = scratch_->path() / "g3";
  }

  session::SessionConfig config(std::uint32_t disk_blocks = 64) const {
    session::SessionConfig c;
    c.manager.backend = GetParam();
    c.manager.capacity = 8;
    c.manager.block_size = kBlock;
    c.geometry = KvGeometry{.layers = 2, .kv_heads = 1, .head_dim = 8, .dtype = KvDtype::Fp16};
    c.device = memory::RuntimeChoice::Host;
    c.host_blocks = 4;
    c.disk = session::DiskTierSettings{
        .path = dir_, .blocks = disk_blocks, .queue_depth = 4, .backlog = 4, .reformat = false};
    c.event_sinks.push_back(sink_);
    return c;
  }

  static ActiveSequence sequence(TokenId first, std::size_t tokens) {
    std::vector<TokenId> prompt(tokens);
    std::iota(prompt.begin(), prompt.end(), first);
    return ActiveSequence(std::move(prompt), ActiveSequenceConfig{.block_size = kBlock, .max_output_tokens = 4});
  }

  /// Prefills the request, writes each full block's pattern, and releases it.
  static void prefill_and_release(session::Session& s, g1::OwnerId owner, ActiveSequence& seq) {
    driver::RequestDriver driver = s.driver();
    std::size_t calls = 0;
    ASSERT_TRUE(driver.allocate_collecting(owner, seq, seq.len(), calls).is_ready());
    const auto table = s.manager().block_table(owner);
    s.pool().fill_pattern(std::vector<PageId>(table.begin(), table.end()), s.pattern_identities(owner));
    driver.finalize(owner, seq, 0, seq.len());
    driver.release(owner, seq);
  }

  /// a (4 blocks), then b and c (8 each) through a G1 of 8 and a G2 of 4:
  /// a's blocks leave G2 for G3.
  static void push_a_to_disk(session::Session& s) {
    ActiveSequence a = sequence(0, 4 * kBlock);
    prefill_and_release(s, g1::OwnerId(1), a);
    ActiveSequence b = sequence(1000, 8 * kBlock);
    prefill_and_release(s, g1::OwnerId(2), b);
    ActiveSequence c = sequence(2000, 8 * kBlock);
    prefill_and_release(s, g1::OwnerId(3), c);
    s.manager().collect_offloads(true);
  }

  /// Admits a's prompt again; answers the admission and whether the
  /// swapped-in blocks hold a's bytes.
  static driver::Admission readmit_a(session::Session& s, g1::OwnerId owner, bool& bytes_ok) {
    ActiveSequence again = sequence(0, 4 * kBlock + 2);
    const driver::Admission admission = s.driver().admit(owner, again, again.len(), 1);
    const auto table = s.manager().block_table(owner);
    const auto ids = s.pattern_identities(owner);
    const std::vector<PageId> pages(table.begin(), table.begin() + static_cast<std::ptrdiff_t>(admission.swapped_in));
    bytes_ok = s.pool().find_pattern_mismatches(pages, std::span(ids).first(admission.swapped_in)).empty();
    return admission;
  }

  static DiskStore& store(session::Session& s) { return dynamic_cast<DiskStore&>(*s.engine()->lower_tier()); }

  /// Hashes whose Disk Stored and Removed events leave them held, checking they alternate.
  std::set<std::uint64_t> disk_view() const {
    return kvtier::testing::held_by_tier(sink_->events(), StorageTier::Disk);
  }

  static std::set<std::uint64_t> resident_hashes(const session::Session& s) {
    std::set<std::uint64_t> hashes;
    for (const g1::TieredBlock& block : s.engine()->lower_tier()->resident_blocks()) hashes.insert(block.hash.value());
    return hashes;
  }

  static std::set<std::uint64_t> a_hashes() {
    std::set<std::uint64_t> hashes;
    const ActiveSequence a = sequence(0, 4 * kBlock);
    for (std::size_t i = 0; i < 4; ++i) hashes.insert(a.blocks()[i].hash().value());
    return hashes;
  }

  /// How many of a's blocks, from the first, G3 holds: what a readmission reads from it.
  static std::size_t a_prefix_on_disk(const session::Session& s) {
    const std::set<std::uint64_t> held = resident_hashes(s);
    const ActiveSequence a = sequence(0, 4 * kBlock);
    std::size_t n = 0;
    while (n < 4 && held.contains(a.blocks()[n].hash().value())) ++n;
    return n;
  }

  std::unique_ptr<kvtier::testing::ScratchDirectory> scratch_;
  std::filesystem::path dir_;  // the tier's directory, inside the scratch one
  std::shared_ptr<RecordingEventSink> sink_ = std::make_shared<RecordingEventSink>();
};

TEST_P(DiskTierSession, APromptOnlyG3HoldsComesBackThroughG2ByteForByte) {
  session::Session s(config());
  push_a_to_disk(s);
  const std::set<std::uint64_t> a = a_hashes();
  const std::set<std::uint64_t> on_disk = resident_hashes(s);
  ASSERT_TRUE(std::includes(on_disk.begin(), on_disk.end(), a.begin(), a.end()));
  EXPECT_EQ(disk_view(), on_disk);  // DISK events tell exactly what G3 holds
  for (const std::uint64_t hash : a) EXPECT_FALSE(s.engine()->is_resident(SequenceHash(hash)));

  bool bytes_ok = false;
  const driver::Admission admission = readmit_a(s, g1::OwnerId(4), bytes_ok);
  ASSERT_TRUE(admission.acquire.is_ready());
  EXPECT_EQ(admission.swapped_in, 4U);
  EXPECT_EQ(admission.swapped_in_from_lower, 4U);
  EXPECT_EQ(admission.cached_blocks, 4U);
  EXPECT_TRUE(bytes_ok);
  const LowerTierStats io = s.engine()->lower_tier()->stats();
  EXPECT_EQ(io.blocks_read, 4U);
  EXPECT_EQ(io.checksum_failures, 0U);
  EXPECT_EQ(s.engine()->lower_usage().promoted, 4U);
  EXPECT_GE(s.engine()->lower_usage().demoted, 4U);
  const metrics::KvMetrics m = s.tier_metrics();
  EXPECT_TRUE(m.tier(metrics::Tier::G3).present);
  EXPECT_EQ(m.g3_to_g2.blocks, 4U);
  EXPECT_GE(m.g2_to_g3.blocks, 4U);
  EXPECT_EQ(m.tier(metrics::Tier::G3).stored_blocks, io.blocks_written);
  s.manager().collect_offloads(true);
  s.manager().audit();
}

TEST_P(DiskTierSession, ANewSessionOnTheSameDirectoryServesWhatTheLastOneDemoted) {
  {
    session::Session first(config());
    push_a_to_disk(first);
  }
  sink_->clear();
  session::Session second(config());
  const std::set<std::uint64_t> a = a_hashes();
  const std::set<std::uint64_t> recovered = disk_view();  // announced when the engine was bound
  EXPECT_TRUE(std::includes(recovered.begin(), recovered.end(), a.begin(), a.end()));
  EXPECT_EQ(recovered, resident_hashes(second));
  bool bytes_ok = false;
  const driver::Admission admission = readmit_a(second, g1::OwnerId(1), bytes_ok);
  EXPECT_EQ(admission.swapped_in_from_lower, 4U);
  EXPECT_TRUE(bytes_ok);  // this G1 pool never held them: the bytes came from the file
  second.manager().audit();
}

TEST_P(DiskTierSession, AByteFlippedInTheFileIsNeverServed) {
  SlotGeometry geometry;
  std::size_t used = 0;
  {
    session::Session first(config());
    push_a_to_disk(first);
    geometry = store(first).geometry();
    used = first.engine()->lower_tier()->used();
  }
  {  // every slot's payload damaged between runs
    const int fd = ::open((dir_ / session::kDiskTierFile).c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    for (std::size_t slot = 0; slot < used; ++slot) {
      const auto offset =
          static_cast<off_t>(geometry.offset(static_cast<std::uint32_t>(slot)) + geometry.header_bytes + 5);
      char byte = 0;
      ASSERT_EQ(::pread(fd, &byte, 1, offset), 1);
      byte = static_cast<char>(byte ^ 0x10);
      ASSERT_EQ(::pwrite(fd, &byte, 1, offset), 1);
    }
    ::close(fd);
  }
  sink_->clear();
  session::Session second(config());
  bool bytes_ok = false;
  const driver::Admission admission = readmit_a(second, g1::OwnerId(1), bytes_ok);
  ASSERT_TRUE(admission.acquire.is_ready());  // the request recomputes
  EXPECT_EQ(admission.swapped_in, 0U);
  EXPECT_EQ(admission.cached_blocks, 0U);
  const LowerTierStats io = second.engine()->lower_tier()->stats();
  EXPECT_EQ(io.checksum_failures, 4U);
  EXPECT_EQ(io.blocks_read, 0U);
  EXPECT_EQ(second.engine()->lower_usage().promotions_failed, 4U);
  for (const std::uint64_t hash : a_hashes()) {  // dropped from G3 and told
    EXPECT_FALSE(resident_hashes(second).contains(hash));
    EXPECT_FALSE(second.engine()->is_resident(SequenceHash(hash)));
  }
  EXPECT_EQ(disk_view(), resident_hashes(second));
  EXPECT_EQ(second.engine()->stats().used, 0U);  // the Landing pages went back
  second.manager().audit();
}

TEST_P(DiskTierSession, FailedAndShortReadsAreMissesThatKeepTheBlocksOtherTiersHold) {
  for (const DiskFaults fault : {DiskFaults{.fail_read = 2}, DiskFaults{.short_read = 1}}) {
    std::filesystem::remove_all(dir_);
    sink_->clear();
    session::Session s(config());
    push_a_to_disk(s);
    store(s).inject_faults(fault);
    bool bytes_ok = false;
    const driver::Admission admission = readmit_a(s, g1::OwnerId(4), bytes_ok);
    ASSERT_TRUE(admission.acquire.is_ready());
    EXPECT_EQ(admission.swapped_in, 0U);  // one block did not come: the request recomputes
    EXPECT_EQ(s.engine()->lower_tier()->stats().read_failures, 1U);
    EXPECT_EQ(s.engine()->lower_usage().promotions_failed, 1U);
    EXPECT_EQ(s.engine()->lower_usage().promoted, 3U);  // the others landed in G2, verified
    EXPECT_EQ(s.engine()->stats().failed_transfers, 1U);
    s.manager().collect_offloads(true);
    EXPECT_EQ(disk_view(), resident_hashes(s));
    s.manager().audit();
  }
}

TEST_P(DiskTierSession, AFullDiskLosesOnlyTheBlockItRefused) {
  session::Session s(config());
  store(s).inject_faults(DiskFaults{.fail_write = 1});  // ENOSPC on the first write
  push_a_to_disk(s);  // G2 demotes a's 4 blocks (b's first 4 find every G2 page landing)
  const LowerTierStats io = s.engine()->lower_tier()->stats();
  EXPECT_EQ(io.write_failures, 1U);
  EXPECT_EQ(io.blocks_written, 3U);
  EXPECT_EQ(s.engine()->lower_tier()->used(), 3U);  // the failed slot went back
  EXPECT_EQ(disk_view(), resident_hashes(s));       // never told as stored
  const std::size_t on_disk = a_prefix_on_disk(s);
  bool bytes_ok = false;
  const driver::Admission admission = readmit_a(s, g1::OwnerId(4), bytes_ok);
  EXPECT_TRUE(bytes_ok);
  EXPECT_EQ(admission.swapped_in_from_lower, on_disk) << "swapped in " << admission.swapped_in;
  s.manager().audit();
}

TEST_P(DiskTierSession, ATruncatedFileKeepsTheSlotsBeforeTheCut) {
  std::uint64_t slot_bytes = 0;
  std::size_t used = 0;
  {
    session::Session first(config());
    push_a_to_disk(first);
    slot_bytes = store(first).geometry().slot_bytes;
    used = first.engine()->lower_tier()->used();
  }
  ASSERT_GE(used, 4U);
  std::filesystem::resize_file(dir_ / session::kDiskTierFile,
                               kTierFileHeaderBytes + 2 * slot_bytes + 100);  // into slot 2's header
  session::Session second(config());
  EXPECT_EQ(second.engine()->lower_tier()->used(), 2U);  // slots 0 and 1
  EXPECT_EQ(store(second).recovered().resident.size(), 2U);
  const std::size_t on_disk = a_prefix_on_disk(second);
  bool bytes_ok = false;
  const driver::Admission admission = readmit_a(second, g1::OwnerId(1), bytes_ok);
  EXPECT_EQ(admission.swapped_in_from_lower, on_disk);
  EXPECT_TRUE(bytes_ok);
  second.manager().audit();
}

TEST_P(DiskTierSession, BadSettingsAreRefusedWithNothingKept) {
  session::SessionConfig c = config();
  c.host_blocks = 0;
  EXPECT_THROW(session::Session{c}, ConfigError);
  c = config(0);
  EXPECT_THROW(session::Session{c}, ConfigError);
  {
    session::Session holder(config());  // the directory's tier is in use
    EXPECT_THROW(session::Session{config()}, ConfigError);
  }
  c = config();
  c.geometry.head_dim = 16;  // another layout's tier on the directory: refused, taken only when asked
  EXPECT_THROW(session::Session{c}, ConfigError);
  c.disk->reformat = true;
  {
    session::Session other(c);
    push_a_to_disk(other);
  }
  EXPECT_THROW(session::Session{config()}, ConfigError);
  c = config();
  c.disk->reformat = true;  // only when asked
  session::Session reformatted(c);
  EXPECT_EQ(reformatted.engine()->lower_tier()->used(), 0U);
}

// Issue 35: second-sight admission. A block G2 lets go for the first time is
// not written; one that comes back and is let go again, or that was a G2 hit
// in between, is.
TEST_P(DiskTierSession, SecondOfferAdmissionWritesABlockOnlyOnceItCameBack) {
  session::SessionConfig c = config();
  c.g3_admission = offload::TierAdmission::SecondOffer;
  c.host_blocks = 8;  // room in G2 for a beside the blocks that push it out
  session::Session s(c);
  push_a_to_disk(s);
  EXPECT_EQ(a_prefix_on_disk(s), 0U);
  EXPECT_GE(s.engine()->lower_usage().declined, 4U);
  EXPECT_EQ(s.engine()->lower_tier()->stats().blocks_written, 0U);

  ActiveSequence a = sequence(0, 4 * kBlock);  // recomputed: nothing held it
  prefill_and_release(s, g1::OwnerId(4), a);
  s.manager().collect_offloads(true);
  ActiveSequence d = sequence(3000, 8 * kBlock);  // a leaves G1 for G2...
  prefill_and_release(s, g1::OwnerId(5), d);
  s.manager().collect_offloads(true);

  ActiveSequence e = sequence(4000, 8 * kBlock);  // ...and G2, a second time
  prefill_and_release(s, g1::OwnerId(6), e);
  s.manager().collect_offloads(true);
  EXPECT_EQ(a_prefix_on_disk(s), 4U);  // its second offer

  bool bytes_ok = false;
  const driver::Admission admission = readmit_a(s, g1::OwnerId(7), bytes_ok);
  EXPECT_EQ(admission.swapped_in_from_lower, 4U);
  EXPECT_TRUE(bytes_ok);
  EXPECT_EQ(disk_view(), resident_hashes(s));  // DISK events tell exactly what G3 holds
}

TEST_P(DiskTierSession, AG2HitCountsAsTheSecondSighting) {
  session::SessionConfig c = config();
  c.g3_admission = offload::TierAdmission::SecondOffer;
  session::Session s(c);
  ActiveSequence a = sequence(0, 4 * kBlock);
  prefill_and_release(s, g1::OwnerId(1), a);
  ActiveSequence b = sequence(1000, 8 * kBlock);  // a leaves G1 for G2
  prefill_and_release(s, g1::OwnerId(2), b);
  s.manager().collect_offloads(true);
  ActiveSequence again = sequence(0, 4 * kBlock);
  const driver::Admission hit = s.driver().admit(g1::OwnerId(3), again, again.len(), 1);
  ASSERT_TRUE(hit.acquire.is_ready());
  ASSERT_EQ(hit.swapped_in, 4U);  // a G2 hit
  s.driver().finalize(g1::OwnerId(3), again, 0, again.len());
  s.driver().release(g1::OwnerId(3), again);
  ActiveSequence d = sequence(3000, 8 * kBlock);
  prefill_and_release(s, g1::OwnerId(4), d);
  ActiveSequence e = sequence(4000, 8 * kBlock);
  prefill_and_release(s, g1::OwnerId(5), e);
  s.manager().collect_offloads(true);
  EXPECT_EQ(a_prefix_on_disk(s), 4U);                 // its first offer, after a hit
  EXPECT_GT(s.engine()->lower_usage().declined, 0U);  // the others' first offers
}

TEST_P(DiskTierSession, AdmissionWithoutItsTierIsRefused) {
  session::SessionConfig c = config();
  c.disk.reset();
  c.g3_admission = offload::TierAdmission::SecondOffer;
  EXPECT_THROW(session::Session{c}, ConfigError);
  c = config();
  c.g4_admission = offload::TierAdmission::SecondOffer;
  EXPECT_THROW(session::Session{c}, ConfigError);
  c = config();
  c.host_blocks = 0;
  c.disk.reset();
  c.g2_eviction = g1::EvictionBackend::Arc;
  EXPECT_THROW(session::Session{c}, ConfigError);
}

INSTANTIATE_TEST_SUITE_P(Backends, DiskTierSession, ::testing::Values(g1::G1Backend::Native, g1::G1Backend::Kvbm),
                         [](const ::testing::TestParamInfo<g1::G1Backend>& backend) {
                           return std::string(g1::backend_name(backend.param));
                         });

// KV cache groups (model-geometry.md §5): every group's blocks pass G2 into
// G3 under (hash, group), come back into their own group byte for byte, and
// G3's events name each block's group.
TEST(GroupedDiskTier, EveryGroupsBlocksComeBackFromG3IntoTheirGroupAndItsEventsNameTheGroup) {
  kvtier::testing::ScratchDirectory scratch("kvtier-g3-groups");
  auto sink = std::make_shared<RecordingEventSink>();
  const auto spec = [](GroupKind kind, std::uint32_t window) {
    return GroupSpec{.kind = kind, .sliding_window = window, .kv_heads = 1, .head_dim = 8, .dtype = KvDtype::Fp16};
  };
  session::SessionConfig c;
  c.manager =
      g1::G1ManagerConfig{.capacity = 12,
                          .block_size = kBlock,
                          .groups = {spec(GroupKind::FullAttention, 0), spec(GroupKind::SlidingWindow, 2 * kBlock)}};
  c.device = memory::RuntimeChoice::Host;
  c.host_blocks = 4;
  c.disk = session::DiskTierSettings{.path = scratch.path() / "g3", .blocks = 128, .queue_depth = 4, .backlog = 8};
  c.event_sinks.push_back(sink);
  session::Session s(c);
  driver::RequestDriver driver = s.driver();
  const auto run = [&](g1::OwnerId owner, TokenId first, bool mark) {
    std::vector<TokenId> prompt(4 * kBlock);
    std::iota(prompt.begin(), prompt.end(), first);
    ActiveSequence seq(prompt, ActiveSequenceConfig{.block_size = kBlock, .max_output_tokens = 1});
    ASSERT_TRUE(driver.admit(owner, seq, seq.len(), seq.len()).acquire.is_ready());
    for (std::size_t g = 0; mark && g < 2; ++g) {
      for (std::size_t b = 0; b < 4; ++b) {
        std::byte* page = s.pool().chunk_address(s.manager().block_table(owner, g)[b], 0);
        std::memset(page, static_cast<int>(16 * g + b + 1), s.pool().layout().chunk_bytes());
      }
    }
    driver.finalize(owner, seq, 0, seq.len());
    driver.release(owner, seq);
  };
  run(g1::OwnerId(1), 0, true);
  for (std::uint64_t r = 2; r < 8; ++r) run(g1::OwnerId(r), static_cast<TokenId>(1000 * r), false);
  s.manager().collect_offloads(true);

  std::vector<TokenId> prompt(4 * kBlock);
  std::iota(prompt.begin(), prompt.end(), 0);
  ActiveSequence again(prompt, ActiveSequenceConfig{.block_size = kBlock, .max_output_tokens = 1});
  const driver::Admission admission = driver.admit(g1::OwnerId(9), again, again.len(), again.len());
  ASSERT_TRUE(admission.acquire.is_ready());
  EXPECT_EQ(admission.cached_blocks, 3U);  // 15 tokens' candidate: 3 blocks in each group
  EXPECT_GT(admission.swapped_in_from_lower, 0U);
  // The window's hit is its last ceil((8 - 1) / 4) = 2 blocks: block 0 is the null page.
  EXPECT_EQ(s.manager().block_table(g1::OwnerId(9), 1)[0], *s.manager().null_page());
  for (std::size_t g = 0; g < 2; ++g) {
    for (std::size_t b = g; b < 3; ++b) {
      const std::byte* page = s.pool().chunk_address(s.manager().block_table(g1::OwnerId(9), g)[b], 0);
      EXPECT_EQ(page[0], static_cast<std::byte>(16 * g + b + 1)) << "group " << g << " block " << b;
      EXPECT_EQ(page[s.pool().layout().chunk_bytes() - 1], static_cast<std::byte>(16 * g + b + 1));
    }
  }
  std::set<std::uint32_t> disk_groups;
  for (const KvEvent& event : sink->events()) {
    if (event.tier != StorageTier::Disk) continue;
    ASSERT_TRUE(event.group.has_value());
    disk_groups.insert(event.group->index);
  }
  EXPECT_EQ(disk_groups, (std::set<std::uint32_t>{0, 1}));
  EXPECT_EQ(s.engine()->lower_tier()->stats().format_refusals, 0U);
}

}  // namespace
}  // namespace kvtier::tiers::disk
