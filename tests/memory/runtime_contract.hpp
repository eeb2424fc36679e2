#pragma once
// One contract for every Runtime (DESIGN.md rule 3): written once, instantiated
// per runtime. A traits type provides `static std::unique_ptr<Runtime> make()`
// and `static const char* unavailable()` (nullptr when the runtime can run here).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/page_pattern.hpp"
#include "kvtier/kernels/reference/paged_attention.hpp"
#include "kvtier/kernels/reference/write_kv.hpp"
#include "kvtier/memory/block_table_builder.hpp"
#include "kvtier/memory/kv_pool.hpp"
#include "kvtier/memory/page_copy_plan.hpp"
#include "kvtier/memory/runtime.hpp"

namespace kvtier::memory::testing {

inline void fill_bytes(PinnedBuffer& buffer, std::uint64_t identity) {
  fill_page_pattern(identity, 0, std::span<std::byte>(buffer.bytes_data(), buffer.size()));
}
inline bool holds_pattern(const PinnedBuffer& buffer, std::uint64_t identity) {
  return matches_page_pattern(identity, 0, std::span<const std::byte>(buffer.bytes_data(), buffer.size()));
}

/// Fills K and V ([tokens, kv_heads, head_dim], `floats` in all) with small
/// integers, exact in every dtype, varied by `layer`; writes them through
/// `slots` into the reference slab `expected` now and into `pool` on `stream`.
inline void write_small_kv(Stream& stream, KvPool& pool, std::vector<std::byte>& expected, std::uint32_t layer,
                           float* k, float* v, std::size_t floats, const std::int64_t* slots) {
  for (std::size_t i = 0; i < floats; ++i) {
    k[i] = static_cast<float>(static_cast<int>((i * 7 + layer * 3) % 15) - 7);
    v[i] = static_cast<float>(static_cast<int>((i * 5 + layer) % 13) - 6);
  }
  const KvGeometry& g = pool.layout().geometry();
  const auto tokens = static_cast<std::uint32_t>(floats / (std::size_t{g.kv_heads} * g.head_dim));
  kernels::reference::write_kv(expected.data(), pool.layout(), layer, k, v, tokens, slots);
  stream.write_kv_async(KvWrite{.slab = pool.slab(),
                                .layout = &pool.layout(),
                                .layer = layer,
                                .key = k,
                                .value = v,
                                .tokens = tokens,
                                .slots = slots});
}

template <class Traits>
class RuntimeContract : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* reason = Traits::unavailable()) GTEST_SKIP() << reason;
    runtime_ = Traits::make();
  }
  Runtime& runtime() { return *runtime_; }
  std::unique_ptr<Runtime> runtime_;
};

TYPED_TEST_SUITE_P(RuntimeContract);

TYPED_TEST_P(RuntimeContract, AllocatesDistinctBuffersOfTheRequestedSize) {
  DeviceBuffer a = this->runtime().allocate_device(4096);
  DeviceBuffer b = this->runtime().allocate_device(4096);
  PinnedBuffer p = this->runtime().allocate_pinned(100);
  ASSERT_TRUE(a && b && p);
  EXPECT_NE(a.data(), b.data());
  EXPECT_EQ(a.size(), 4096U);
  EXPECT_EQ(p.size(), 100U);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.data()) % 256, 0U);
  DeviceBuffer moved = std::move(a);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): the moved-from owner is empty
  EXPECT_TRUE(moved);
}

TYPED_TEST_P(RuntimeContract, WorkOnOneStreamRunsInOrder) {
  constexpr std::size_t kBytes = 8 << 20;
  PinnedBuffer first = this->runtime().allocate_pinned(kBytes);
  PinnedBuffer second = this->runtime().allocate_pinned(kBytes);
  PinnedBuffer out_first = this->runtime().allocate_pinned(kBytes);
  PinnedBuffer out_second = this->runtime().allocate_pinned(kBytes);
  DeviceBuffer device = this->runtime().allocate_device(kBytes);
  fill_bytes(first, 1);
  fill_bytes(second, 2);
  Stream stream = this->runtime().create_stream();
  stream.copy_async({first.data(), device.data(), kBytes});
  stream.copy_async({device.data(), out_first.data(), kBytes});
  stream.copy_async({second.data(), device.data(), kBytes});
  stream.copy_async({device.data(), out_second.data(), kBytes});
  stream.synchronize();
  EXPECT_TRUE(holds_pattern(out_first, 1));
  EXPECT_TRUE(holds_pattern(out_second, 2));
}

TYPED_TEST_P(RuntimeContract, CrossStreamWaitOrdersWorkAfterTheRecordedEvent) {
  constexpr std::size_t kBytes = 32 << 20;
  PinnedBuffer source = this->runtime().allocate_pinned(kBytes);
  PinnedBuffer target = this->runtime().allocate_pinned(kBytes);
  DeviceBuffer device = this->runtime().allocate_device(kBytes);
  fill_bytes(source, 11);
  Stream producer = this->runtime().create_stream();
  Stream consumer = this->runtime().create_stream();
  Event written = this->runtime().create_event();
  for (int round = 0; round < 3; ++round) {
    producer.fill_async(device.data(), 0, kBytes);
    producer.copy_async({source.data(), device.data(), kBytes});
    producer.record(written);
    consumer.wait(written);
    consumer.copy_async({device.data(), target.data(), kBytes});
    consumer.synchronize();
    ASSERT_TRUE(holds_pattern(target, 11)) << "round " << round;
    std::memset(target.data(), 0, kBytes);
  }
  producer.synchronize();
}

TYPED_TEST_P(RuntimeContract, BatchedCopiesScatterAndGatherPages) {
  constexpr std::size_t kPage = 4096;
  constexpr std::size_t kPages = 64;
  PinnedBuffer staging = this->runtime().allocate_pinned(kPage * kPages);
  PinnedBuffer back = this->runtime().allocate_pinned(kPage * kPages);
  DeviceBuffer slab = this->runtime().allocate_device(kPage * kPages);
  for (std::size_t i = 0; i < kPages; ++i) {
    fill_page_pattern(100 + i, 0, std::span<std::byte>(staging.bytes_data() + i * kPage, kPage));
  }
  // Staged page i goes to device page (i * 37) % 64, a permutation.
  std::vector<CopyDescriptor> scatter;
  std::vector<CopyDescriptor> gather;
  for (std::size_t i = 0; i < kPages; ++i) {
    const std::size_t device_page = (i * 37) % kPages;
    scatter.push_back({staging.bytes_data() + i * kPage, slab.bytes_data() + device_page * kPage, kPage});
    gather.push_back({slab.bytes_data() + device_page * kPage, back.bytes_data() + (kPages - 1 - i) * kPage, kPage});
  }
  Stream stream = this->runtime().create_stream();
  stream.copy_async(scatter);
  stream.copy_async(gather);
  stream.synchronize();
  for (std::size_t i = 0; i < kPages; ++i) {
    EXPECT_TRUE(matches_page_pattern(100 + i, 0,
                                     std::span<const std::byte>(back.bytes_data() + (kPages - 1 - i) * kPage, kPage)))
        << "page " << i;
  }
}

TYPED_TEST_P(RuntimeContract, AllocationsAreZeroFilled) {
  // One contract on every runtime (issue #10): a never-written page is zeros.
  constexpr std::size_t kBytes = 1 << 20;
  DeviceBuffer device = this->runtime().allocate_device(kBytes);
  PinnedBuffer pinned = this->runtime().allocate_pinned(kBytes);
  PinnedBuffer back = this->runtime().allocate_pinned(kBytes);
  std::memset(back.data(), 0xAB, kBytes);
  Stream stream = this->runtime().create_stream();
  const CopyDescriptor copy{device.bytes_data(), back.bytes_data(), kBytes};
  stream.copy_async(std::span<const CopyDescriptor>(&copy, 1));
  stream.synchronize();
  const auto zero = [](const PinnedBuffer& b) {
    return std::all_of(b.bytes_data(), b.bytes_data() + b.size(), [](std::byte x) { return x == std::byte{0}; });
  };
  EXPECT_TRUE(zero(back));
  EXPECT_TRUE(zero(pinned));
}

TYPED_TEST_P(RuntimeContract, BatchedDeviceToDeviceCopiesSmallAndLarge) {
  // Small and large chunks in one batch, device to device: the batched path
  // must choose its copy flags per batch and still move every byte.
  const std::vector<std::size_t> sizes{4096, 4096, 64 << 10, 256 << 10, 1 << 20, 3 << 20};
  std::size_t total = 0;
  for (std::size_t bytes : sizes) total += bytes;
  PinnedBuffer staging = this->runtime().allocate_pinned(total);
  PinnedBuffer back = this->runtime().allocate_pinned(total);
  DeviceBuffer from = this->runtime().allocate_device(total);
  DeviceBuffer to = this->runtime().allocate_device(total);
  fill_bytes(staging, 77);
  Stream stream = this->runtime().create_stream();
  const CopyDescriptor up{staging.bytes_data(), from.bytes_data(), total};
  stream.copy_async(std::span<const CopyDescriptor>(&up, 1));
  for (const bool all_small : {true, false}) {
    std::vector<CopyDescriptor> copies;
    std::size_t offset = 0;
    for (std::size_t bytes : sizes) {
      if (!all_small || bytes <= (64 << 10))
        copies.push_back({from.bytes_data() + offset, to.bytes_data() + offset, bytes});
      offset += bytes;
    }
    stream.copy_async(copies);
  }
  const CopyDescriptor down{to.bytes_data(), back.bytes_data(), total};
  stream.copy_async(std::span<const CopyDescriptor>(&down, 1));
  stream.synchronize();
  EXPECT_TRUE(holds_pattern(back, 77));
}

TYPED_TEST_P(RuntimeContract, PagesMoveBetweenLayoutsAndTiersByTheCopyPlan) {
  // G1 layer-major on the device -> G2 page-major in pinned memory -> back to
  // other G1 pages: every page keeps its bytes (the offload round trip).
  const KvGeometry geometry{.layers = 3, .kv_heads = 2, .head_dim = 16, .dtype = KvDtype::Bf16, .tokens_per_block = 4};
  KvPool g1(this->runtime(), KvLayout(geometry, PageLayout::LayerMajor, 8));
  KvPool g2(this->runtime(), KvLayout(geometry, PageLayout::PageMajor, 6), PoolMemory::PinnedHost);
  EXPECT_EQ(g2.memory(), PoolMemory::PinnedHost);
  const std::vector<PageId> sources{PageId(1), PageId(2), PageId(5)};
  const std::vector<PageId> staged{PageId(3), PageId(4), PageId(0)};
  const std::vector<PageId> back{PageId(6), PageId(7), PageId(0)};
  const std::vector<std::uint64_t> identities{11, 12, 15};
  g1.fill_pattern(sources, identities);
  Stream stream = this->runtime().create_stream();
  const auto out = page_copy_plan(g1, sources, g2, staged);
  // Layer-major chunks land in page-major pages: one copy per layer per page
  // (consecutive source pages of a layer are adjacent, their targets are not).
  EXPECT_EQ(out.size(), 3U * 3U);
  stream.copy_async(out);
  stream.synchronize();
  EXPECT_TRUE(g2.find_pattern_mismatches(staged, identities).empty());
  stream.copy_async(page_copy_plan(g2, staged, g1, back));
  stream.synchronize();
  EXPECT_TRUE(g1.find_pattern_mismatches(back, identities).empty());
}

TYPED_TEST_P(RuntimeContract, GatherMovesScatteredPagesThroughADeviceRingAndBack) {
  // The offload engine's small-page path: scattered G1 pages gathered into a
  // contiguous device ring (the copy kernel on CUDA), the ring copied to G2
  // in one run; then back through the ring to other G1 pages.
  const KvGeometry geometry{.layers = 2, .kv_heads = 2, .head_dim = 16, .dtype = KvDtype::Bf16, .tokens_per_block = 4};
  KvPool g1(this->runtime(), KvLayout(geometry, PageLayout::LayerMajor, 10));
  KvPool ring(this->runtime(), KvLayout(geometry, PageLayout::PageMajor, 4));
  KvPool g2(this->runtime(), KvLayout(geometry, PageLayout::PageMajor, 4), PoolMemory::PinnedHost);
  const std::vector<PageId> sources{PageId(7), PageId(1), PageId(4), PageId(9)};
  const std::vector<PageId> slots{PageId(0), PageId(1), PageId(2), PageId(3)};
  const std::vector<PageId> back{PageId(0), PageId(2), PageId(5), PageId(8)};
  const std::vector<std::uint64_t> identities{70, 10, 40, 90};
  g1.fill_pattern(sources, identities);
  Stream stream = this->runtime().create_stream();
  stream.gather_async(page_copy_plan(g1, sources, ring, slots));
  const auto out = page_copy_plan(ring, slots, g2, slots);
  EXPECT_EQ(out.size(), 1U);  // the ring moves in one copy
  stream.copy_async(out);
  stream.synchronize();
  EXPECT_TRUE(g2.find_pattern_mismatches(slots, identities).empty());
  const std::vector<std::uint64_t> nothing(4, 0);
  ring.fill_pattern(slots, nothing);  // the ring is reused: stale bytes must not matter
  stream.copy_async(page_copy_plan(g2, slots, ring, slots));
  stream.gather_async(page_copy_plan(ring, slots, g1, back));
  stream.synchronize();
  EXPECT_TRUE(g1.find_pattern_mismatches(back, identities).empty());
  const std::vector<CopyDescriptor> broken{{nullptr, g1.slab(), 16}};
  EXPECT_THROW(stream.gather_async(broken), ContractError);
}

TYPED_TEST_P(RuntimeContract, APriorityStreamOrdersItsWorkAsAnyStream) {
  PinnedBuffer source = this->runtime().allocate_pinned(4096);
  PinnedBuffer middle = this->runtime().allocate_pinned(4096);
  PinnedBuffer target = this->runtime().allocate_pinned(4096);
  fill_bytes(source, 33);
  Stream priority = this->runtime().create_priority_stream();
  Stream normal = this->runtime().create_stream();
  Event copied = this->runtime().create_event();
  priority.copy_async({source.data(), middle.data(), 4096});
  priority.record(copied);
  normal.wait(copied);
  normal.copy_async({middle.data(), target.data(), 4096});
  normal.synchronize();
  EXPECT_TRUE(holds_pattern(target, 33));
}

TYPED_TEST_P(RuntimeContract, CopyPlanCoalescesRunsAndRefusesMismatches) {
  const KvGeometry geometry{.layers = 2, .kv_heads = 1, .head_dim = 8, .dtype = KvDtype::Fp32, .tokens_per_block = 2};
  KvPool a(this->runtime(), KvLayout(geometry, PageLayout::PageMajor, 8));
  KvPool b(this->runtime(), KvLayout(geometry, PageLayout::PageMajor, 8), PoolMemory::PinnedHost);
  const std::vector<PageId> run{PageId(2), PageId(3), PageId(4)};
  const std::vector<PageId> target{PageId(5), PageId(6), PageId(7)};
  const auto plan = page_copy_plan(a, run, b, target);
  ASSERT_EQ(plan.size(), 1U);  // three contiguous pages to three contiguous pages
  EXPECT_EQ(plan[0].bytes, 3 * a.layout().page_bytes());
  const std::vector<PageId> split{PageId(7), PageId(0), PageId(1)};
  EXPECT_EQ(page_copy_plan(a, run, b, split).size(), 2U);  // 2 -> 7 alone; 3, 4 -> 0, 1 one copy
  KvPool other(
      this->runtime(),
      KvLayout(KvGeometry{.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype = KvDtype::Fp32, .tokens_per_block = 2},
               PageLayout::PageMajor, 4));
  EXPECT_THROW(page_copy_plan(a, run, other, std::vector<PageId>{PageId(0), PageId(1), PageId(2)}), ContractError);
  EXPECT_THROW(page_copy_plan(a, run, b, std::vector<PageId>{PageId(0)}), ContractError);
  EXPECT_THROW(page_copy_plan(a, std::vector<PageId>{PageId(8)}, b, std::vector<PageId>{PageId(0)}), ContractError);
}

TYPED_TEST_P(RuntimeContract, EventsCompleteAfterTheWorkBeforeThem) {
  Event never_recorded = this->runtime().create_event();
  EXPECT_EQ(never_recorded.status(), EventStatus::Complete);
  EXPECT_NO_THROW(never_recorded.synchronize());

  constexpr std::size_t kBytes = 16 << 20;
  PinnedBuffer source = this->runtime().allocate_pinned(kBytes);
  PinnedBuffer target = this->runtime().allocate_pinned(kBytes);
  fill_bytes(source, 5);
  Stream stream = this->runtime().create_stream();
  Event done = this->runtime().create_event();
  stream.copy_async({source.data(), target.data(), kBytes});
  stream.record(done);
  done.synchronize();
  EXPECT_EQ(done.status(), EventStatus::Complete);
  EXPECT_TRUE(done.ready());
  EXPECT_TRUE(holds_pattern(target, 5));  // the event covers the copy
  stream.synchronize();
}

TYPED_TEST_P(RuntimeContract, FillWritesTheByteValue) {
  PinnedBuffer out = this->runtime().allocate_pinned(1000);
  DeviceBuffer device = this->runtime().allocate_device(1000);
  Stream stream = this->runtime().create_stream();
  stream.fill_async(device.data(), 0xAB, 1000);
  stream.copy_async({device.data(), out.data(), 1000});
  stream.synchronize();
  EXPECT_TRUE(std::all_of(out.bytes_data(), out.bytes_data() + 1000, [](std::byte b) { return b == std::byte{0xAB}; }));
}

TYPED_TEST_P(RuntimeContract, InvalidCopyIsRejectedBeforeAnythingRuns) {
  PinnedBuffer source = this->runtime().allocate_pinned(64);
  PinnedBuffer target = this->runtime().allocate_pinned(64);
  fill_bytes(source, 3);
  Stream stream = this->runtime().create_stream();
  const std::vector<CopyDescriptor> batch{{source.data(), target.data(), 64}, {nullptr, target.data(), 8}};
  EXPECT_THROW(stream.copy_async(batch), ContractError);
  stream.synchronize();
  EXPECT_FALSE(holds_pattern(target, 3));  // the valid half did not run either
  stream.copy_async(batch[0]);             // and the stream is still usable
  stream.synchronize();
  EXPECT_TRUE(holds_pattern(target, 3));
}

TYPED_TEST_P(RuntimeContract, ImpossibleAllocationThrowsATypedError) {
  const std::size_t impossible = std::size_t{1} << 60;
  EXPECT_THROW((void)this->runtime().allocate_device(impossible), kvtier::Error);
  EXPECT_THROW((void)this->runtime().allocate_pinned(impossible), kvtier::Error);
  EXPECT_TRUE(this->runtime().allocate_device(64));  // nothing was poisoned
}

TYPED_TEST_P(RuntimeContract, KvPoolFillAndVerifyBothLayouts) {
  const KvGeometry geometry{.layers = 4, .kv_heads = 2, .head_dim = 64, .dtype = KvDtype::Bf16, .tokens_per_block = 16};
  for (PageLayout kind : {PageLayout::PageMajor, PageLayout::LayerMajor}) {
    KvPool pool(this->runtime(), KvLayout(geometry, kind, 32));
    const std::vector<PageId> pages{PageId(3), PageId(0), PageId(31), PageId(17)};
    const std::vector<std::uint64_t> identities{7, 8, 9, 10};
    pool.fill_pattern(pages, identities);
    EXPECT_TRUE(pool.find_pattern_mismatches(pages, identities).empty()) << page_layout_name(kind);
    // Wrong identity, and a page never written, are both mismatches.
    const std::vector<PageId> probe{PageId(3), PageId(5), PageId(17)};
    const std::vector<std::uint64_t> expected{7, 1, 11};
    EXPECT_EQ(pool.find_pattern_mismatches(probe, expected), (std::vector<PageId>{PageId(5), PageId(17)}));
    // Overwriting one page leaves its neighbours intact.
    const std::vector<PageId> one{PageId(0)};
    const std::vector<std::uint64_t> other{99};
    pool.fill_pattern(one, other);
    EXPECT_TRUE(pool.find_pattern_mismatches(std::vector<PageId>{PageId(0), PageId(3), PageId(31)},
                                             std::vector<std::uint64_t>{99, 7, 9})
                    .empty());
  }
}

TYPED_TEST_P(RuntimeContract, KvPoolPatternSpansSeveralStagingBatches) {
  // 2 MiB pages: the 16 MiB staging buffer holds 8, so 20 pages take 3 batches.
  const KvGeometry geometry{
      .layers = 8, .kv_heads = 8, .head_dim = 128, .dtype = KvDtype::Bf16, .tokens_per_block = 64};
  KvPool pool(this->runtime(), KvLayout(geometry, PageLayout::LayerMajor, 20));
  ASSERT_EQ(pool.layout().page_bytes(), 2U << 20);
  std::vector<PageId> pages;
  std::vector<std::uint64_t> identities;
  for (std::uint32_t i = 0; i < 20; ++i) {
    pages.emplace_back(19 - i);
    identities.push_back(1000 + i);
  }
  pool.fill_pattern(pages, identities);
  EXPECT_TRUE(pool.find_pattern_mismatches(pages, identities).empty());
}

TYPED_TEST_P(RuntimeContract, KvPoolRejectsBadArgumentsWithoutWriting) {
  const KvGeometry geometry{.layers = 2, .kv_heads = 1, .head_dim = 8, .dtype = KvDtype::Fp32, .tokens_per_block = 4};
  KvPool pool(this->runtime(), KvLayout(geometry, PageLayout::PageMajor, 4));
  EXPECT_THROW(pool.chunk_address(PageId(4), 0), ContractError);
  EXPECT_THROW(pool.chunk_address(PageId(0), 1), ContractError);
  EXPECT_EQ(pool.chunk_address(PageId(2), 0), pool.slab() + 2 * pool.layout().page_bytes());
  const std::vector<PageId> pages{PageId(0), PageId(9)};
  const std::vector<std::uint64_t> identities{1, 2};
  EXPECT_THROW(pool.fill_pattern(pages, identities), ContractError);
  EXPECT_THROW(pool.fill_pattern(std::vector<PageId>{PageId(0)}, identities), ContractError);
  EXPECT_EQ(pool.find_pattern_mismatches(std::vector<PageId>{PageId(0)}, std::vector<std::uint64_t>{1}),
            std::vector<PageId>{PageId(0)});  // page 0 was not written
  EXPECT_THROW(KvPool(this->runtime(), KvLayout(geometry, PageLayout::PageMajor, 0)), ConfigError);
}

TYPED_TEST_P(RuntimeContract, WriteKvThroughSlotsMatchesTheReference) {
  for (const KvDtype dtype : {KvDtype::Bf16, KvDtype::Fp8, KvDtype::Fp32}) {
    for (const PageLayout kind : {PageLayout::PageMajor, PageLayout::LayerMajor}) {
      const KvGeometry geometry{.layers = 3, .kv_heads = 2, .head_dim = 16, .dtype = dtype, .tokens_per_block = 4};
      const KvLayout layout(geometry, kind, 8);
      KvPool pool(this->runtime(), layout);
      constexpr std::uint32_t kTokens = 6;
      const std::size_t row = 2 * 16;
      PinnedBuffer key = this->runtime().allocate_pinned(kTokens * row * sizeof(float));
      PinnedBuffer value = this->runtime().allocate_pinned(kTokens * row * sizeof(float));
      PinnedBuffer slots = this->runtime().allocate_pinned(kTokens * sizeof(std::int64_t));
      const std::int64_t slot_list[kTokens] = {5, 30, -1, 6, 0, 31};  // pages 1, 7, padding, 1, 0, 7
      std::memcpy(slots.data(), slot_list, sizeof(slot_list));
      std::vector<std::byte> expected(layout.slab_bytes());
      Stream stream = this->runtime().create_stream();
      for (std::uint32_t layer = 0; layer < geometry.layers; ++layer) {
        auto* k = static_cast<float*>(key.data());
        auto* v = static_cast<float*>(value.data());
        stream.synchronize();  // the previous layer's write read these buffers
        write_small_kv(stream, pool, expected, layer, k, v, kTokens * row, static_cast<std::int64_t*>(slots.data()));
      }
      stream.synchronize();
      const std::vector<PageId> pages{PageId(0), PageId(1), PageId(2), PageId(7)};
      pool.read_pages(pages, [&](std::size_t i, std::span<const std::byte> bytes) {
        std::vector<std::byte> want;
        for (std::uint32_t chunk = 0; chunk < layout.chunks_per_page(); ++chunk) {
          const std::byte* at = expected.data() + layout.chunk_offset(pages[i].value(), chunk);
          want.insert(want.end(), at, at + layout.chunk_bytes());
        }
        EXPECT_TRUE(std::equal(want.begin(), want.end(), bytes.begin(), bytes.end()))
            << "page " << pages[i].value() << " " << page_layout_name(kind) << " dtype " << static_cast<int>(dtype);
      });
    }
  }
}

TYPED_TEST_P(RuntimeContract, WriteKvRefusesABadWriteBeforeEnqueuing) {
  const KvGeometry geometry{.layers = 2, .kv_heads = 1, .head_dim = 8, .dtype = KvDtype::Fp32, .tokens_per_block = 4};
  KvPool pool(this->runtime(), KvLayout(geometry, PageLayout::PageMajor, 2));
  PinnedBuffer floats = this->runtime().allocate_pinned(8 * sizeof(float));
  PinnedBuffer slots = this->runtime().allocate_pinned(sizeof(std::int64_t));
  auto* f = static_cast<float*>(floats.data());
  auto* s = static_cast<std::int64_t*>(slots.data());
  Stream stream = this->runtime().create_stream();
  KvWrite write{
      .slab = pool.slab(), .layout = &pool.layout(), .layer = 2, .key = f, .value = f, .tokens = 1, .slots = s};
  EXPECT_THROW(stream.write_kv_async(write), ContractError);  // layer outside the layout
  write.layer = 0;
  write.key = nullptr;
  EXPECT_THROW(stream.write_kv_async(write), ContractError);
  write.key = f;
  write.tokens = 0;
  stream.write_kv_async(write);  // nothing to write is not an error
  stream.synchronize();
}

TYPED_TEST_P(RuntimeContract, BlockTableBuilderPacksPaddedRowsWithOneCopyPerStep) {
  BlockTableBuilder builder(this->runtime(), 4, 3);
  Stream stream = this->runtime().create_stream();
  PinnedBuffer readback = this->runtime().allocate_pinned(4 * 3 * sizeof(std::int32_t));
  PinnedBuffer lengths = this->runtime().allocate_pinned(4 * sizeof(std::int32_t));
  const std::vector<PageId> first{PageId(7), PageId(2)};
  const std::vector<PageId> second{PageId(9)};
  const std::vector<PageId> third{PageId(1), PageId(4), PageId(5)};
  for (int step = 0; step < 4; ++step) {  // reuses both staging buffers
    const std::vector<std::span<const PageId>> rows = step % 2 == 1
                                                          ? std::vector<std::span<const PageId>>{first, second}
                                                          : std::vector<std::span<const PageId>>{first, second, third};
    const std::vector<std::int32_t> seq_lens{5 + step, 3, 9};
    const DeviceBlockTables built = builder.build(rows, stream, std::span(seq_lens).first(rows.size()));
    ASSERT_EQ(built.rows, rows.size());
    ASSERT_EQ(built.columns, step % 2 == 1 ? 2U : 3U);  // as wide as the longest row
    stream.copy_async({built.tables, readback.data(), built.rows * built.columns * sizeof(std::int32_t)});
    stream.copy_async({built.seq_lens, lengths.data(), built.rows * sizeof(std::int32_t)});
    stream.synchronize();
    const auto* got = static_cast<const std::int32_t*>(readback.data());
    if (step % 2 == 1) {
      EXPECT_EQ(std::vector<std::int32_t>(got, got + 4), (std::vector<std::int32_t>{7, 2, 9, -1}));
    } else {
      EXPECT_EQ(std::vector<std::int32_t>(got, got + 9), (std::vector<std::int32_t>{7, 2, -1, 9, -1, -1, 1, 4, 5}));
    }
    const auto* lens = static_cast<const std::int32_t*>(lengths.data());
    EXPECT_EQ(std::vector<std::int32_t>(lens, lens + rows.size()),
              std::vector(seq_lens.begin(), seq_lens.begin() + static_cast<std::ptrdiff_t>(rows.size())));
  }
  // A fixed width, and no lengths.
  const DeviceBlockTables fixed = builder.build(std::vector<std::span<const PageId>>{second}, stream, {}, 3);
  EXPECT_EQ(fixed.columns, 3U);
  EXPECT_EQ(fixed.seq_lens, nullptr);
  stream.copy_async({fixed.tables, readback.data(), 3 * sizeof(std::int32_t)});
  stream.synchronize();
  const auto* got = static_cast<const std::int32_t*>(readback.data());
  EXPECT_EQ(std::vector<std::int32_t>(got, got + 3), (std::vector<std::int32_t>{9, -1, -1}));

  const std::vector<PageId> too_long{PageId(1), PageId(2), PageId(3), PageId(4)};
  EXPECT_THROW(builder.build(std::vector<std::span<const PageId>>{too_long}, stream), ContractError);
  EXPECT_THROW(builder.build(std::vector<std::span<const PageId>>{third}, stream, {}, 2), ContractError);
  const std::vector<std::span<const PageId>> too_many(5, std::span<const PageId>(first));
  EXPECT_THROW(builder.build(too_many, stream), ContractError);
  const std::vector<std::int32_t> one_length{4};
  EXPECT_THROW(builder.build(std::vector<std::span<const PageId>>{first, second}, stream, one_length), ContractError);
}

/// K/V written through slots into scattered pages, then one decode step of
/// paged attention on the same stream through tables the builder made: the
/// result is the CPU reference's over the same bytes.
TYPED_TEST_P(RuntimeContract, PagedAttentionThroughBuiltTablesMatchesTheReference) {
  for (const PageLayout kind : {PageLayout::PageMajor, PageLayout::LayerMajor}) {
    const KvGeometry geometry{
        .layers = 2, .kv_heads = 2, .head_dim = 16, .dtype = KvDtype::Bf16, .tokens_per_block = 4};
    const KvLayout layout(geometry, kind, 8);
    KvPool pool(this->runtime(), layout);
    Stream stream = this->runtime().create_stream();
    const std::size_t row = std::size_t{geometry.kv_heads} * geometry.head_dim;
    constexpr std::uint32_t kTokens = 32;  // every slot of the pool
    PinnedBuffer key = this->runtime().allocate_pinned(kTokens * row * sizeof(float));
    PinnedBuffer value = this->runtime().allocate_pinned(kTokens * row * sizeof(float));
    PinnedBuffer slots = this->runtime().allocate_pinned(kTokens * sizeof(std::int64_t));
    auto* k = static_cast<float*>(key.data());
    auto* v = static_cast<float*>(value.data());
    auto* slot = static_cast<std::int64_t*>(slots.data());
    for (std::uint32_t t = 0; t < kTokens; ++t) slot[t] = t;
    std::vector<std::byte> host_slab(layout.slab_bytes());
    const std::uint32_t layer = 1;
    write_small_kv(stream, pool, host_slab, layer, k, v, kTokens * row, slot);

    // Three sequences over scattered pages (a partial last block, an empty one).
    const std::vector<PageId> a{PageId(5), PageId(1), PageId(6)};
    const std::vector<PageId> b{PageId(2)};
    const std::vector<PageId> c{};
    const std::vector<std::span<const PageId>> tables{a, b, c};
    const std::vector<std::int32_t> seq_lens{10, 4, 0};
    constexpr std::uint32_t kSeqs = 3;
    constexpr std::uint32_t kQueryHeads = 4;  // GQA: two query heads per KV head
    const std::size_t floats = std::size_t{kSeqs} * kQueryHeads * geometry.head_dim;
    PinnedBuffer query_host = this->runtime().allocate_pinned(floats * sizeof(float));
    PinnedBuffer out_host = this->runtime().allocate_pinned(floats * sizeof(float));
    auto* q = static_cast<float*>(query_host.data());
    for (std::size_t i = 0; i < floats; ++i) q[i] = static_cast<float>(static_cast<int>(i % 9) - 4) / 8.0f;
    DeviceBuffer query = this->runtime().allocate_device(floats * sizeof(float));
    DeviceBuffer out = this->runtime().allocate_device(floats * sizeof(float));
    stream.copy_async({q, query.data(), floats * sizeof(float)});
    BlockTableBuilder builder(this->runtime(), 4, 8);
    const DeviceBlockTables built = builder.build(tables, stream, seq_lens);
    const AttentionDecode step{.slab = pool.slab(),
                               .layout = &pool.layout(),
                               .args = {.query = static_cast<const float*>(query.data()),
                                        .block_tables = built.tables,
                                        .seq_lens = built.seq_lens,
                                        .out = static_cast<float*>(out.data()),
                                        .seqs = built.rows,
                                        .q_heads = kQueryHeads,
                                        .max_blocks = built.columns,
                                        .layer = layer,
                                        .scale = 0.25f}};
    stream.paged_attention_async(step);
    stream.copy_async({out.data(), out_host.data(), floats * sizeof(float)});
    stream.synchronize();

    std::vector<std::int32_t> host_tables(std::size_t{kSeqs} * built.columns, -1);
    for (std::size_t s = 0; s < kSeqs; ++s) {
      for (std::size_t i = 0; i < tables[s].size(); ++i) {
        host_tables[s * built.columns + i] = static_cast<std::int32_t>(tables[s][i].value());
      }
    }
    std::vector<float> expected(floats, -1.0f);
    kernels::reference::paged_attention_decode(host_slab.data(), layout,
                                               {.query = q,
                                                .block_tables = host_tables.data(),
                                                .seq_lens = seq_lens.data(),
                                                .out = expected.data(),
                                                .seqs = kSeqs,
                                                .q_heads = kQueryHeads,
                                                .max_blocks = built.columns,
                                                .layer = layer,
                                                .scale = 0.25f});
    const auto* got = static_cast<const float*>(out_host.data());
    for (std::size_t i = 0; i < floats; ++i) {
      ASSERT_NEAR(got[i], expected[i], 1e-4f * (1.0f + std::abs(expected[i])))
          << "output " << i << " " << page_layout_name(kind);
    }
    EXPECT_EQ(got[floats - 1], 0.0f);  // the empty sequence attends to nothing: zeros
  }
}

TYPED_TEST_P(RuntimeContract, PagedAttentionRefusesABadStepBeforeEnqueuing) {
  const KvGeometry geometry{.layers = 2, .kv_heads = 2, .head_dim = 8, .dtype = KvDtype::Fp32, .tokens_per_block = 4};
  KvPool pool(this->runtime(), KvLayout(geometry, PageLayout::PageMajor, 2));
  DeviceBuffer buffer = this->runtime().allocate_device(1024);
  auto* f = static_cast<float*>(buffer.data());
  auto* i = static_cast<const std::int32_t*>(buffer.data());
  Stream stream = this->runtime().create_stream();
  AttentionDecode step{.slab = pool.slab(),
                       .layout = &pool.layout(),
                       .args = {.query = f,
                                .block_tables = i,
                                .seq_lens = i,
                                .out = f,
                                .seqs = 1,
                                .q_heads = 3,
                                .max_blocks = 1,
                                .layer = 0}};
  EXPECT_THROW(stream.paged_attention_async(step), ContractError);  // 3 query heads over 2 KV heads
  step.args.q_heads = 2;
  step.args.layer = 2;
  EXPECT_THROW(stream.paged_attention_async(step), ContractError);  // a layer outside the layout
  step.args.layer = 0;
  step.args.max_blocks = 0;
  EXPECT_THROW(stream.paged_attention_async(step), ContractError);
  step.args.max_blocks = 1;
  step.args.out = nullptr;
  EXPECT_THROW(stream.paged_attention_async(step), ContractError);
  step.args.seqs = 0;
  stream.paged_attention_async(step);  // no sequences is not an error
  stream.synchronize();
}

/// A borrowed native stream orders kvtier's work with its owner's and is
/// never destroyed by kvtier; a runtime without native streams refuses.
TYPED_TEST_P(RuntimeContract, ABorrowedStreamRunsWorkAndLeavesItsOwnerAlive) {
  Stream owner = this->runtime().create_stream();
  if (this->runtime().kind() == RuntimeKind::Host) {
    EXPECT_THROW((void)this->runtime().borrow_stream(owner.native_handle()), ContractError);
    return;
  }
  PinnedBuffer src = this->runtime().allocate_pinned(4096);
  PinnedBuffer dst = this->runtime().allocate_pinned(4096);
  DeviceBuffer device = this->runtime().allocate_device(4096);
  fill_bytes(src, 41);
  {
    Stream borrowed = this->runtime().borrow_stream(owner.native_handle());
    EXPECT_EQ(borrowed.native_handle(), owner.native_handle());
    borrowed.copy_async({src.data(), device.data(), 4096});
  }  // the view goes; the owner's stream stays
  owner.copy_async({device.data(), dst.data(), 4096});
  owner.synchronize();
  EXPECT_TRUE(holds_pattern(dst, 41));
}

REGISTER_TYPED_TEST_SUITE_P(
    RuntimeContract, WriteKvThroughSlotsMatchesTheReference, WriteKvRefusesABadWriteBeforeEnqueuing,
    AllocatesDistinctBuffersOfTheRequestedSize, WorkOnOneStreamRunsInOrder, AllocationsAreZeroFilled,
    BatchedDeviceToDeviceCopiesSmallAndLarge, PagesMoveBetweenLayoutsAndTiersByTheCopyPlan,
    CopyPlanCoalescesRunsAndRefusesMismatches, GatherMovesScatteredPagesThroughADeviceRingAndBack,
    APriorityStreamOrdersItsWorkAsAnyStream, CrossStreamWaitOrdersWorkAfterTheRecordedEvent,
    BatchedCopiesScatterAndGatherPages, EventsCompleteAfterTheWorkBeforeThem, FillWritesTheByteValue,
    InvalidCopyIsRejectedBeforeAnythingRuns, ImpossibleAllocationThrowsATypedError, KvPoolFillAndVerifyBothLayouts,
    KvPoolPatternSpansSeveralStagingBatches, KvPoolRejectsBadArgumentsWithoutWriting,
    BlockTableBuilderPacksPaddedRowsWithOneCopyPerStep, PagedAttentionThroughBuiltTablesMatchesTheReference,
    PagedAttentionRefusesABadStepBeforeEnqueuing, ABorrowedStreamRunsWorkAndLeavesItsOwnerAlive);

}  // namespace kvtier::memory::testing
