// Many requests with shared prefixes over a G1 far smaller than the working
// set, with swap-ins, random cancellations and injected copy faults in both
// directions; with a G3 disk tier under G2, injected disk faults too (a full
// disk, failed and short reads). Every reused block's bytes are checked when
// it is reused, and at the end every registered page of G1 and G2, and every
// block G3 holds, verifies, and every count reconciles.
#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <set>

#include "kvtier/core/errors.hpp"
#include "kvtier/driver/request_driver.hpp"
#include "kvtier/memory/host_runtime.hpp"
#include "kvtier/offload/offload_engine.hpp"
#include "support/tier_event_view.hpp"
#if KVTIER_WITH_URING
#include "kvtier/tiers/disk/disk_store.hpp"
#include "support/scratch_directory.hpp"
#endif

namespace kvtier::offload {
namespace {

struct StressParams {
  g1::G1Backend backend;
  g1::EvictionBackend eviction;
  std::uint32_t capacity;
  std::uint32_t host_blocks;
  std::uint32_t batch_blocks;
  bool verify_swaps;
  std::uint32_t staging_pages = 0;  // > 0: the small-page path through a ring this large
  std::uint32_t disk_blocks = 0;    // > 0: a G3 disk tier of this many blocks under G2
};

std::string stress_name(const ::testing::TestParamInfo<StressParams>& info) {
  const std::string backend = info.param.backend == g1::G1Backend::Native
                                  ? std::string("native")
                                  : std::string("kvbm_") + g1::eviction_backend_name(info.param.eviction);
  return backend + "_g1_" + std::to_string(info.param.capacity) + "_g2_" + std::to_string(info.param.host_blocks) +
         (info.param.verify_swaps ? "_verified" : "") +
         (info.param.staging_pages > 0 ? "_ring_" + std::to_string(info.param.staging_pages) : "") +
         (info.param.disk_blocks > 0 ? "_g3_" + std::to_string(info.param.disk_blocks) : "");
}

class OffloadStress : public ::testing::TestWithParam<StressParams> {
 protected:
  static constexpr std::uint32_t kBlockSize = 4;

  void SetUp() override {
    const StressParams& p = GetParam();
    const KvGeometry geometry{
        .layers = 2, .kv_heads = 2, .head_dim = 16, .dtype = KvDtype::Bf16, .tokens_per_block = kBlockSize};
    pool_ = std::make_unique<memory::KvPool>(runtime_, KvLayout(geometry, PageLayout::LayerMajor, p.capacity));
    std::unique_ptr<tiers::LowerTier> disk;
    if (p.disk_blocks > 0) {
#if KVTIER_WITH_URING
      dir_ = std::make_unique<kvtier::testing::ScratchDirectory>("kvtier-stress-g3");
      auto store = std::make_unique<tiers::disk::DiskStore>(
          tiers::disk::DiskStoreConfig{
              .file = dir_->path() / "g3", .slots = p.disk_blocks, .queue_depth = 4, .backlog = 4},
          KvLayout(geometry, PageLayout::PageMajor, 1));
      disk_ = store.get();
      disk = std::move(store);
#else
      GTEST_SKIP() << "built without liburing: no disk tier";
#endif
    }
    engine_ = std::make_shared<OffloadEngine>(runtime_, *pool_,
                                              OffloadConfig{.host_blocks = p.host_blocks,
                                                            .batch_blocks = p.batch_blocks,
                                                            .verify_swaps = p.verify_swaps,
                                                            .staging_pages = p.staging_pages},
                                              std::move(disk));
    manager_ = std::make_unique<g1::G1Manager>(
        g1::G1ManagerConfig{
            .capacity = p.capacity, .block_size = kBlockSize, .backend = p.backend, .eviction = p.eviction},
        std::vector<std::shared_ptr<KvEventSink>>{sink_});
    manager_->attach_offload_engine(engine_);
  }

  struct Live {
    g1::OwnerId owner;
    ActiveSequence sequence;
  };

  std::vector<TokenId> prompt(std::mt19937_64& rng) {
    static const std::vector<std::size_t> kSystemBlocks{3, 5, 8, 2, 6};
    const std::size_t system = rng() % kSystemBlocks.size();
    std::vector<TokenId> tokens;
    for (std::size_t i = 0; i < kSystemBlocks[system] * kBlockSize; ++i) {
      tokens.push_back(static_cast<TokenId>(system * 1000 + i));
    }
    const std::size_t suffix = 1 + rng() % (3 * kBlockSize);
    for (std::size_t i = 0; i < suffix; ++i) tokens.push_back(static_cast<TokenId>(100000 + rng() % 50));
    return tokens;
  }

  void release_oldest() {
    ASSERT_FALSE(live_.empty());
    driver::RequestDriver(*manager_).release(live_.front().owner, live_.front().sequence);
    live_.pop_front();
  }

  /// Swaps the request's G2-resident blocks in (§5.5), cancelling some.
  void swap_in(const ActiveSequence& sequence, std::mt19937_64& rng) {
    std::vector<PositionalLineageHash> plhs;
    for (std::size_t i = 0; i < sequence.full_block_count(); ++i) {
      plhs.push_back(GetParam().backend == g1::G1Backend::Native ? g1::native_tier_key(sequence.blocks()[i].hash())
                                                                 : sequence.plh(i));
    }
    for (int attempt = 0; attempt < 2; ++attempt) {
      const std::size_t skip = manager_->get_prefill_cost(sequence).cached_tokens / kBlockSize;
      if (skip >= plhs.size()) return;
      auto pins = manager_->try_pin_g1_prefix(std::span(plhs).first(skip));
      if (!pins) return;
      const auto start = manager_->try_batch_swap_in(std::span(plhs).subspan(skip), pins);
      if (start.status == g1::SwapInStatus::BlockedOnG1Offload) {
        manager_->collect_offloads(true);
        continue;
      }
      if (start.status != g1::SwapInStatus::Scheduled) return;
      if (rng() % 5 == 0) {
        ASSERT_TRUE(manager_->cancel_swap_in(start.swap_in_id));
        ++cancelled_;
      } else {
        const auto registration = manager_->register_completed_swap_in(start.swap_in_id);
        registration.failed ? ++failed_swap_ins_ : swapped_in_ += registration.registered;
      }
      return;
    }
  }

  /// Allocates the whole prompt, making room as a scheduler would; verifies
  /// the bytes of every reused block and writes the pattern of every new one.
  void admit(Live& request) {
    for (int attempt = 0; attempt < 64; ++attempt) {
      const std::size_t hits = manager_->get_prefill_cost(request.sequence).cached_tokens / kBlockSize;
      const auto acquire =
          driver::RequestDriver(*manager_).allocate(request.owner, request.sequence, request.sequence.len());
      if (acquire.kind == g1::G1Acquire::Kind::BlockedOnOffload) {
        manager_->collect_offloads(true);
        continue;
      }
      if (acquire.kind == g1::G1Acquire::Kind::CapacityExhausted) {
        if (!live_.empty()) {
          release_oldest();
        } else if (manager_->offload_stats().swap_ins > 0 || manager_->offload_stats().quarantined > 0) {
          manager_->collect_offloads(true);  // cancelled swap-ins and quarantined pages come back
        } else {
          FAIL() << "one request does not fit in G1";
        }
        continue;
      }
      const auto table = manager_->block_table(request.owner);
      const auto blocks = manager_->owned_blocks(request.owner);
      std::vector<PageId> reused, fresh;
      std::vector<std::uint64_t> reused_ids, fresh_ids;
      for (std::size_t i = 0; i < blocks.size() && blocks[i].is_full(); ++i) {
        (i < hits ? reused : fresh).push_back(table[i]);
        (i < hits ? reused_ids : fresh_ids).push_back(blocks[i].hash().value());
      }
      const auto bad = pool_->find_pattern_mismatches(reused, reused_ids);
      EXPECT_TRUE(bad.empty()) << bad.size() << " reused blocks of request " << request.owner.value()
                               << " hold wrong bytes, first page " << bad.front().value();
      verified_ += reused.size();
      pool_->fill_pattern(fresh, fresh_ids);
      // Computed: the native backend makes the blocks visible (KVBM: a no-op).
      driver::RequestDriver(*manager_).finalize(request.owner, request.sequence, 0, request.sequence.len());
      return;
    }
    FAIL() << "request " << request.owner.value() << " was never admitted";
  }

  void TearDown() override {
    manager_.reset();
    engine_.reset();  // closes the disk tier before its directory goes
  }

#if KVTIER_WITH_URING
  /// Every block G3 holds reads back, verified, as its block's pattern.
  void expect_disk_blocks_verify() {
    // A fault injected near the end may still be counting down; these reads
    // check what the disk holds, not the fault path.
    disk_->inject_faults({});
    const std::vector<g1::TieredBlock> held = disk_->resident_blocks();
    memory::KvPool scratch(runtime_, KvLayout(engine_->host_pool().layout().geometry(), PageLayout::PageMajor, 1));
    for (const g1::TieredBlock& block : held) {
      std::byte* const page[] = {scratch.chunk_address(PageId(0), 0)};
      const auto read = disk_->read(std::span(&block.plh, 1), page);
      ASSERT_TRUE(read.has_value());
      const tiers::LowerTierProgress progress = disk_->poll(true);
      ASSERT_EQ(progress.reads.size(), 1U);
      EXPECT_TRUE(progress.reads.front().ok.front()) << "G3 block " << block.hash.value() << " did not verify";
      const std::vector<PageId> pages{PageId(0)};
      const std::vector<std::uint64_t> ids{block.hash.value()};
      EXPECT_TRUE(scratch.find_pattern_mismatches(pages, ids).empty()) << "G3 block " << block.hash.value();
    }
  }
  std::unique_ptr<kvtier::testing::ScratchDirectory> dir_;
  tiers::disk::DiskStore* disk_ = nullptr;  // the engine's
#endif

  memory::HostRuntime runtime_;
  std::unique_ptr<memory::KvPool> pool_;
  std::shared_ptr<OffloadEngine> engine_;
  std::shared_ptr<RecordingEventSink> sink_ = std::make_shared<RecordingEventSink>();
  std::unique_ptr<g1::G1Manager> manager_;
  std::deque<Live> live_;
  std::size_t verified_ = 0, swapped_in_ = 0, cancelled_ = 0, failed_swap_ins_ = 0;
};

TEST_P(OffloadStress, EveryPageVerifiesAndEveryCountReconciles) {
  std::mt19937_64 rng(20261202);
  constexpr int kRequests = 600;
  for (int r = 1; r <= kRequests; ++r) {
    if (rng() % 16 == 0) engine_->inject_copy_fault(1 + rng() % 3);
#if KVTIER_WITH_URING
    if (disk_ != nullptr && rng() % 24 == 0) {
      const std::uint64_t nth = 1 + rng() % 3;
      switch (rng() % 3) {
        case 0:
          disk_->inject_faults({.fail_write = nth});
          break;
        case 1:
          disk_->inject_faults({.fail_read = nth});
          break;
        default:
          disk_->inject_faults({.short_read = nth});
          break;
      }
    }
#endif
    Live request{g1::OwnerId(static_cast<std::uint64_t>(r)),
                 ActiveSequence(prompt(rng), ActiveSequenceConfig{.block_size = kBlockSize, .max_output_tokens = 4})};
    swap_in(request.sequence, rng);
    admit(request);
    if (HasFatalFailure()) return;
    live_.push_back(std::move(request));
    if (live_.size() > 2) release_oldest();
    if (rng() % 3 == 0) manager_->collect_offloads(false);
    if (r % 50 == 0) {
      ASSERT_NO_THROW(manager_->audit()) << "after request " << r;
    }
  }
  while (!live_.empty()) release_oldest();
  manager_->collect_offloads(true);

  const auto stats = manager_->offload_stats();
  EXPECT_EQ(stats.quarantined, 0U);
  EXPECT_EQ(stats.tier.in_flight, 0U);
  EXPECT_EQ(stats.swap_ins, 0U);
  EXPECT_EQ(manager_->metrics().active_blocks, 0U);
  EXPECT_EQ(manager_->metrics().active_block_refs, 0U);
  ASSERT_NO_THROW(manager_->audit());

  // Every registered page of G1 and G2 holds the bytes of its block.
  std::vector<PageId> pages;
  std::vector<std::uint64_t> ids;
  for (const auto& [page, hash] : manager_->registered_blocks()) {
    pages.push_back(page);
    ids.push_back(hash.value());
  }
  EXPECT_EQ(pages.size(), manager_->metrics().inactive_blocks);
  EXPECT_TRUE(pool_->find_pattern_mismatches(pages, ids).empty());
  pages.clear();
  ids.clear();
  for (const auto& [page, hash] : engine_->resident_blocks()) {
    pages.emplace_back(page.value());
    ids.push_back(hash.value());
  }
  EXPECT_EQ(pages.size(), stats.tier.used);
  EXPECT_TRUE(engine_->host_pool().find_pattern_mismatches(pages, ids).empty());

  // HostPinned events tell exactly what G2 holds: Stored and Removed
  // alternate per hash, and what is left stored is what is resident.
  const std::set<std::uint64_t> host = kvtier::testing::held_by_tier(sink_->events(), StorageTier::HostPinned);
  std::set<std::uint64_t> resident;
  for (const auto& [page, hash] : engine_->resident_blocks()) resident.insert(hash.value());
  EXPECT_EQ(host, resident);

#if KVTIER_WITH_URING
  if (disk_ != nullptr) {
    // Disk events tell exactly what G3 holds; every block it holds verifies.
    const std::set<std::uint64_t> on_disk = kvtier::testing::held_by_tier(sink_->events(), StorageTier::Disk);
    std::set<std::uint64_t> held;
    for (const g1::TieredBlock& block : disk_->resident_blocks()) held.insert(block.hash.value());
    EXPECT_EQ(on_disk, held);
    expect_disk_blocks_verify();
    const tiers::LowerTierStats io = disk_->stats();
    EXPECT_GT(engine_->lower_usage().promoted, 0U);  // swap-ins came up from G3
    EXPECT_GT(io.write_failures + io.read_failures, 0U);
    EXPECT_EQ(io.checksum_failures, 0U);  // faults are I/O results: nothing on disk was damaged
    RecordProperty("g3_promoted_blocks", static_cast<int>(engine_->lower_usage().promoted));
  }
#endif

  // The run exercised what it claims to.
  EXPECT_GT(verified_, 0U);
  EXPECT_GT(swapped_in_, 0U);
  EXPECT_GT(cancelled_, 0U);
  EXPECT_GT(stats.tier.failed_transfers, 0U);
  if (GetParam().staging_pages > 0) {
    EXPECT_GT(engine_->staged_transfers(), 0U);
  }
  RecordProperty("verified_reused_blocks", static_cast<int>(verified_));
  RecordProperty("swapped_in_blocks", static_cast<int>(swapped_in_));
}

INSTANTIATE_TEST_SUITE_P(
    Backends, OffloadStress,
    ::testing::Values(StressParams{g1::G1Backend::Kvbm, g1::EvictionBackend::Lineage, 24, 40, 3, false},
                      StressParams{g1::G1Backend::Kvbm, g1::EvictionBackend::Lru, 24, 40, 1, true},
                      StressParams{g1::G1Backend::Kvbm, g1::EvictionBackend::MultiLru, 20, 200, 16, false},
                      StressParams{g1::G1Backend::Kvbm, g1::EvictionBackend::Lineage, 16, 8, 2, true},
                      StressParams{g1::G1Backend::Native, g1::EvictionBackend::Lineage, 24, 40, 3, false},
                      StressParams{g1::G1Backend::Native, g1::EvictionBackend::Lineage, 16, 8, 1, true},
                      StressParams{g1::G1Backend::Kvbm, g1::EvictionBackend::Lineage, 24, 40, 8, false, 3},
                      StressParams{g1::G1Backend::Native, g1::EvictionBackend::Lineage, 24, 40, 5, true, 2},
                      StressParams{g1::G1Backend::Kvbm, g1::EvictionBackend::Lineage, 16, 8, 3, false, 0, 96},
                      StressParams{g1::G1Backend::Kvbm, g1::EvictionBackend::Lru, 16, 8, 2, true, 0, 24},
                      StressParams{g1::G1Backend::Native, g1::EvictionBackend::Lineage, 16, 8, 3, true, 0, 96},
                      StressParams{g1::G1Backend::Native, g1::EvictionBackend::Lineage, 24, 12, 1, false, 0, 24}),
    stress_name);

}  // namespace
}  // namespace kvtier::offload
