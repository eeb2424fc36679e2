#include <gtest/gtest.h>

#include "kvtier/core/errors.hpp"
#include "kvtier/core/page_pattern.hpp"
#include "kvtier/memory/host_runtime.hpp"
#include "kvtier/memory/kv_pool.hpp"

namespace kvtier::memory {
namespace {

bool holds(const PinnedBuffer& buffer, std::uint64_t identity) {
  return matches_page_pattern(identity, 0, std::span<const std::byte>(buffer.bytes_data(), buffer.size()));
}

class HostRuntimeFaults : public ::testing::Test {
 protected:
  PinnedBuffer patterned(std::uint64_t identity) {
    PinnedBuffer buffer = runtime_.allocate_pinned(4096);
    fill_page_pattern(identity, 0, std::span<std::byte>(buffer.bytes_data(), buffer.size()));
    return buffer;
  }
  HostRuntime runtime_;
};

TEST_F(HostRuntimeFaults, NthCopyFailsAsynchronouslyAndSurfacesThroughEventsAndSynchronize) {
  PinnedBuffer a = patterned(1), b = patterned(2), c = patterned(3);
  PinnedBuffer out_a = runtime_.allocate_pinned(4096), out_b = runtime_.allocate_pinned(4096),
               out_c = runtime_.allocate_pinned(4096);
  runtime_.inject_faults({.fail_copy_number = 2});
  Stream stream = runtime_.create_stream();
  Event before = runtime_.create_event();
  Event after = runtime_.create_event();
  stream.copy_async({a.data(), out_a.data(), 4096});
  stream.record(before);
  EXPECT_NO_THROW(stream.copy_async({b.data(), out_b.data(), 4096}));  // fails later, when it runs
  stream.copy_async({c.data(), out_c.data(), 4096});
  stream.record(after);
  EXPECT_NO_THROW(before.synchronize());
  EXPECT_THROW(after.synchronize(), TransferError);
  EXPECT_EQ(after.status(), EventStatus::Failed);
  try {
    stream.synchronize();
    FAIL() << "synchronize must report the failed copy";
  } catch (const TransferError& error) {
    EXPECT_NE(std::string(error.what()).find("copy #2"), std::string::npos) << error.what();
  }
  EXPECT_TRUE(holds(out_a, 1));
  EXPECT_FALSE(holds(out_b, 2));  // the failed copy wrote nothing
  EXPECT_TRUE(holds(out_c, 3));   // later work still ran
  // Acknowledged by synchronize: the stream is clean again.
  Event clean = runtime_.create_event();
  stream.copy_async({a.data(), out_b.data(), 4096});
  stream.record(clean);
  EXPECT_NO_THROW(clean.synchronize());
  EXPECT_NO_THROW(stream.synchronize());
}

TEST_F(HostRuntimeFaults, AFailedCopyFailsOnlyTheEventRecordedAfterIt) {
  PinnedBuffer a = patterned(1), b = patterned(2);
  PinnedBuffer out_a = runtime_.allocate_pinned(4096), out_b = runtime_.allocate_pinned(4096);
  runtime_.inject_faults({.fail_copy_number = 1});
  Stream stream = runtime_.create_stream();
  Event first = runtime_.create_event();
  Event second = runtime_.create_event();
  stream.copy_async({a.data(), out_a.data(), 4096});
  stream.record(first);
  stream.copy_async({b.data(), out_b.data(), 4096});
  stream.record(second);
  EXPECT_THROW(first.synchronize(), TransferError);
  EXPECT_NO_THROW(second.synchronize());  // its own copy succeeded
  EXPECT_TRUE(holds(out_b, 2));
  EXPECT_THROW(stream.synchronize(), TransferError);  // the stream still reports it once
  EXPECT_NO_THROW(stream.synchronize());
}

TEST_F(HostRuntimeFaults, FailureFlowsAcrossACrossStreamWait) {
  PinnedBuffer a = patterned(1);
  PinnedBuffer out = runtime_.allocate_pinned(4096);
  runtime_.inject_faults({.fail_copy_number = 1});
  Stream producer = runtime_.create_stream();
  Stream consumer = runtime_.create_stream();
  Event produced = runtime_.create_event();
  producer.copy_async({a.data(), out.data(), 4096});
  producer.record(produced);
  consumer.wait(produced);
  EXPECT_THROW(consumer.synchronize(), TransferError);
  EXPECT_THROW(producer.synchronize(), TransferError);
}

TEST_F(HostRuntimeFaults, NthAllocationFailsAndOthersSucceed) {
  runtime_.inject_faults({.fail_allocation_number = 2});
  EXPECT_TRUE(runtime_.allocate_device(64));
  EXPECT_THROW((void)runtime_.allocate_pinned(64), AllocationError);
  EXPECT_TRUE(runtime_.allocate_device(64));
}

TEST_F(HostRuntimeFaults, KvPoolSlabAllocationFailureLeavesNothingBehind) {
  runtime_.inject_faults({.fail_allocation_number = 1});
  const KvLayout layout(KvGeometry{}, PageLayout::PageMajor, 8);
  EXPECT_THROW(KvPool(runtime_, layout), AllocationError);
  EXPECT_NO_THROW(KvPool(runtime_, layout));
}

TEST_F(HostRuntimeFaults, KvPoolFillReportsAFailedCopyAndRecovers) {
  const KvLayout layout(KvGeometry{}, PageLayout::LayerMajor, 8);
  KvPool pool(runtime_, layout);
  const std::vector<PageId> pages{PageId(1), PageId(2)};
  const std::vector<std::uint64_t> identities{5, 6};
  runtime_.inject_faults({.fail_copy_number = 1});
  EXPECT_THROW(pool.fill_pattern(pages, identities), TransferError);
  EXPECT_EQ(pool.find_pattern_mismatches(pages, identities), pages);  // nothing was written
  pool.fill_pattern(pages, identities);
  EXPECT_TRUE(pool.find_pattern_mismatches(pages, identities).empty());
}

/// Block tables are device data read when the step runs (the CUDA kernel
/// clamps and skips): the host runtime refuses a page outside the pool by
/// failing the step, and nothing is written to the output.
TEST_F(HostRuntimeFaults, APagedAttentionStepOverAPageOutsideThePoolFailsTheStream) {
  const KvGeometry geometry{.layers = 1, .kv_heads = 1, .head_dim = 4, .dtype = KvDtype::Fp32, .tokens_per_block = 2};
  KvPool pool(runtime_, KvLayout(geometry, PageLayout::PageMajor, 2));
  std::vector<float> query(4, 1.0f), out(4, 7.0f);
  const std::vector<std::int32_t> table{1, 9};  // page 9 is outside a pool of 2
  const std::vector<std::int32_t> seq_lens{4};
  Stream stream = runtime_.create_stream();
  Event done = runtime_.create_event();
  EXPECT_NO_THROW(stream.paged_attention_async(AttentionDecode{.slab = pool.slab(),
                                                               .layout = &pool.layout(),
                                                               .args = {.query = query.data(),
                                                                        .block_tables = table.data(),
                                                                        .seq_lens = seq_lens.data(),
                                                                        .out = out.data(),
                                                                        .seqs = 1,
                                                                        .q_heads = 1,
                                                                        .max_blocks = 2}}));
  stream.record(done);
  EXPECT_THROW(done.synchronize(), TransferError);
  EXPECT_THROW(stream.synchronize(), TransferError);
  EXPECT_EQ(out, std::vector<float>(4, 7.0f));
}

}  // namespace
}  // namespace kvtier::memory
