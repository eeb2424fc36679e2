// Admission through the driver, on a session with a G2 tier, on both
// backends: a request whose prompt was evicted to G2 comes back through the
// swap-in before its first allocation, its cached blocks are reused for free
// and its first chunk starts after them; the offload retry is the driver's.
#include <gtest/gtest.h>

#include <numeric>

#include "kvtier/core/errors.hpp"
#include "kvtier/driver/request_driver.hpp"
#include "kvtier/session/session.hpp"

namespace kvtier::driver {
namespace {

constexpr std::uint32_t kBlock = 4;

session::SessionConfig config(g1::G1Backend backend, std::uint32_t host_blocks) {
  session::SessionConfig c;
  c.manager.backend = backend;
  c.manager.capacity = 8;
  c.manager.block_size = kBlock;
  c.geometry = KvGeometry{.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype = KvDtype::Fp16};
  c.device = memory::RuntimeChoice::Host;
  c.host_blocks = host_blocks;
  return c;
}

ActiveSequence sequence(TokenId first, std::size_t tokens) {
  std::vector<TokenId> prompt(tokens);
  std::iota(prompt.begin(), prompt.end(), first);
  return ActiveSequence(std::move(prompt), ActiveSequenceConfig{.block_size = kBlock,
                                                                .max_output_tokens = 4,
                                                                .enable_prefix_caching = true,
                                                                .emit_token_ids = false,
                                                                .planned_output = {},
                                                                .seed = 1});
}

/// Runs a request's prefill to the end and releases it: its full blocks stay cached.
void prefill_and_release(RequestDriver& driver, g1::OwnerId owner, ActiveSequence& s) {
  std::size_t calls = 0;
  ASSERT_TRUE(driver.allocate_collecting(owner, s, s.len(), calls).is_ready());
  driver.finalize(owner, s, 0, s.len());
  driver.release(owner, s);
}

class AdmissionTest : public ::testing::TestWithParam<g1::G1Backend> {};

TEST_P(AdmissionTest, AnEvictedPromptComesBackFromG2BeforeItsFirstAllocation) {
  session::Session session(config(GetParam(), 16));
  RequestDriver driver = session.driver();
  ActiveSequence a = sequence(0, 4 * kBlock);  // four full blocks
  prefill_and_release(driver, g1::OwnerId(1), a);
  ActiveSequence b = sequence(1000, 8 * kBlock);  // fills G1: a's blocks go to G2
  prefill_and_release(driver, g1::OwnerId(2), b);
  session.manager().collect_offloads(true);
  ASSERT_EQ(driver.resident_prefix(a), 0U);

  ActiveSequence again = sequence(0, 4 * kBlock + 2);  // a's prompt and two more tokens
  const Admission admission = driver.admit(g1::OwnerId(3), again, again.len(), /*chunk_tokens=*/1);
  ASSERT_TRUE(admission.acquire.is_ready());
  EXPECT_EQ(admission.swapped_in, 4U);
  EXPECT_EQ(admission.cached_blocks, 4U);
  EXPECT_EQ(admission.allocated_to, 4 * kBlock + 1);  // the cached blocks, then one chunk token
  EXPECT_GE(admission.manager_calls, 4U);             // pin, swap-in, registration, allocation
  session.manager().audit();
}

TEST_P(AdmissionTest, WithoutATierTheG1PrefixIsReusedAndAFullPoolIsAValue) {
  session::Session session(config(GetParam(), 0));
  RequestDriver driver = session.driver();
  ActiveSequence a = sequence(0, 2 * kBlock);
  prefill_and_release(driver, g1::OwnerId(1), a);
  ActiveSequence again = sequence(0, 3 * kBlock);
  const Admission admission = driver.admit(g1::OwnerId(2), again, again.len(), 100);
  ASSERT_TRUE(admission.acquire.is_ready());
  EXPECT_EQ(admission.swapped_in, 0U);
  EXPECT_EQ(admission.cached_blocks, 2U);
  EXPECT_EQ(admission.allocated_to, again.len());   // the chunk reaches the end of the prompt
  ActiveSequence big = sequence(5000, 9 * kBlock);  // more pages than the pool has
  const Admission refused = driver.admit(g1::OwnerId(3), big, big.len(), big.len());
  EXPECT_EQ(refused.acquire.kind, g1::G1Acquire::Kind::CapacityExhausted);
  EXPECT_EQ(refused.allocated_to, 0U);
  EXPECT_FALSE(session.manager().has_owner(g1::OwnerId(3)));
  session.manager().audit();
}

TEST_P(AdmissionTest, TierKeysAreThoseOfTheBackend) {
  session::Session session(config(GetParam(), 4));
  ActiveSequence s = sequence(0, 3 * kBlock);
  const auto keys = session.manager().tier_keys(s, 2);
  ASSERT_EQ(keys.size(), 2U);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(keys[i], GetParam() == g1::G1Backend::Kvbm ? s.plh(i) : g1::native_tier_key(s.blocks()[i].hash()));
  }
  EXPECT_THROW((void)session.manager().tier_keys(s, 4), ContractError);
}

INSTANTIATE_TEST_SUITE_P(Backends, AdmissionTest, ::testing::Values(g1::G1Backend::Native, g1::G1Backend::Kvbm),
                         [](const ::testing::TestParamInfo<g1::G1Backend>& backend) {
                           return std::string(g1::backend_name(backend.param));
                         });

}  // namespace
}  // namespace kvtier::driver

namespace kvtier::driver {
namespace {

// A preempted request of a manager with groups comes back with its generated
// tokens: its hit is the groups' fixed point over all of them (past its
// prompt), and a first chunk shorter than the rest still takes all of it —
// a shorter length need not be a hit in the window group.
TEST(GroupedAdmission, APreemptedRequestTakesItsWholeHitPastThePromptWithAShortChunk) {
  g1::G1Manager manager(g1::G1ManagerConfig{
      .capacity = 64,
      .block_size = 16,
      .groups = {GroupSpec{.kind = GroupKind::FullAttention, .kv_heads = 1, .head_dim = 8},
                 GroupSpec{.kind = GroupKind::SlidingWindow, .sliding_window = 32, .kv_heads = 1, .head_dim = 8}}});
  RequestDriver driver(manager);
  std::vector<TokenId> prompt(64);
  std::iota(prompt.begin(), prompt.end(), 100);
  ActiveSequence s(prompt, ActiveSequenceConfig{.block_size = 16, .max_output_tokens = 40, .seed = 3});
  const g1::OwnerId first(1);
  ASSERT_TRUE(driver.admit(first, s, 64, 64).acquire.is_ready());
  driver.finalize(first, s, 0, 64);
  for (int t = 0; t < 20; ++t) ASSERT_TRUE(driver.decode(first, s).acquire.is_ready());
  const std::vector<PageId> pages(manager.block_table(first, 0).begin(), manager.block_table(first, 0).begin() + 5);
  driver.release(first, s);  // preempted after 84 tokens: blocks 0-4 (80 tokens) are cached

  const g1::OwnerId again(2);
  const Admission admission = driver.admit(again, s, 64, 1);
  ASSERT_TRUE(admission.acquire.is_ready());
  EXPECT_EQ(admission.cached_blocks, 5U);  // 80 tokens: more than the 64-token prompt
  EXPECT_EQ(admission.allocated_to, 81U);
  const auto table = manager.block_table(again, 0);
  EXPECT_EQ(std::vector<PageId>(table.begin(), table.begin() + 5), pages) << "the hit is the cached pages";
}

}  // namespace
}  // namespace kvtier::driver
