// Groups of different precisions share one pool (model-geometry.md §5, vLLM
// #47574): a page a group of another precision takes is zeroed before the
// request driver hands it over; a page that stays within one precision keeps
// its bytes (nothing is zeroed that need not be).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "kvtier/core/active_sequence.hpp"
#include "kvtier/memory/host_runtime.hpp"
#include "kvtier/session/session.hpp"

namespace kvtier::driver {
namespace {

/// Both pages 512 bytes: bf16 K/V of 1 head x 8, and fp8 (per tensor) K/V of 1 head x 16.
std::vector<GroupSpec> mixed_precision_groups(KvQuant second) {
  return {GroupSpec{.kind = GroupKind::FullAttention, .kv_heads = 1, .head_dim = 8, .dtype = KvDtype::Bf16},
          GroupSpec{.kind = GroupKind::FullAttention,
                    .kv_heads = 1,
                    .head_dim = second == KvQuant::None ? 8U : 16U,
                    .dtype = KvDtype::Bf16,
                    .quant = second}};
}

ActiveSequence prompt_of(TokenId first) {
  std::vector<TokenId> tokens(32);
  std::iota(tokens.begin(), tokens.end(), first);
  return ActiveSequence(tokens, ActiveSequenceConfig{.block_size = 16, .max_output_tokens = 1, .seed = 1});
}

struct PageOwner {
  std::size_t group;
  PageId page;
};

std::vector<PageOwner> pages_of(const g1::G1Manager& manager, g1::OwnerId owner) {
  std::vector<PageOwner> out;
  for (std::size_t g = 0; g < manager.group_count(); ++g) {
    for (const PageId page : manager.block_table(owner, g)) out.push_back({g, page});
  }
  return out;
}

/// Runs request a, marks its pages 0xAB, releases it (cached), then runs b of
/// other tokens, which must evict them; answers b's pages with whether each
/// was zeroed, and the group each one last served.
struct Reuse {
  std::vector<PageOwner> before;
  std::vector<PageOwner> after;
  std::vector<bool> zeroed;
};

Reuse reuse_pages(KvQuant second) {
  memory::HostRuntime runtime;
  session::Session session(
      runtime, session::SessionConfig{.manager = g1::G1ManagerConfig{
                                          .capacity = 5, .block_size = 16, .groups = mixed_precision_groups(second)}});
  RequestDriver driver = session.driver();
  ActiveSequence a = prompt_of(100);
  const g1::OwnerId first(1);
  EXPECT_TRUE(driver.allocate(first, a, 32).is_ready());
  driver.finalize(first, a, 0, 32);
  Reuse out;
  out.before = pages_of(session.manager(), first);
  for (const PageOwner& p : out.before) {
    std::memset(session.pool().chunk_address(p.page, 0), 0xAB, session.pool().layout().chunk_bytes());
  }
  driver.release(first, a);
  ActiveSequence b = prompt_of(900);
  const g1::OwnerId second_owner(2);
  EXPECT_TRUE(driver.allocate(second_owner, b, 32).is_ready());
  out.after = pages_of(session.manager(), second_owner);
  for (const PageOwner& p : out.after) {
    const std::byte* bytes = session.pool().chunk_address(p.page, 0);
    out.zeroed.push_back(std::all_of(bytes, bytes + session.pool().layout().chunk_bytes(),
                                     [](std::byte x) { return x == std::byte{0}; }));
  }
  return out;
}

TEST(PagePrecision, APageTakenByAnotherPrecisionIsZeroedAndOneOfTheSameKeepsItsBytes) {
  const Reuse r = reuse_pages(KvQuant::Fp8PerTensor);
  ASSERT_EQ(r.before.size(), 4U);
  ASSERT_EQ(r.after.size(), 4U);
  std::size_t crossed = 0;
  for (std::size_t i = 0; i < r.after.size(); ++i) {
    const auto was =
        std::find_if(r.before.begin(), r.before.end(), [&](const PageOwner& p) { return p.page == r.after[i].page; });
    if (was == r.before.end()) continue;  // the pool's free page: zero from the start
    const bool other_precision = was->group != r.after[i].group;
    crossed += other_precision ? 1 : 0;
    EXPECT_EQ(r.zeroed[i], other_precision) << "page " << r.after[i].page.value() << " of group " << r.after[i].group;
  }
  EXPECT_GT(crossed, 0U) << "the test needs a page to change precision";
}

TEST(PagePrecision, GroupsOfOnePrecisionZeroNothing) {
  const Reuse r = reuse_pages(KvQuant::None);
  for (std::size_t i = 0; i < r.after.size(); ++i) {
    const bool reused =
        std::any_of(r.before.begin(), r.before.end(), [&](const PageOwner& p) { return p.page == r.after[i].page; });
    if (reused) {
      EXPECT_FALSE(r.zeroed[i]) << "page " << r.after[i].page.value();
    }
  }
}

}  // namespace
}  // namespace kvtier::driver
