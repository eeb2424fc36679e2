// One request stream replayed on both backends. Where the spec says they must
// agree — capacity accounting when no duplicate copies arise, visibility once
// computed blocks are finalized, prefill cost on a warm cache — they do.
#include <gtest/gtest.h>

#include <random>

#include "g1/g1_test_support.hpp"
#include "kvtier/driver/request_driver.hpp"

namespace kvtier::g1 {
namespace {

using testing::token_range;

struct Replay {
  explicit Replay(G1Backend backend)
      : manager(G1ManagerConfig{.capacity = 4096,
                                .block_size = 4,
                                .dp_rank = 0,
                                .backend = backend,
                                .enable_prefix_caching = true,
                                .eviction = EvictionBackend::Lineage}) {}
  G1Manager manager;
  std::map<std::uint64_t, ActiveSequence> running;
};

ActiveSequence request(int system_prompt, int user, std::size_t max_output) {
  // A shared "system prompt" of 12 tokens, then a user part.
  std::vector<TokenId> tokens =
      token_range(static_cast<TokenId>(system_prompt * 100), static_cast<TokenId>(system_prompt * 100 + 12));
  for (TokenId t :
       token_range(static_cast<TokenId>(10000 + user * 37), static_cast<TokenId>(10000 + user * 37 + 3 + user % 9))) {
    tokens.push_back(t);
  }
  return ActiveSequence(tokens, ActiveSequenceConfig{.block_size = 4,
                                                     .max_output_tokens = max_output,
                                                     .enable_prefix_caching = true,
                                                     .emit_token_ids = false,
                                                     .planned_output = {},
                                                     .seed = std::nullopt});
}

void admit(Replay& r, std::uint64_t owner, ActiveSequence seq) {
  // The driver reuses exactly the resident prefix on native (as a scheduler
  // would), so no duplicates arise; KVBM matches by lineage.
  driver::RequestDriver driver(r.manager);
  ASSERT_TRUE(driver.allocate(OwnerId(owner), seq, seq.len()).is_ready());
  driver.finalize(OwnerId(owner), seq, 0, seq.len());
  r.running.emplace(owner, std::move(seq));
}

void decode(Replay& r, std::uint64_t owner, TokenId token) {
  driver::RequestDriver driver(r.manager);
  ActiveSequence& seq = r.running.at(owner);
  const std::size_t before = seq.len();
  const driver::DecodeStep step = driver.decode(OwnerId(owner), seq, token);
  ASSERT_TRUE(step.acquire.is_ready());
  if (step.finished) {
    r.running.erase(owner);
    return;
  }
  driver.finalize(OwnerId(owner), seq, before, seq.len());
}

TEST(BackendAgreement, CapacityVisibilityAndWarmPrefillCostAgree) {
  Replay native(G1Backend::Native);
  Replay kvbm(G1Backend::Kvbm);
  std::mt19937 rng(7);
  std::uint64_t next_owner = 1;
  for (int step = 0; step < 400; ++step) {
    const int action = static_cast<int>(rng() % 4);
    if (action == 0 || native.running.empty()) {
      const int system_prompt = static_cast<int>(rng() % 3);
      const int user = static_cast<int>(rng() % 50);
      const std::size_t max_output = 1 + rng() % 9;
      admit(native, next_owner, request(system_prompt, user, max_output));
      admit(kvbm, next_owner, request(system_prompt, user, max_output));
      ++next_owner;
    } else {
      auto it = native.running.begin();
      std::advance(it, static_cast<long>(rng() % native.running.size()));
      const std::uint64_t owner = it->first;
      const TokenId token = static_cast<TokenId>(rng() % 1000);
      decode(native, owner, token);
      decode(kvbm, owner, token);
    }
    ASSERT_EQ(native.manager.num_active_blocks(), kvbm.manager.num_active_blocks()) << "step " << step;
    ASSERT_EQ(native.manager.num_active_block_refs(), kvbm.manager.num_active_block_refs()) << "step " << step;
    ASSERT_EQ(native.manager.num_inactive_blocks(), kvbm.manager.num_inactive_blocks()) << "step " << step;
    for (int p = 0; p < 3; ++p) {
      for (int user : {0, 1, 2, 5, 11}) {
        const ActiveSequence probe = request(p, user, 0);
        ASSERT_EQ(native.manager.get_prefill_cost(probe), kvbm.manager.get_prefill_cost(probe)) << "step " << step;
        for (const UniqueBlock& b : probe.blocks()) {
          if (b.is_full()) {
            ASSERT_EQ(native.manager.is_cached(b.hash()), kvbm.manager.is_cached(b.hash()));
          }
        }
      }
    }
  }
  EXPECT_GT(native.manager.num_inactive_blocks(), 10U);  // the stream did reuse and release
}

}  // namespace
}  // namespace kvtier::g1
