// A script's KV cache groups (model-geometry.md section 7): every impossible
// `groups` refused at init with a message that names it — KVBM, a field a kind
// needs, an unknown mode, a page format that cannot be, an offload tier —
// and the runner left uninitialized; a manager without groups answers as before.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "kvtier/script/script_runner.hpp"

namespace kvtier::script {
namespace {

constexpr const char* kInit = R"({"op":"init","capacity":8,"block_size":16,"device":"host",)";

TEST(ScriptGroups, ImpossibleGroupsAreRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {R"("backend":"kvbm","groups":[{"kind":"full_attention"},{"kind":"sliding_window","sliding_window":32}]})",
       "KVBM backend has no KV cache groups"},
      {R"("groups":[{"kind":"full_attention"},{"kind":"sliding_window"}]})", "sliding_window"},
      {R"("groups":[{"kind":"full_attention"},{"kind":"mamba","mamba_mode":"sometimes","layout":{"state_bytes":64}}]})",
       "sometimes"},
      {R"("groups":[{"kind":"full_attention","mamba_mode":"align"}]})", "mamba_mode is for mamba groups"},
      {R"("groups":[{"kind":"cross_attention"}]})", "cross_attention"},
      {R"("groups":[{"kind":"full_attention","layout":{"quant":"nvfp5"}}]})",
       "group 0: layout: unknown KV cache quantization"},
      {R"("groups":[{"kind":"full_attention","layout":{"head_dim":72,"quant":"nvfp4"}}]})", "multiples of 16"},
      {R"("groups":[{"kind":"mla_attention","layout":{"latent_dim":500,"format":"fp8_ds_mla"}}]})", "multiple of 128"},
      {R"("groups":[{"kind":"mla_attention","layout":{"latent_dim":512,"format":"int8_per_token_head"}}]})",
       "not int8_per_token_head"},
      {R"("groups":[{"kind":"mamba","layout":{"state_bytes":64,"conv_state_bytes":65}}]})", "conv_state_bytes"},
      {R"("groups":[{"kind":"mamba"}]})", "state_bytes"},
      {R"("groups":[]})", "non-empty list"},
      {R"("groups":[{"kind":"full_attention","block_size":32}]})", "give them equal"},
  };
  for (const auto& [fields, message] : cases) {
    ScriptRunner runner;
    const auto answer = runner.run_line(kInit + fields, 1);
    ASSERT_TRUE(answer);
    EXPECT_FALSE(answer->at("ok").get<bool>()) << fields;
    EXPECT_NE(answer->at("error").get<std::string>().find(message), std::string::npos)
        << fields << " -> " << answer->at("error").get<std::string>();
    EXPECT_FALSE(runner.initialized()) << fields;
  }
}

TEST(ScriptGroups, OneFullAttentionGroupIsTodaysManager) {
  ScriptRunner with_group;
  ScriptRunner without;
  const auto grouped = with_group.run_line(std::string(kInit) + R"("groups":[{"kind":"full_attention"}]})", 1);
  ASSERT_TRUE(grouped && grouped->at("ok").get<bool>());
  EXPECT_EQ(grouped->at("groups").size(), 1U);
  EXPECT_FALSE(grouped->contains("error"));
  ASSERT_TRUE(without.run_line(std::string(kInit) + R"("seed":1})", 1));
  // The same signals, the same answers: no null page, no refusal.
  for (const char* line :
       {R"({"op":"use","owner":"a","blocks":[7,8],"local_hashes":[107,108]})",
        R"({"op":"finalize","owner":"a","before":0,"after":32})", R"({"op":"block_table","owner":"a"})"}) {
    EXPECT_EQ(*with_group.run_line(line, 2), *without.run_line(line, 2)) << line;
  }
}

TEST(ScriptGroups, QuantizedAndMlaPagesCountTheirScales) {
  ScriptRunner runner;
  // NVFP4 K/V at 8 heads x 128, block 16: 16 x 8 x (64 + 8) bytes a side; an fp8_ds_mla latent: 656 bytes a token.
  const auto answer = runner.run_line(
      std::string(kInit) +
          R"("groups":[{"kind":"full_attention","layout":{"kv_heads":8,"head_dim":128,"quant":"nvfp4"}},)"
          R"({"kind":"mla_attention","layout":{"latent_dim":512,"rope_dim":64,"format":"fp8_ds_mla"}}]})",
      1);
  ASSERT_TRUE(answer && answer->at("ok").get<bool>()) << answer->dump();
  EXPECT_EQ(answer->at("groups")[0].at("page_bytes").get<std::uint64_t>(), 18432U);
  EXPECT_EQ(answer->at("groups")[1].at("page_bytes").get<std::uint64_t>(), 16U * 656);
  EXPECT_EQ(answer->at("groups")[1].at("padded_page_bytes").get<std::uint64_t>(), 18432U);
}

}  // namespace
}  // namespace kvtier::script
