// The replay's attention check: pages holding their tokens' K/V, read
// through the session's device block tables by paged attention, match dense
// attention over that K/V; a page holding anything else is named; and the
// session's block tables grow for a batch larger than they were.
#include "kvtier/replay/attention_check.hpp"

#include <gtest/gtest.h>

#include <numeric>

#include "kvtier/core/errors.hpp"
#include "kvtier/memory/host_runtime.hpp"
#include "kvtier/replay/token_kv_writer.hpp"

namespace kvtier::replay {
namespace {

constexpr std::uint32_t kBlock = 4;

session::SessionConfig config(PageLayout layout, KvDtype dtype) {
  session::SessionConfig c;
  c.manager.capacity = 64;
  c.manager.block_size = kBlock;
  c.geometry = KvGeometry{.layers = 2, .kv_heads = 2, .head_dim = 16, .dtype = dtype};
  c.layout = layout;
  return c;
}

class AttentionCheckTest : public ::testing::Test {
 protected:
  /// A request of `tokens` tokens allocated in the session, its K/V written
  /// through write_kv as the replay writes it.
  AttentionCheck::Sequence add(session::Session& session, TokenKvWriter& writer, std::uint64_t owner,
                               std::size_t tokens) {
    std::vector<TokenId> prompt(tokens);
    std::iota(prompt.begin(), prompt.end(), static_cast<TokenId>(owner * 1000));
    ActiveSequence sequence(std::move(prompt), ActiveSequenceConfig{.block_size = kBlock, .max_output_tokens = 1});
    std::size_t calls = 0;
    EXPECT_TRUE(session.driver().allocate_collecting(g1::OwnerId(owner), sequence, tokens, calls).is_ready());
    const auto table = session.manager().block_table(g1::OwnerId(owner));
    AttentionCheck::Sequence out{.owner = g1::OwnerId(owner), .identities = {}};
    for (std::size_t block = 0; block * kBlock < tokens; ++block) {
      const std::uint64_t parent = block == 0 ? 0 : sequence.blocks()[block - 1].hash().value();
      for (std::size_t t = 0; t < kBlock && block * kBlock + t < tokens; ++t) {
        const auto through = std::span(sequence.tokens()).subspan(block * kBlock, t + 1);
        out.identities.push_back(token_kv_identity(parent, through));
        writer.stage(table[block], static_cast<std::uint32_t>(t), out.identities.back());
      }
    }
    writer.flush();
    return out;
  }
  memory::HostRuntime runtime_;
};

TEST_F(AttentionCheckTest, PagesHoldingTheirTokensKvPassAndAnOverwrittenPageIsNamed) {
  for (const PageLayout layout : {PageLayout::PageMajor, PageLayout::LayerMajor}) {
    for (const KvDtype dtype : {KvDtype::Bf16, KvDtype::Fp8}) {
      session::Session session(runtime_, config(layout, dtype));
      TokenKvWriter writer(session.pool());
      // A partial last block, a single token, several blocks.
      const std::vector<AttentionCheck::Sequence> sequences{add(session, writer, 1, 10), add(session, writer, 2, 1),
                                                            add(session, writer, 3, 23)};
      AttentionCheck check(session, 4);
      EXPECT_EQ(check.query_heads(), 4U);
      for (std::uint32_t layer = 0; layer < 2; ++layer) {
        EXPECT_TRUE(check.run(sequences, layer, 7 + layer).empty()) << page_layout_name(layout);
      }
      // Another block's bytes in one page of the third sequence: only it differs.
      const PageId victim = session.manager().block_table(g1::OwnerId(3))[2];
      session.pool().fill_pattern(std::vector<PageId>{victim}, std::vector<std::uint64_t>{99});
      EXPECT_EQ(check.run(sequences, 1, 9), (std::vector<std::size_t>{2}));
      // A sequence whose table names a stranger's pages differs too.
      std::vector<AttentionCheck::Sequence> swapped{sequences[0]};
      swapped[0].owner = g1::OwnerId(2);
      swapped[0].identities.resize(1);
      EXPECT_FALSE(check.run(swapped, 0, 3).empty());
    }
  }
}

TEST_F(AttentionCheckTest, RefusesWhatItCannotCheck) {
  session::Session session(runtime_, config(PageLayout::PageMajor, KvDtype::Bf16));
  TokenKvWriter writer(session.pool());
  const AttentionCheck::Sequence one = add(session, writer, 1, 5);
  AttentionCheck check(session, 1);
  EXPECT_THROW(check.run(std::vector{one, one}, 0, 1), ContractError);  // more than it was made for
  EXPECT_THROW(check.run(std::vector{AttentionCheck::Sequence{.owner = g1::OwnerId(1), .identities = {}}}, 0, 1),
               ContractError);
  EXPECT_THROW(check.run(std::vector{AttentionCheck::Sequence{.owner = g1::OwnerId(77), .identities = {1}}}, 0, 1),
               ContractError);  // an owner the manager does not know
  AttentionCheck::Sequence longer = one;
  longer.identities.resize(9);  // 5 tokens on 2 pages: 9 do not fit their table
  EXPECT_THROW(check.run(std::vector{longer}, 0, 1), ContractError);
  EXPECT_THROW(AttentionCheck(session, 0), ContractError);
  EXPECT_TRUE(check.run(std::vector{one}, 1, 1).empty());  // still usable
}

TEST_F(AttentionCheckTest, SessionBlockTablesGrowForALargerBatch) {
  session::Session session(runtime_, config(PageLayout::PageMajor, KvDtype::Bf16));
  TokenKvWriter writer(session.pool());
  std::vector<AttentionCheck::Sequence> sequences;
  for (std::uint64_t owner = 1; owner <= 12; ++owner) sequences.push_back(add(session, writer, owner, 1 + owner % 5));
  sequences.push_back(add(session, writer, 13, 70));  // 18 blocks: wider than the first tables
  memory::Stream& stream = session.compute_stream();
  const std::vector<g1::OwnerId> two{g1::OwnerId(1), g1::OwnerId(2)};
  const memory::DeviceBlockTables small = session.block_tables(two, stream);
  EXPECT_EQ(small.rows, 2U);
  EXPECT_EQ(small.columns, 1U);
  AttentionCheck check(session, 13);
  EXPECT_TRUE(check.run(sequences, 0, 5).empty());
  std::vector<g1::OwnerId> all;
  for (const auto& s : sequences) all.push_back(s.owner);
  const memory::DeviceBlockTables big = session.block_tables(all, stream, {}, 20);
  stream.synchronize();
  EXPECT_EQ(big.rows, 13U);
  EXPECT_EQ(big.columns, 20U);
  const auto table = session.manager().block_table(g1::OwnerId(13));
  for (std::size_t i = 0; i < 20; ++i) {  // host runtime: device memory is readable here
    EXPECT_EQ(big.tables[12 * 20 + i], i < table.size() ? static_cast<std::int32_t>(table[i].value()) : -1);
  }
}

}  // namespace
}  // namespace kvtier::replay
