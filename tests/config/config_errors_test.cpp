// Bad config.json contents: each error names the file and the field, and never crashes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/config.h"

namespace frugal::model {
namespace {

using json = nlohmann::json;
constexpr const char* kFile = "models/x/config.json";

json llama() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
    "max_position_embeddings": 256, "bos_token_id": 1, "eos_token_id": [2, 3]})");
}

json deepseek() {
  return json::parse(R"({
    "architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 3, "num_attention_heads": 4, "vocab_size": 100,
    "max_position_embeddings": 256, "kv_lora_rank": 32, "q_lora_rank": 48,
    "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
    "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
    "n_group": 2, "topk_group": 1, "first_k_dense_replace": 1})");
}

// Parses `j` and expects an error whose message names the file and every needle.
void expect_error(const json& j, std::initializer_list<const char*> needles) {
  auto r = parse_model_config(j, kFile);
  ASSERT_FALSE(r.is_ok()) << j.dump();
  const std::string& msg = r.status().message();
  EXPECT_NE(msg.find(kFile), std::string::npos) << msg;
  for (const char* n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' in: " << msg;
}

TEST(ConfigErrorsTest, BaseConfigsAreValid) {
  auto r = parse_model_config(llama(), kFile);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->head_dim, 16);
  EXPECT_EQ(r->eos_token_ids, (std::vector<int64_t>{2, 3}));
  auto d = parse_model_config(deepseek(), kFile);
  ASSERT_TRUE(d.is_ok()) << d.status().to_string();
  EXPECT_EQ(d->num_key_value_heads, 4);  // defaults to num_attention_heads
  EXPECT_EQ(d->head_dim, 24);            // MLA: nope + rope
}

TEST(ConfigErrorsTest, UnknownArchitectureListsSupported) {
  json j = llama();
  j["architectures"] = {"MistralForCausalLM"};
  auto r = parse_model_config(j, kFile);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnsupported);
  for (const char* n : {"architectures", "MistralForCausalLM", "LlamaForCausalLM", "Qwen2ForCausalLM",
                        "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM"}) {
    EXPECT_NE(r.status().message().find(n), std::string::npos) << n;
  }
  j.erase("architectures");
  expect_error(j, {"architectures"});
  j["architectures"] = "LlamaForCausalLM";  // a string, not a list
  expect_error(j, {"architectures", "list"});
}

TEST(ConfigErrorsTest, MissingRequiredField) {
  for (const char* field : {"hidden_size", "vocab_size", "intermediate_size", "num_hidden_layers",
                            "num_attention_heads", "max_position_embeddings"}) {
    json j = llama();
    j.erase(field);
    expect_error(j, {field, "missing", "integer"});
  }
}

TEST(ConfigErrorsTest, WrongJsonType) {
  json j = llama();
  j["hidden_size"] = "64";
  expect_error(j, {"hidden_size", "expected an integer", "got string"});
  j = llama();
  j["num_hidden_layers"] = 2.5;
  expect_error(j, {"num_hidden_layers", "integer", "got number"});
  j = llama();
  j["tie_word_embeddings"] = "false";
  expect_error(j, {"tie_word_embeddings", "boolean"});
  j = llama();
  j["rope_theta"] = "1e4";
  expect_error(j, {"rope_theta", "number"});
  j = llama();
  j["eos_token_id"] = "2";
  expect_error(j, {"eos_token_id", "integer"});
  j = llama();
  j["bos_token_id"] = {1, "x"};
  expect_error(j, {"bos_token_id"});
}

TEST(ConfigErrorsTest, NonPositiveSizes) {
  json j = llama();
  j["hidden_size"] = 0;
  expect_error(j, {"hidden_size", "positive"});
  j = llama();
  j["vocab_size"] = -5;
  expect_error(j, {"vocab_size", "positive", "-5"});
}

TEST(ConfigErrorsTest, HeadDivisibility) {
  json j = llama();
  j["num_attention_heads"] = 5;  // 64 % 5 != 0, and 5 % 2 != 0
  j["num_key_value_heads"] = 5;
  expect_error(j, {"hidden_size", "num_attention_heads", "head_dim"});
  j["head_dim"] = 16;  // explicit head_dim lifts the hidden_size rule
  EXPECT_TRUE(parse_model_config(j, kFile).is_ok());
  j = llama();
  j["num_key_value_heads"] = 3;
  expect_error(j, {"num_key_value_heads", "multiple"});
}

TEST(ConfigErrorsTest, KvHeadsDefaultToAttentionHeads) {
  json j = llama();
  j.erase("num_key_value_heads");
  auto r = parse_model_config(j, kFile);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->num_key_value_heads, 4);
}

TEST(ConfigErrorsTest, RopeScaling) {
  json j = llama();
  j["rope_scaling"] = nullptr;
  EXPECT_EQ(parse_model_config(j, kFile)->rope_scaling.type, RopeScalingType::kNone);
  j["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_EQ(parse_model_config(j, kFile)->rope_scaling.type, RopeScalingType::kNone);
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2}};
  auto r = parse_model_config(j, kFile);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_DOUBLE_EQ(r->rope_scaling.factor, 2.0);
  j["rope_scaling"] = {{"type", "dynamic"}, {"factor", 4.0}};
  EXPECT_EQ(parse_model_config(j, kFile)->rope_scaling.type, RopeScalingType::kDynamic);
  j["rope_scaling"] = {{"rope_type", "longrope"}, {"factor", 4.0}};
  r = parse_model_config(j, kFile);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnsupported);
  expect_error(j, {"rope_scaling", "rope_type", "longrope"});
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0}};
  expect_error(j, {"rope_scaling", "original_max_position_embeddings", "missing"});
  j["rope_scaling"] = {{"rope_type", "linear"}};
  expect_error(j, {"rope_scaling", "factor"});
  j["rope_scaling"] = {{"factor", 2.0}};
  expect_error(j, {"rope_scaling", "type"});
  j["rope_scaling"] = "llama3";
  expect_error(j, {"rope_scaling", "object"});
}

TEST(ConfigErrorsTest, Qwen2BiasAndTying) {
  json j = llama();
  j["architectures"] = {"Qwen2ForCausalLM"};
  j.erase("model_type");
  auto r = parse_model_config(j, kFile);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->model_type, "qwen2");
  EXPECT_TRUE(r->attention_bias);
  EXPECT_FALSE(r->tie_word_embeddings);
  j["tie_word_embeddings"] = true;
  EXPECT_TRUE(parse_model_config(j, kFile)->tie_word_embeddings);
}

TEST(ConfigErrorsTest, Dtype) {
  json j = llama();
  j["torch_dtype"] = "float16";
  EXPECT_EQ(parse_model_config(j, kFile)->torch_dtype, DType::kF16);
  j.erase("torch_dtype");
  j["dtype"] = "float32";
  EXPECT_EQ(parse_model_config(j, kFile)->torch_dtype, DType::kF32);
  j["dtype"] = "int3";
  expect_error(j, {"dtype", "int3"});
}

TEST(ConfigErrorsTest, DeepSeekFields) {
  json j = deepseek();
  j.erase("kv_lora_rank");
  expect_error(j, {"kv_lora_rank", "missing"});
  j = deepseek();
  j["num_experts_per_tok"] = 9;
  expect_error(j, {"num_experts_per_tok", "n_routed_experts"});
  j = deepseek();
  j.erase("moe_intermediate_size");
  expect_error(j, {"moe_intermediate_size"});
  j = deepseek();
  j["scoring_func"] = "relu";
  expect_error(j, {"scoring_func", "relu"});
  j = deepseek();
  j["n_group"] = 3;
  expect_error(j, {"n_group"});
  j = deepseek();
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 40}};
  expect_error(j, {"rope_scaling", "original_max_position_embeddings"});
  j = deepseek();
  j["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {128, "x"}}};
  expect_error(j, {"quantization_config", "weight_block_size"});
}

TEST(ConfigErrorsTest, NotAnObjectAndMissingFile) {
  expect_error(json::array(), {"object"});
  auto r = load_model_config("/nonexistent/dir/config.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("/nonexistent/dir/config.json"), std::string::npos);
}

}  // namespace
}  // namespace frugal::model
