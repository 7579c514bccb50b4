// generation_config.json parsing, and Qwen2 sliding-window layers.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/generation_config.h"
#include "model/model.h"
#include "model_test_util.h"
#include "ops/ref_backend.h"

namespace frugal::model {
namespace {

TEST(GenerationConfig, IdsAsIntOrList) {
  auto g = parse_generation_config(nlohmann::json::parse(R"({"bos_token_id": 1, "eos_token_id": [2, 7], "do_sample": true,
                                                             "temperature": 0.6, "top_p": 0.95, "top_k": 20})"), "g.json");
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  EXPECT_EQ(g->bos_token_ids, std::vector<int64_t>{1});
  EXPECT_EQ(g->eos_token_ids, (std::vector<int64_t>{2, 7}));
  EXPECT_TRUE(g->do_sample);
  EXPECT_DOUBLE_EQ(*g->temperature, 0.6);
  EXPECT_DOUBLE_EQ(*g->top_p, 0.95);
  EXPECT_EQ(*g->top_k, 20);
}

TEST(GenerationConfig, BadFieldsNameFileAndField) {
  auto g = parse_generation_config(nlohmann::json::parse(R"({"eos_token_id": "x"})"), "dir/generation_config.json");
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("dir/generation_config.json"), std::string::npos);
  EXPECT_NE(g.status().message().find("eos_token_id"), std::string::npos);
  auto t = parse_generation_config(nlohmann::json::parse(R"({"top_p": 1.5})"), "g.json");
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("top_p"), std::string::npos);
}

TEST(GenerationConfig, FallsBackToConfigIds) {
  const std::string dir = frugal::testing::temp_dir("gencfg");
  ModelConfig c;
  c.bos_token_ids = {5};
  c.eos_token_ids = {6, 8};
  auto g = load_generation_config(dir, c);  // no file
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ(g->bos_token_ids, std::vector<int64_t>{5});
  EXPECT_EQ(g->eos_token_ids, (std::vector<int64_t>{6, 8}));
}

// Last-row logits of `prompt` for a Qwen2 model written from `cfg` (weights seeded identically).
std::vector<float> qwen2_logits(const nlohmann::json& cfg, const std::string& name, const std::vector<int32_t>& prompt) {
  const std::string dir = frugal::testing::temp_dir(name);
  frugal::testing::write_model_dir(dir, cfg);
  auto backend = ops::make_ref_backend();
  auto m = Model::load(dir, backend.get(), {});
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  auto kv = KvStorage::create(backend.get(), (*m)->config(), {.n_blocks = 2, .block_size = 8});
  const int32_t n = static_cast<int32_t>(prompt.size());
  std::vector<int32_t> pos;
  for (int32_t i = 0; i < n; ++i) pos.push_back(i);
  const std::vector<int32_t> q_start = {0, n}, ctx = {n}, table = {0, 1}, rows = {n - 1};
  std::vector<float> logits(32);
  EXPECT_TRUE((*m)->forward({.tokens = prompt, .positions = pos, .q_start = q_start, .ctx_len = ctx,
                             .block_tables = table, .max_blocks_per_seq = 2, .slot_mapping = pos,
                             .logits_rows = rows}, **kv, logits.data()).is_ok());
  return logits;
}

TEST(SlidingWindow, AppliesFromMaxWindowLayersOn) {
  auto cfg = frugal::testing::tiny_llama_config();
  cfg["architectures"] = {"Qwen2ForCausalLM"};
  cfg["model_type"] = "qwen2";
  auto windowed = cfg;
  windowed["use_sliding_window"] = true;
  windowed["sliding_window"] = 3;
  windowed["max_window_layers"] = 1;  // layer 0 full, layer 1 windowed
  const std::vector<int32_t> short_prompt = {1, 4, 9}, long_prompt = {1, 4, 9, 16, 25, 6, 7};
  // Within the window nothing changes; past it layer 1 sees fewer tokens.
  EXPECT_EQ(qwen2_logits(cfg, "sw_full_s", short_prompt), qwen2_logits(windowed, "sw_win_s", short_prompt));
  EXPECT_NE(qwen2_logits(cfg, "sw_full_l", long_prompt), qwen2_logits(windowed, "sw_win_l", long_prompt));
  // All layers full (max_window_layers = num_hidden_layers): same as no window.
  auto none = windowed;
  none["max_window_layers"] = 2;
  EXPECT_EQ(qwen2_logits(cfg, "sw_full_l2", long_prompt), qwen2_logits(none, "sw_none_l", long_prompt));
}

}  // namespace
}  // namespace frugal::model
