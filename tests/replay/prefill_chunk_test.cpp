// Prefill chunks, and the block-aligned split a Mamba group in align mode
// needs (vLLM's Scheduler._mamba_block_aligned_split).
#include <gtest/gtest.h>

#include "kvtier/replay/prefill_chunk.hpp"

namespace kvtier::replay {
namespace {

TEST(PrefillChunk, WithoutAlignmentItIsTheBudgetOrWhatIsLeft) {
  EXPECT_EQ(prefill_chunk(0, 2000, 2000, 8192, 0), 2000U);
  EXPECT_EQ(prefill_chunk(100, 2000, 2000, 512, 0), 512U);
  EXPECT_EQ(prefill_chunk(2000, 2000, 2000, 512, 0), 0U);
}

TEST(PrefillChunk, AlignedChunksEndOnTheUnitThenOnThePromptsLastAlignedTokenThenTheRest) {
  // A 2000-token prompt at 544 tokens a block: its last aligned position is 1632.
  EXPECT_EQ(prefill_chunk(0, 2000, 2000, 1000, 544), 544U);     // cut to the unit
  EXPECT_EQ(prefill_chunk(544, 2000, 2000, 8192, 544), 1088U);  // stops on 1632, not at 2000
  EXPECT_EQ(prefill_chunk(0, 2000, 2000, 8192, 544), 1632U);
  EXPECT_EQ(prefill_chunk(1632, 2000, 2000, 8192, 544), 368U);  // the last few tokens
  EXPECT_EQ(prefill_chunk(0, 2000, 2000, 500, 544), 0U);        // less than a block: wait for more budget
  EXPECT_EQ(prefill_chunk(0, 300, 300, 8192, 544), 300U);       // a prompt shorter than a block
}

TEST(PrefillChunk, ARequestWithGeneratedTokensIsNotAligned) {
  EXPECT_EQ(prefill_chunk(0, 2010, 2000, 1000, 544), 1000U);
}

}  // namespace
}  // namespace kvtier::replay
