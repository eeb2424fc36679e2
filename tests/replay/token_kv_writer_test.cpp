// The replay's K/V writes: tokens staged into slots land through the
// runtime's write_kv, a page reads back as the K/V of its tokens, and any
// other content is a mismatch.
#include "kvtier/replay/token_kv_writer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "kvtier/core/errors.hpp"
#include "kvtier/memory/host_runtime.hpp"

namespace kvtier::replay {
namespace {

constexpr std::uint32_t kBlock = 4;

KvLayout layout(PageLayout kind, KvDtype dtype = KvDtype::Bf16) {
  return KvLayout(KvGeometry{.layers = 2, .kv_heads = 2, .head_dim = 8, .dtype = dtype, .tokens_per_block = kBlock},
                  kind, 6);
}

/// The identities of a block's tokens, as the replay derives them.
std::vector<std::uint64_t> block_identities(std::uint64_t parent, const std::vector<TokenId>& tokens) {
  std::vector<std::uint64_t> out;
  for (std::size_t t = 1; t <= tokens.size(); ++t) out.push_back(token_kv_identity(parent, std::span(tokens).first(t)));
  return out;
}

TEST(TokenKvWriter, TokenIdentityDependsOnTheParentAndEveryEarlierTokenOfTheBlock) {
  const std::vector<TokenId> a{1, 2, 3}, b{1, 9, 3};
  EXPECT_NE(token_kv_identity(7, a), token_kv_identity(8, a));
  EXPECT_NE(token_kv_identity(7, a), token_kv_identity(7, b));
  EXPECT_EQ(token_kv_identity(7, std::span(a).first(1)), token_kv_identity(7, std::span(b).first(1)));
  std::vector<float> k(64), v(64), k2(64), v2(64);
  synthesize_token_kv(5, 0, k, v);
  synthesize_token_kv(5, 1, k2, v2);
  EXPECT_NE(k, v);
  EXPECT_NE(k, k2);  // layers differ
  for (const float x : k) EXPECT_TRUE(x >= -8.0F && x <= 7.0F && x == static_cast<float>(static_cast<int>(x)));
}

TEST(TokenKvWriter, WrittenTokensReadBackAsTheirKvAndAnythingElseIsAMismatch) {
  for (const PageLayout kind : {PageLayout::PageMajor, PageLayout::LayerMajor}) {
    for (const KvDtype dtype : {KvDtype::Bf16, KvDtype::Fp8, KvDtype::Fp16}) {
      memory::HostRuntime runtime;
      memory::KvPool pool(runtime, layout(kind, dtype));
      TokenKvWriter writer(pool, /*max_staged_tokens=*/3);  // several flushes on the way
      const auto first = block_identities(0, {10, 11, 12, 13});
      const auto second = block_identities(99, {20, 21, 22, 23});
      for (std::uint32_t t = 0; t < kBlock; ++t) {
        writer.stage(PageId(4), t, first[t]);
        writer.stage(PageId(1), kBlock - 1 - t, second[kBlock - 1 - t]);  // any order of slots
      }
      writer.flush();
      EXPECT_EQ(writer.staged(), 0U);
      EXPECT_EQ(writer.tokens_written(), 8U);
      EXPECT_EQ(writer.bytes_written(), 2 * pool.layout().page_bytes());
      std::vector<std::uint64_t> both(first);
      both.insert(both.end(), second.begin(), second.end());
      EXPECT_TRUE(writer.find_mismatches(std::vector<PageId>{PageId(4), PageId(1)}, both).empty());
      // Swapped pages, a page never written, and one flipped byte are all caught.
      EXPECT_EQ(writer.find_mismatches(std::vector<PageId>{PageId(1), PageId(4)}, both).size(), 2U);
      EXPECT_EQ(writer.find_mismatches(std::vector<PageId>{PageId(0)}, first), std::vector<PageId>{PageId(0)});
      pool.slab()[pool.layout().chunk_offset(4, pool.layout().chunks_per_page() - 1) + 5] ^= std::byte{1};
      EXPECT_EQ(writer.find_mismatches(std::vector<PageId>{PageId(4), PageId(1)}, both),
                std::vector<PageId>{PageId(4)});
    }
  }
}

TEST(TokenKvWriter, StagedTokensAreWrittenBeforeAnyPageIsRead) {
  memory::HostRuntime runtime;
  memory::KvPool pool(runtime, layout(PageLayout::PageMajor));
  TokenKvWriter writer(pool);
  const auto ids = block_identities(3, {1, 2, 3, 4});
  for (std::uint32_t t = 0; t < kBlock; ++t) writer.stage(PageId(2), t, ids[t]);
  EXPECT_EQ(writer.staged(), 4U);
  EXPECT_TRUE(writer.find_mismatches(std::vector<PageId>{PageId(2)}, ids).empty());  // it flushed first
}

TEST(TokenKvWriter, BadSlotsAndShapesAreRefusedAndWriteNothing) {
  memory::HostRuntime runtime;
  memory::KvPool pool(runtime, layout(PageLayout::PageMajor));
  TokenKvWriter writer(pool);
  EXPECT_THROW(writer.stage(PageId(6), 0, 1), ContractError);
  EXPECT_THROW(writer.stage(PageId(0), kBlock, 1), ContractError);
  EXPECT_EQ(writer.staged(), 0U);
  EXPECT_THROW((void)writer.find_mismatches(std::vector<PageId>{PageId(0)}, std::vector<std::uint64_t>{1, 2}),
               ContractError);
  EXPECT_TRUE(std::all_of(pool.slab(), pool.slab() + pool.layout().slab_bytes(),
                          [](std::byte b) { return b == std::byte{0}; }));
}

}  // namespace
}  // namespace kvtier::replay
