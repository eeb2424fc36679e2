// The script runner as a library: refusals of impossible init sizes, read and
// write errors with their exit status, and byte-for-byte replay (issue #13).
#include <gtest/gtest.h>

#include <sstream>
#include <streambuf>
#include <utility>
#include <vector>

#include "kvtier/core/bounded_line.hpp"
#include "kvtier/script/script_runner.hpp"

namespace kvtier::script {
namespace {

std::string run(const std::string& script, int* status = nullptr) {
  std::istringstream in(script);
  std::ostringstream out;
  std::ostringstream err;
  const int rc = run_script(in, out, err);
  if (status) *status = rc;
  return out.str();
}

TEST(ScriptRunner, LayoutAndConfigSizesThatDoNotFitIn32BitsAreRefusedNotTruncated) {
  for (const char* init :
       {R"({"op":"init","capacity":4,"block_size":4,"device":"host","layout":{"layers":4294967297}})",
        R"({"op":"init","capacity":4,"block_size":4,"device":"host","layout":{"kv_heads":4294967297}})",
        R"({"op":"init","capacity":4,"block_size":4,"device":"host","layout":{"head_dim":4294967298}})",
        R"({"op":"init","capacity":4294967297,"block_size":4,"device":"host"})",
        R"({"op":"init","capacity":4,"block_size":4294967300,"device":"host"})",
        R"({"op":"init","capacity":4,"block_size":4,"dp_rank":4294967296,"device":"host"})"}) {
    ScriptRunner runner;
    const auto answer = runner.run_line(init, 1);
    ASSERT_TRUE(answer);
    EXPECT_FALSE(answer->at("ok").get<bool>()) << init;
    EXPECT_NE(answer->at("error").get<std::string>().find("must fit in 32 bits"), std::string::npos) << init;
    EXPECT_FALSE(runner.initialized());
  }
}

TEST(ScriptRunner, OffloadSettingsWithoutATierAreRefused) {
  for (
      const auto& [init, message] : std::vector<std::pair<const char*, const char*>>{
          {R"({"op":"init","backend":"kvbm","capacity":4,"block_size":4,"device":"host","verify_swaps":true})",
           "need the offload tier"},
          {R"({"op":"init","backend":"kvbm","capacity":4,"block_size":4,"device":"host","host_blocks":2,"offload_batch":0})",
           "offload_batch must be at least one block"}}) {
    ScriptRunner runner;
    const auto answer = runner.run_line(init, 1);
    ASSERT_TRUE(answer);
    EXPECT_FALSE(answer->at("ok").get<bool>()) << init;
    EXPECT_NE(answer->at("error").get<std::string>().find(message), std::string::npos) << answer->dump();
    EXPECT_FALSE(runner.initialized());
  }
}

TEST(ScriptRunner, WithoutATierTheOffloadOpsAnswerNothingMoves) {
  ScriptRunner runner;
  ASSERT_TRUE(
      runner.run_line(R"({"op":"init","backend":"kvbm","capacity":2,"block_size":4,"device":"host"})", 1)->at("ok"));
  const auto wait = runner.run_line(R"({"op":"wait_offload"})", 2);
  EXPECT_EQ(wait->at("completed").size(), 0U);
  EXPECT_EQ(runner.run_line(R"({"op":"swap_in","id":"s","plhs":[1]})", 3)->at("result"), "no_hits");
  EXPECT_EQ(runner.run_line(R"({"op":"pin_prefix","id":"p","plhs":[]})", 4)->at("result"), "miss");
  EXPECT_FALSE(runner.run_line(R"({"op":"inject_fault","copy_batch":1})", 5)->at("ok").get<bool>());
  const auto stats = runner.run_line(R"({"op":"stats"})", 6);
  EXPECT_EQ(stats->at("host_capacity"), 0);
  EXPECT_EQ(stats->at("quarantined"), 0);
}

/// A stream buffer that refuses every write, like a full disk.
class FullDisk : public std::streambuf {
 protected:
  int_type overflow(int_type) override { return traits_type::eof(); }
  std::streamsize xsputn(const char*, std::streamsize) override { return 0; }
};

TEST(ScriptRunner, WriteErrorIsStatus2WithAMessage) {
  std::istringstream in(R"({"op":"init","capacity":4,"block_size":4,"device":"host"})"
                        "\n");
  FullDisk disk;
  std::ostream out(&disk);
  std::ostringstream err;
  EXPECT_EQ(run_script(in, out, err), 2);
  EXPECT_NE(err.str().find("cannot write"), std::string::npos);
}

TEST(ScriptRunner, InvalidUtf8InAnAnswerIsReplacedNotFatal) {
  ScriptRunner runner;
  const auto answer = runner.run_line("{\"op\":\"init\"} \xff", 1);
  ASSERT_TRUE(answer);
  const std::string line = format_answer(*answer);
  EXPECT_NE(line.find("invalid JSON"), std::string::npos);
  EXPECT_TRUE(nlohmann::json::accept(line)) << line;
}

TEST(ScriptRunner, ScriptsReplayByteForByteWithCachingOffAndRandomOutput) {
  // Caching off gives random block identities and generate without a token a
  // random token: both come from the init seed and the sequence id.
  const std::string script =
      R"({"op":"init","capacity":8,"block_size":4,"device":"host","prefix_caching":false,"seed":7})"
      "\n"
      R"({"op":"sequence","id":"s","owner":"r","token_range":[0,9],"max_output":3,"planned_output":[]})"
      "\n"
      R"({"op":"allocate","sequence":"s","tokens":9})"
      "\n"
      R"({"op":"generate","sequence":"s","token":1})"
      "\n"
      R"({"op":"block_table","owner":"r"})"
      "\n";
  const std::string first = run(script);
  EXPECT_EQ(first, run(script));
  EXPECT_NE(first.find("\"hash\""), std::string::npos);
  std::string reseeded = script;
  reseeded.replace(reseeded.find("\"seed\":7"), 8, "\"seed\":8");
  EXPECT_NE(first, run(reseeded));
}

TEST(ScriptRunner, ALineLongerThanTheLimitEndsTheScriptWithStatus2) {
  // Regression (issue 23): a script line was read whole, whatever its length.
  const std::string init = R"({"op":"init","capacity":8,"block_size":4,"device":"host"})"
                           "\n";
  int status = 0;
  const std::string out = run(init + std::string(kMaxLineBytes + 1, ' ') + "\n" + init, &status);
  EXPECT_EQ(status, 2);
  EXPECT_NE(out.find("line 2: longer than the 67108864-byte limit of a script line"), std::string::npos) << out;
  EXPECT_EQ(out.find("line 3"), std::string::npos) << "nothing after it runs";
}

}  // namespace
}  // namespace kvtier::script
