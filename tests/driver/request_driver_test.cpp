// The request driver on both backends: the native reuse of the resident
// prefix, decode steps that stop only for capacity and report what they
// applied, refusals that change nothing, release as preemption.
#include <gtest/gtest.h>

#include "g1/g1_test_support.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/driver/request_driver.hpp"

namespace kvtier::driver {
namespace {

using g1::testing::token_range;

class RequestDriverTest : public ::testing::TestWithParam<g1::G1Backend> {
 protected:
  RequestDriverTest()
      : manager_(g1::G1ManagerConfig{.capacity = 6, .block_size = 4, .backend = GetParam()}), driver_(manager_) {}
  static ActiveSequence sequence(TokenId first, TokenId end, std::size_t max_output = 8) {
    return ActiveSequence(token_range(first, end), ActiveSequenceConfig{.block_size = 4,
                                                                        .max_output_tokens = max_output,
                                                                        .enable_prefix_caching = true,
                                                                        .emit_token_ids = false,
                                                                        .planned_output = {},
                                                                        .seed = std::nullopt});
  }
  g1::G1Manager manager_;
  RequestDriver driver_;
};

TEST_P(RequestDriverTest, SharedPrefixIsReusedNotDuplicated) {
  ActiveSequence a = sequence(0, 8);
  ASSERT_TRUE(driver_.allocate(g1::OwnerId(1), a, a.len()).is_ready());
  driver_.finalize(g1::OwnerId(1), a, 0, a.len());
  ActiveSequence b = sequence(0, 10);  // the same two full blocks, then a partial
  EXPECT_EQ(driver_.resident_prefix(b), 2U);
  ASSERT_TRUE(driver_.allocate(g1::OwnerId(2), b, b.len()).is_ready());
  EXPECT_EQ(manager_.num_active_blocks(), 3U);  // two shared pages and b's partial
  EXPECT_EQ(manager_.block_table(g1::OwnerId(1))[0], manager_.block_table(g1::OwnerId(2))[0]);
  manager_.audit();
}

TEST_P(RequestDriverTest, DecodeRefusesAnUnallocatedSequenceAndChangesNothing) {
  ActiveSequence a = sequence(0, 6);
  ASSERT_TRUE(driver_.allocate(g1::OwnerId(1), a, 4).is_ready());  // the partial tail is not allocated
  const std::size_t length = a.len();
  EXPECT_THROW(driver_.decode(g1::OwnerId(1), a, 99), ContractError);
  EXPECT_EQ(a.len(), length);
  EXPECT_EQ(a.num_allocated_tokens(), 4U);
  ASSERT_TRUE(driver_.allocate(g1::OwnerId(1), a, a.len()).is_ready());
  EXPECT_TRUE(driver_.decode(g1::OwnerId(1), a, 99).acquire.is_ready());
  EXPECT_EQ(a.num_allocated_tokens(), a.len());
}

TEST_P(RequestDriverTest, CapacityStopReportsTheAppliedSignalsAndAllocateRetries) {
  ActiveSequence a = sequence(0, 8, 4);
  ASSERT_TRUE(driver_.allocate(g1::OwnerId(1), a, a.len()).is_ready());
  driver_.finalize(g1::OwnerId(1), a, 0, a.len());
  ActiveSequence hog = sequence(100, 116);  // four more pages: the pool is full
  ASSERT_TRUE(driver_.allocate(g1::OwnerId(2), hog, hog.len()).is_ready());
  const DecodeStep step = driver_.decode(g1::OwnerId(1), a, 8);  // opens a new block: Use of a partial
  EXPECT_EQ(step.signals.size(), 1U);
  EXPECT_EQ(step.applied, 0U);
  EXPECT_FALSE(step.acquire.is_ready());
  EXPECT_EQ(a.len(), 9U);                                             // the token stays
  EXPECT_THROW(driver_.decode(g1::OwnerId(1), a, 9), ContractError);  // not allocated to its length
  driver_.release(g1::OwnerId(2), hog);
  EXPECT_FALSE(manager_.has_owner(g1::OwnerId(2)));
  ASSERT_TRUE(driver_.allocate(g1::OwnerId(1), a, a.len()).is_ready());
  const DecodeStep next = driver_.decode(g1::OwnerId(1), a, 9);
  EXPECT_TRUE(next.acquire.is_ready());
  manager_.audit();
}

TEST_P(RequestDriverTest, TheLastTokenReleasesEverything) {
  ActiveSequence a = sequence(0, 3, 2);
  ASSERT_TRUE(driver_.allocate(g1::OwnerId(1), a, a.len()).is_ready());
  EXPECT_FALSE(driver_.decode(g1::OwnerId(1), a, 3).finished);
  const DecodeStep last = driver_.decode(g1::OwnerId(1), a, 4);
  EXPECT_TRUE(last.finished);
  EXPECT_FALSE(manager_.has_owner(g1::OwnerId(1)));
  EXPECT_EQ(a.num_allocated_tokens(), 0U);
  EXPECT_THROW(driver_.allocate(g1::OwnerId(1), a, a.len() + 1), ContractError);
}

INSTANTIATE_TEST_SUITE_P(Backends, RequestDriverTest, ::testing::Values(g1::G1Backend::Native, g1::G1Backend::Kvbm),
                         [](const auto& param_info) { return std::string(g1::backend_name(param_info.param)); });

}  // namespace
}  // namespace kvtier::driver
