#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "kvtier/core/active_sequence.hpp"
#include "kvtier/core/bounded_line.hpp"
#include "kvtier/core/errors.hpp"
#include "kvtier/replay/trace.hpp"

namespace kvtier::replay {
namespace {

std::vector<TraceRequest> parse(const std::string& text) {
  std::istringstream in(text);
  return read_trace(in, "t.jsonl");
}

TEST(Trace, ReadsRequestsAndSkipsBlankLines) {
  const auto requests = parse(
      "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 3, \"hash_ids\": [4, 5]}\n\n"
      "{\"timestamp\": 12.5, \"input_length\": 512, \"output_length\": 0, \"hash_ids\": [4]}\n");
  ASSERT_EQ(requests.size(), 2U);
  EXPECT_EQ(requests[0].input_length, 600U);
  EXPECT_EQ(requests[0].hash_ids, (std::vector<std::uint64_t>{4, 5}));
  EXPECT_DOUBLE_EQ(requests[1].timestamp_ms, 12.5);
  EXPECT_EQ(synthesize_prompt(requests[0]).size(), 600U);
}

TEST(Trace, EqualIdsGiveEqualTokensAndEqualBlockHashesAtEveryBlockSizeDividing512) {
  const TraceRequest a{.timestamp_ms = 0, .input_length = 1100, .output_length = 1, .hash_ids = {7, 8, 9}};
  const TraceRequest b{.timestamp_ms = 0, .input_length = 1030, .output_length = 1, .hash_ids = {7, 8, 10}};
  const auto ta = synthesize_prompt(a);
  const auto tb = synthesize_prompt(b);
  EXPECT_TRUE(std::equal(ta.begin(), ta.begin() + 1024, tb.begin()));
  EXPECT_NE(ta[1024], tb[1024]);
  for (const std::uint32_t block_size : {16U, 64U, 512U}) {
    const ActiveSequence sa(ta, ActiveSequenceConfig{.block_size = block_size});
    const ActiveSequence sb(tb, ActiveSequenceConfig{.block_size = block_size});
    const std::size_t shared = 1024 / block_size;
    for (std::size_t i = 0; i < shared; ++i) EXPECT_EQ(sa.blocks()[i], sb.blocks()[i]) << block_size << " " << i;
    EXPECT_NE(sa.blocks()[shared], sb.blocks()[shared]);
  }
}

TEST(Trace, MalformedLinesAreRefusedWithTheirLineNumber) {
  const std::string good = "{\"timestamp\": 5, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}\n";
  for (const auto& [bad, message] : std::vector<std::pair<std::string, std::string>>{
           {"[1]", "not a JSON object"},
           {"{\"timestamp\": -1, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}", "non-negative"},
           {"{\"timestamp\": 1, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}", "back in time"},
           {"{\"timestamp\": 9, \"input_length\": 10, \"hash_ids\": [1]}", "'output_length'"},
           {"{\"timestamp\": 9, \"input_length\": 1000, \"output_length\": 1, \"hash_ids\": [1]}", "need 2 hash ids"},
           {"{\"timestamp\": 9, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [-1]}", "hash id"},
           {"{\"timestamp\": 9, \"input_length\": 0, \"output_length\": 1, \"hash_ids\": []}", "at least 1"}}) {
    try {
      parse(good + bad + "\n");
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const ConfigError& error) {
      const std::string what = error.what();
      EXPECT_NE(what.find("t.jsonl:2:"), std::string::npos) << what;
      EXPECT_NE(what.find(message), std::string::npos) << what;
    }
  }
  EXPECT_THROW(read_trace_file("/nonexistent/trace.jsonl"), ConfigError);
}

TEST(Trace, AJsonSyntaxErrorSaysWhatTheParserSaw) {
  try {
    parse("{\"timestamp\": 0, \"input_length\n");
    FAIL() << "accepted";
  } catch (const ConfigError& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("t.jsonl:1: invalid JSON"), std::string::npos) << what;
    EXPECT_NE(what.find("parse error"), std::string::npos) << what;
    EXPECT_EQ(what.find("not a JSON object"), std::string::npos) << what;
  }
}

TEST(Trace, ALineLongerThanTheLimitIsRefusedWithoutReadingOn) {
  // Regression (issue 23): a trace without newlines was read whole into memory.
  std::string text = "{\"timestamp\": 5, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}\n";
  text += std::string(kMaxLineBytes + 1, ' ');
  try {
    parse(text);
    FAIL() << "accepted";
  } catch (const ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("t.jsonl:2: longer than the 67108864-byte limit"), std::string::npos)
        << error.what();
  }
}

TEST(Trace, TheShippedMooncakeTraceReadsWhole) {
  const std::string path = KVTIER_MOONCAKE_TRACE;
  const auto requests = read_trace_file(path);
  EXPECT_EQ(requests.size(), 3993U);
  EXPECT_EQ(requests.front().input_length, 40160U);
  EXPECT_EQ(requests.front().hash_ids.size(), 79U);
  EXPECT_EQ(read_trace_file(path, 10).size(), 10U);
}

}  // namespace
}  // namespace kvtier::replay
