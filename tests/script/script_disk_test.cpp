// The script's G3 operations (docs/script.md "The disk tier"): init's
// disk_path and disk_blocks, Disk Stored events when G2 demotes, disk_cached,
// the stats' disk fields, a swap-in whose blocks come up from disk
// (from_disk) and verify in G1, disk fault injection, and a second script on
// the same directory that finds the blocks and is told of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "kvtier/script/script_runner.hpp"
#include "support/scratch_directory.hpp"

namespace kvtier::script {
namespace {

class ScriptDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<kvtier::testing::ScratchDirectory>("kvtier-script-g3");
    dir_ = scratch_->path() / "g3";
  }

  std::string init() const {
    return R"({"op":"init","backend":"native","capacity":2,"block_size":4,"host_blocks":2,"disk_blocks":8,)"
           R"("device":"host","disk_path":")" +
           dir_.string() + R"("})";
  }

  /// a's blocks 1 and 2 go G1 -> G2 -> G3 (b and then c push them down).
  std::vector<std::string> push_a_to_disk() const {
    return {init(),
            R"({"op":"use","owner":"a","blocks":[1,2]})",
            R"({"op":"write","owner":"a"})",
            R"({"op":"finalize","owner":"a","before":0,"after":8})",
            R"({"op":"deref","owner":"a","blocks":[2,1]})",
            R"({"op":"use","owner":"b","blocks":[5,6]})",
            R"({"op":"wait_offload"})",
            R"({"op":"use","owner":"b","blocks":[5,6]})",
            R"({"op":"finalize","owner":"b","before":0,"after":8})",
            R"({"op":"deref","owner":"b","blocks":[6,5]})",
            R"({"op":"use","owner":"c","blocks":[7,8]})",
            R"({"op":"wait_offload"})"};
  }

  /// Runs the lines, each answer parsed.
  static std::vector<nlohmann::json> run(ScriptRunner& runner, const std::vector<std::string>& lines) {
    std::vector<nlohmann::json> answers;
    for (const std::string& line : lines) {
      auto answer = runner.run_line(line, answers.size() + 1);
      answers.push_back(answer ? nlohmann::json::parse(answer->dump()) : nlohmann::json());
    }
    return answers;
  }

  static std::vector<std::uint64_t> disk_stored(const nlohmann::json& answer) {
    std::vector<std::uint64_t> hashes;
    for (const auto& event : answer.at("events")) {
      if (event.at("tier") != "disk" || event.at("type") != "stored") continue;
      for (const auto& block : event.at("blocks")) hashes.push_back(block.at("hash").get<std::uint64_t>());
    }
    return hashes;
  }

  std::unique_ptr<kvtier::testing::ScratchDirectory> scratch_;
  std::filesystem::path dir_;
};

TEST_F(ScriptDisk, BlocksGoDownToDiskAndComeBackVerified) {
  ScriptRunner runner;
  auto answers = run(runner, push_a_to_disk());
  for (const auto& answer : answers) ASSERT_TRUE(answer.at("ok").get<bool>()) << answer.dump();
  EXPECT_EQ(answers[0].at("disk_blocks"), 8);
  EXPECT_EQ(answers[0].at("disk_recovered"), 0);
  EXPECT_EQ(disk_stored(answers.back()), (std::vector<std::uint64_t>{2, 1}));  // demoted as G2 evicted them

  answers =
      run(runner,
          {R"({"op":"disk_cached","hashes":[1,2,5]})", R"({"op":"host_cached","hashes":[1,2,5]})", R"({"op":"stats"})",
           R"({"op":"use","owner":"c","blocks":[7,8]})", R"({"op":"finalize","owner":"c","before":0,"after":8})",
           R"({"op":"deref","owner":"c","blocks":[8,7]})", R"({"op":"swap_in","id":"s","plhs":[1,2]})",
           R"({"op":"register_swap_in","id":"s"})", R"({"op":"use","owner":"d","blocks":[1,2],"reuse":2})",
           R"({"op":"verify","owner":"d"})", R"({"op":"stats"})"});
  for (const auto& answer : answers) ASSERT_TRUE(answer.at("ok").get<bool>()) << answer.dump();
  EXPECT_EQ(answers[0].at("cached"), nlohmann::json::parse("[true,true,false]"));
  EXPECT_EQ(answers[1].at("cached"), nlohmann::json::parse("[false,false,true]"));
  EXPECT_EQ(answers[2].at("disk_used"), 2);
  EXPECT_EQ(answers[2].at("disk_blocks_written"), 2);
  EXPECT_EQ(answers[6].at("result"), "scheduled");
  EXPECT_EQ(answers[6].at("from_disk"), 2);
  EXPECT_EQ(answers[7].at("registered"), 2);
  EXPECT_EQ(answers[9].at("verified"), 2);  // the bytes a wrote, back from the file
  EXPECT_TRUE(answers[9].at("mismatches").empty());
  EXPECT_EQ(answers[10].at("disk_blocks_read"), 2);
  EXPECT_EQ(answers[10].at("disk_checksum_failures"), 0);
}

TEST_F(ScriptDisk, ASecondScriptOnTheDirectoryFindsTheBlocksAndIsToldOfThem) {
  {
    ScriptRunner first;
    (void)run(first, push_a_to_disk());
  }
  ScriptRunner second;
  const auto answers =
      run(second, {init(), R"({"op":"swap_in","id":"s","plhs":[1,2]})", R"({"op":"register_swap_in","id":"s"})",
                   R"({"op":"use","owner":"d","blocks":[1,2],"reuse":2})", R"({"op":"verify","owner":"d"})"});
  for (const auto& answer : answers) ASSERT_TRUE(answer.at("ok").get<bool>()) << answer.dump();
  EXPECT_EQ(answers[0].at("disk_recovered"), 2);
  std::vector<std::uint64_t> told = disk_stored(answers[0]);  // announced at init
  std::sort(told.begin(), told.end());
  EXPECT_EQ(told, (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(answers[1].at("from_disk"), 2);
  EXPECT_EQ(answers[4].at("verified"), 2);
  EXPECT_TRUE(answers[4].at("mismatches").empty());
}

TEST_F(ScriptDisk, AnInjectedReadFailureIsAFailedSwapInAndARemovedEvent) {
  ScriptRunner runner;
  (void)run(runner, push_a_to_disk());
  const auto answers =
      run(runner,
          {R"({"op":"use","owner":"c","blocks":[7,8]})", R"({"op":"finalize","owner":"c","before":0,"after":8})",
           R"({"op":"deref","owner":"c","blocks":[8,7]})", R"({"op":"inject_fault","disk_read":1})",
           R"({"op":"swap_in","id":"s","plhs":[1,2]})", R"({"op":"register_swap_in","id":"s"})", R"({"op":"stats"})",
           R"({"op":"inject_fault","disk_read":0})", R"({"op":"inject_fault","disk_read":1,"disk_write":1})"});
  for (std::size_t i = 0; i < 7; ++i) ASSERT_TRUE(answers[i].at("ok").get<bool>()) << answers[i].dump();
  EXPECT_EQ(answers[5].at("failed"), true);
  EXPECT_EQ(answers[5].at("registered"), 0);
  bool removed = false;
  for (const auto& event : answers[5].at("events"))
    removed |= event.at("tier") == "disk" && event.at("type") == "removed";
  EXPECT_TRUE(removed) << answers[5].dump();
  EXPECT_EQ(answers[6].at("disk_io_failures"), 1);
  EXPECT_FALSE(answers[7].at("ok").get<bool>());  // counts from 1
  EXPECT_FALSE(answers[8].at("ok").get<bool>());  // one fault a line
}

TEST_F(ScriptDisk, DiskSettingsWithoutAPathOrATierAreRefused) {
  ScriptRunner runner;
  const auto answers =
      run(runner, {R"({"op":"init","capacity":2,"block_size":4,"device":"host","host_blocks":2,"disk_blocks":8})",
                   R"({"op":"init","capacity":2,"block_size":4,"device":"host","disk_path":"/tmp/x","disk_blocks":8})",
                   R"({"op":"init","capacity":2,"block_size":4,"device":"host"})",
                   R"({"op":"disk_cached","hashes":[1]})", R"({"op":"inject_fault","disk_write":1})"});
  EXPECT_FALSE(answers[0].at("ok").get<bool>());  // disk_blocks without disk_path
  EXPECT_FALSE(answers[1].at("ok").get<bool>());  // a disk tier without G2
  EXPECT_TRUE(answers[2].at("ok").get<bool>());
  EXPECT_FALSE(answers[3].at("ok").get<bool>());
  EXPECT_FALSE(answers[4].at("ok").get<bool>());
}

}  // namespace
}  // namespace kvtier::script
