#include <gtest/gtest.h>

#include "kvtier/offload/processor_sharing_link.hpp"

namespace kvtier::offload {
namespace {

constexpr double kGbps1 = 1e6;  // 1 GB/s in bytes per ms
constexpr double kMB = 1e6;

// P20 (a)
TEST(ProcessorSharingLink, OneTransferFinishesAtBytesOverBandwidth) {
  ProcessorSharingLink link(kGbps1);
  link.start(1, 0.0, kMB);
  EXPECT_DOUBLE_EQ(*link.earliest_finish(), 1.0);
  EXPECT_TRUE(link.advance_to(0.5).empty());
  EXPECT_EQ(link.advance_to(1.0), std::vector<std::uint64_t>{1});
  EXPECT_TRUE(link.idle());
}

// P20 (b)
TEST(ProcessorSharingLink, TwoTransfersShareTheLink) {
  ProcessorSharingLink link(kGbps1);
  link.start(1, 0.0, kMB);
  link.start(2, 0.0, kMB);
  EXPECT_DOUBLE_EQ(*link.earliest_finish(), 2.0);
  EXPECT_TRUE(link.advance_to(1.99).empty());
  EXPECT_EQ(link.advance_to(2.0), (std::vector<std::uint64_t>{1, 2}));
}

// P20 (c)
TEST(ProcessorSharingLink, ALateArrivalSharesOnlyFromItsStart) {
  ProcessorSharingLink link(kGbps1);
  link.start(1, 0.0, kMB);
  EXPECT_TRUE(link.advance_to(0.5).empty());
  link.start(2, 0.5, kMB);
  EXPECT_DOUBLE_EQ(*link.deadline(1), 1.5);
  EXPECT_DOUBLE_EQ(*link.deadline(2), 2.0);
  EXPECT_EQ(link.advance_to(1.5), std::vector<std::uint64_t>{1});
  EXPECT_EQ(link.advance_to(2.0), std::vector<std::uint64_t>{2});
}

TEST(ProcessorSharingLink, TimeNeverGoesBackAndRemovedTransfersAreForgotten) {
  ProcessorSharingLink link(kGbps1);
  link.start(1, 1.0, kMB);
  EXPECT_TRUE(link.advance_to(0.5).empty());  // earlier than the last update: no-op
  EXPECT_DOUBLE_EQ(*link.earliest_finish(), 2.0);
  link.remove(1);
  EXPECT_FALSE(link.earliest_finish().has_value());
}

TEST(ProcessorSharingLink, UnknownBandwidthIsInstantaneous) {
  ProcessorSharingLink link;
  link.start(7, 3.0, kMB);
  EXPECT_DOUBLE_EQ(*link.earliest_finish(), 3.0);
  EXPECT_EQ(link.advance_to(3.0), std::vector<std::uint64_t>{7});
}

}  // namespace
}  // namespace kvtier::offload
