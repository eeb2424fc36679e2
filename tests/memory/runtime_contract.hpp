#pragma once
// One contract for every Runtime (DESIGN.md rule 3): written once, instantiated
// per runtime. A traits type provides `static std::unique_ptr<Runtime> make()`
// and `static const char* unavailable()` (nullptr when the runtime can run here).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/page_pattern.hpp"
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

REGISTER_TYPED_TEST_SUITE_P(RuntimeContract, AllocatesDistinctBuffersOfTheRequestedSize, WorkOnOneStreamRunsInOrder,
                            AllocationsAreZeroFilled, BatchedDeviceToDeviceCopiesSmallAndLarge,
                            PagesMoveBetweenLayoutsAndTiersByTheCopyPlan, CopyPlanCoalescesRunsAndRefusesMismatches,
                            GatherMovesScatteredPagesThroughADeviceRingAndBack, APriorityStreamOrdersItsWorkAsAnyStream,
                            CrossStreamWaitOrdersWorkAfterTheRecordedEvent, BatchedCopiesScatterAndGatherPages,
                            EventsCompleteAfterTheWorkBeforeThem, FillWritesTheByteValue,
                            InvalidCopyIsRejectedBeforeAnythingRuns, ImpossibleAllocationThrowsATypedError,
                            KvPoolFillAndVerifyBothLayouts, KvPoolPatternSpansSeveralStagingBatches,
                            KvPoolRejectsBadArgumentsWithoutWriting, ABorrowedStreamRunsWorkAndLeavesItsOwnerAlive);

}  // namespace kvtier::memory::testing
