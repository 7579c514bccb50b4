// transformers 5 writes rope settings as one object, rope_parameters {rope_type, rope_theta,
// factor, ...}, where older versions wrote rope_theta and rope_scaling {type|rope_type, factor,
// ...} (transformers' modeling_rope_utils). The one reader takes either; both spellings of the
// same settings parse to the same ModelConfig, and errors name rope_parameters and the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "model/config.h"

namespace frugal::model {
namespace {

using json = nlohmann::json;
constexpr const char* kFile = "models/x/config.json";

json llama() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
    "max_position_embeddings": 256})");
}

ModelConfig parse_ok(const json& j) {
  auto r = parse_model_config(j, kFile);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string() << " in " << j.dump();
  return r.is_ok() ? *r : ModelConfig{};
}

void expect_error(const json& j, std::initializer_list<const char*> needles) {
  auto r = parse_model_config(j, kFile);
  ASSERT_FALSE(r.is_ok()) << j.dump();
  const std::string& msg = r.status().message();
  EXPECT_NE(msg.find(kFile), std::string::npos) << msg;
  for (const char* n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' in: " << msg;
}

TEST(RopeParameters, Llama3MapsOntoTheScalingFields) {
  // Llama-3.1-8B's rope settings, as transformers 5 writes them.
  json j = llama();
  j["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 8.0},
                          {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                          {"original_max_position_embeddings", 8192}};
  const ModelConfig c = parse_ok(j);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
}

TEST(RopeParameters, BothSpellingsParseTheSame) {
  const std::vector<json> scalings = {
      {{"type", "linear"}, {"factor", 4.0}},
      {{"rope_type", "dynamic"}, {"factor", 2.0}},
      {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
       {"original_max_position_embeddings", 64}},
      {{"type", "yarn"}, {"factor", 40}, {"beta_fast", 32}, {"beta_slow", 1}, {"mscale", 0.707},
       {"mscale_all_dim", 0.707}, {"original_max_position_embeddings", 4096}},
  };
  for (const json& s : scalings) {
    json old_form = llama();
    old_form["rope_theta"] = 1000000.0;
    old_form["rope_scaling"] = s;
    json new_form = llama();
    json p = s;
    p["rope_type"] = s.contains("rope_type") ? s["rope_type"] : s["type"];
    p.erase("type");
    p["rope_theta"] = 1000000.0;
    new_form["rope_parameters"] = p;
    const ModelConfig a = parse_ok(old_form), b = parse_ok(new_form);
    EXPECT_TRUE(a == b) << s.dump();
    EXPECT_NE(a.rope_scaling.type, RopeScalingType::kNone) << s.dump();
    EXPECT_DOUBLE_EQ(b.rope_theta, 1000000.0);
  }
  // Plain RoPE: rope_type "default" (or none given) carries only the theta.
  json old_form = llama();
  old_form["rope_theta"] = 500000.0;
  for (const json& p : {json{{"rope_type", "default"}, {"rope_theta", 500000.0}}, json{{"rope_theta", 500000.0}}}) {
    json new_form = llama();
    new_form["rope_parameters"] = p;
    EXPECT_TRUE(parse_ok(old_form) == parse_ok(new_form)) << p.dump();
    EXPECT_EQ(parse_ok(new_form).rope_scaling.type, RopeScalingType::kNone);
  }
}

TEST(RopeParameters, TopLevelFieldsWin) {
  json j = llama();
  j["rope_theta"] = 10000.0;
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  j["rope_parameters"] = {{"rope_type", "dynamic"}, {"rope_theta", 500000.0}, {"factor", 4.0}};
  const ModelConfig c = parse_ok(j);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 2.0);
  j["rope_scaling"] = nullptr;  // null scaling: rope_parameters' scaling applies
  EXPECT_EQ(parse_ok(j).rope_scaling.type, RopeScalingType::kDynamic);
}

TEST(RopeParameters, ErrorsNameRopeParametersAndTheField) {
  json j = llama();
  j["rope_parameters"] = "llama3";
  expect_error(j, {"rope_parameters", "object"});
  j["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 8.0}};
  expect_error(j, {"rope_parameters", "low_freq_factor"});
  j["rope_parameters"] = {{"rope_type", "longrope"}, {"factor", 4.0}};
  expect_error(j, {"rope_parameters", "rope_type", "longrope"});
  j["rope_parameters"] = {{"rope_type", "linear"}};
  expect_error(j, {"rope_parameters", "factor"});
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", -1.0}};
  expect_error(j, {"rope_parameters", "rope_theta", "positive"});
  j["rope_parameters"] = {{"rope_type", 3}};
  expect_error(j, {"rope_parameters", "rope_type", "string"});
}

TEST(RopeParameters, TheFileReaderTakesThem) {
  namespace fs = std::filesystem;
  json j = llama();
  j["rope_parameters"] = {{"rope_type", "linear"}, {"rope_theta", 20000.0}, {"factor", 4.0}};
  const fs::path dir = fs::path(::testing::TempDir()) / "rope_parameters_model";
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << j.dump();
  for (const fs::path& p : {dir, dir / "config.json"}) {
    auto r = load_model_config(p.string());
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(r->rope_scaling.type, RopeScalingType::kLinear);
    EXPECT_DOUBLE_EQ(r->rope_theta, 20000.0);
  }
  std::ofstream(dir / "config.json") << "{not json";
  auto bad = load_model_config(dir.string());
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kCorrupt);
  EXPECT_NE(bad.status().message().find("config.json"), std::string::npos);
}

}  // namespace
}  // namespace frugal::model
