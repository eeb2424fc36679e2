// The script's G4 settings against a real redis-server: init's shared_tier,
// External Stored events when blocks land in G2 (write-through), a second
// script (another instance, cold G1 and G2) that swaps them in from the
// shared store (from_shared) with its bytes verified in G1, and the stats'
// shared fields; bad settings are refused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kvtier/script/script_runner.hpp"
#include "support/redis_servers.hpp"

namespace kvtier::script {
namespace {

using kvtier::testing::RedisServers;

std::vector<nlohmann::json> run(ScriptRunner& runner, const std::vector<std::string>& lines) {
  std::vector<nlohmann::json> answers;
  for (const std::string& line : lines) {
    auto answer = runner.run_line(line, answers.size() + 1);
    answers.push_back(answer ? nlohmann::json::parse(answer->dump()) : nlohmann::json());
  }
  return answers;
}

std::size_t external_stored(const std::vector<nlohmann::json>& answers) {
  std::size_t blocks = 0;
  for (const auto& answer : answers) {
    if (!answer.contains("events")) continue;
    for (const auto& event : answer.at("events")) {
      if (event.at("tier") == "external" && event.at("type") == "stored") blocks += event.at("blocks").size();
    }
  }
  return blocks;
}

TEST(ScriptShared, ASecondScriptSwapsInWhatTheFirstPublished) {
  RedisServers redis(1);
  KVTIER_REQUIRE_REDIS(redis);
  const std::string init = R"({"op":"init","backend":"native","capacity":2,"block_size":4,"host_blocks":2,)"
                           R"("device":"host","shared_namespace":"script","shared_tier":")" +
                           redis.urls()[0] + R"("})";
  ScriptRunner first;
  const auto published =
      run(first, {init, R"({"op":"use","owner":"a","blocks":[1,2]})", R"({"op":"write","owner":"a"})",
                  R"({"op":"finalize","owner":"a","before":0,"after":8})",
                  R"({"op":"deref","owner":"a","blocks":[2,1]})", R"({"op":"use","owner":"b","blocks":[5,6]})",
                  R"({"op":"wait_offload"})", R"({"op":"wait_offload"})", R"({"op":"stats"})"});
  for (const auto& answer : published) ASSERT_TRUE(answer.at("ok").get<bool>()) << answer.dump();
  EXPECT_EQ(published[0].at("shared_tier"), redis.urls()[0]);
  EXPECT_EQ(external_stored(published), 2U);  // a's blocks, as they landed in G2
  EXPECT_EQ(published.back().at("shared_blocks_published"), 2);
  EXPECT_EQ(published.back().at("shared_errors"), 0);

  ScriptRunner second;  // another instance: cold G1 and G2
  const auto answers =
      run(second, {init, R"({"op":"swap_in","id":"s","plhs":[1,2]})", R"({"op":"register_swap_in","id":"s"})",
                   R"({"op":"use","owner":"d","blocks":[1,2],"reuse":2})", R"({"op":"verify","owner":"d"})",
                   R"({"op":"stats"})"});
  for (const auto& answer : answers) ASSERT_TRUE(answer.at("ok").get<bool>()) << answer.dump();
  EXPECT_EQ(answers[1].at("result"), "scheduled");
  EXPECT_EQ(answers[1].at("from_shared"), 2);
  EXPECT_EQ(answers[2].at("registered"), 2);
  EXPECT_EQ(answers[4].at("verified"), 2);  // the bytes the first script wrote, through Redis
  EXPECT_TRUE(answers[4].at("mismatches").empty());
  EXPECT_EQ(answers[5].at("shared_blocks_fetched"), 2);
  EXPECT_EQ(answers[5].at("shared_lookups"), 1);
  EXPECT_EQ(answers[5].at("shared_checksum_failures"), 0);
}

TEST(ScriptShared, BadSharedSettingsAreRefused) {
  ScriptRunner runner;
  const auto answers = run(
      runner,
      {R"({"op":"init","capacity":2,"block_size":4,"device":"host","shared_tier":"redis://127.0.0.1:1"})",
       R"({"op":"init","capacity":2,"block_size":4,"device":"host","host_blocks":2,"shared_tier":"http://x:1"})",
       R"({"op":"init","capacity":2,"block_size":4,"device":"host","host_blocks":2,"shared_namespace":"x"})",
       R"({"op":"init","capacity":2,"block_size":4,"device":"host","host_blocks":2,"shared_tier":"redis://127.0.0.1:1",)"
       R"("shared_timeout_ms":0})"});
  for (const auto& answer : answers) EXPECT_FALSE(answer.at("ok").get<bool>()) << answer.dump();
}

}  // namespace
}  // namespace kvtier::script
