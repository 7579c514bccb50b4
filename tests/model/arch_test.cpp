// The arch table and tensor_specs: parameter counts against published model sizes and the
// llama2.c checkpoint, and the tensor names HF checkpoints use.
#include <algorithm>
#include <set>

#include <gtest/gtest.h>

#include "model/arch.h"
#include "model/model.h"
#include "test_paths.h"

namespace frugal::model {
namespace {

ModelConfig config_of(const std::string& path) {
  auto c = load_model_config(path);
  EXPECT_TRUE(c.is_ok()) << c.status().to_string();
  return c.is_ok() ? *c : ModelConfig{};
}

std::string shared_config(const std::string& name) {
  return frugal::testing::shared_data_dir() + "/configs/" + name;
}

bool has(const std::vector<TensorSpec>& specs, const std::string& name) {
  return std::any_of(specs.begin(), specs.end(), [&](const TensorSpec& s) { return s.name == name; });
}

TEST(Arch, TableIsConsistent) {
  std::set<std::string_view> seen;
  for (const auto& a : all_archs()) {
    EXPECT_TRUE(seen.insert(a.hf_class).second) << a.hf_class;
    EXPECT_EQ(find_arch(a.hf_class), &a);
    EXPECT_FALSE(a.patterns.empty());
  }
  EXPECT_TRUE(find_arch("LlamaForCausalLM")->runnable);
  EXPECT_TRUE(find_arch("Qwen2ForCausalLM")->runnable);
  EXPECT_TRUE(find_arch("DeepseekV2ForCausalLM")->runnable);
  EXPECT_TRUE(find_arch("DeepseekV3ForCausalLM")->runnable);
  EXPECT_EQ(find_arch("GPT2LMHeadModel"), nullptr);
}

// Families bind weights by slot: each slot names at most one pattern per arch, and the name
// tensor_name gives is the pattern's, with the layer / expert index filled in.
TEST(Arch, SlotsNameOnePatternEach) {
  for (const auto& a : all_archs()) {
    std::set<TensorSlot> seen;
    for (const auto& p : a.patterns) {
      EXPECT_TRUE(seen.insert(p.slot).second) << a.hf_class << ": " << p.name;
      std::string want(p.name);
      if (auto i = want.find("{i}"); i != std::string::npos) want.replace(i, 3, "7");
      if (auto e = want.find("{e}"); e != std::string::npos) want.replace(e, 3, "2");
      EXPECT_EQ(tensor_name(a, p.slot, 7, 2), want);
    }
  }
  const ArchInfo& llama = *find_arch("LlamaForCausalLM");
  EXPECT_EQ(tensor_name(llama, TensorSlot::kAttnQ, 3), "model.layers.3.self_attn.q_proj.weight");
  EXPECT_EQ(tensor_name(llama, TensorSlot::kOutput), "lm_head.weight");
  EXPECT_EQ(tensor_name(llama, TensorSlot::kAttnKvB, 0), "");  // an MLA slot: not in the Llama table
}

TEST(Arch, Stories260KMatchesTheLlama2cCheckpoint) {
  // llama2.c file: 28-byte header, then float32 weights plus freq_cis (seq_len * head_dim
  // floats) that HF does not store: (1056540 - 28) / 4 - 512 * 8 = 260032 parameters.
  const auto c = config_of(frugal::testing::source_root() + "/models/stories260K/config.json");
  const auto specs = tensor_specs(c);
  EXPECT_EQ(total_params(specs), (1056540 - 28) / 4 - 512 * 8);
  EXPECT_EQ(specs.size(), 1u + 5u * 9u + 1u);
  EXPECT_FALSE(has(specs, "lm_head.weight"));  // tied
  EXPECT_TRUE(has(specs, "model.layers.4.mlp.down_proj.weight"));
}

TEST(Arch, DistillQwen7BParameterCount) {
  // Published: 7.62 B parameters (docs/PERFORMANCE.md; Qwen2-7B architecture, untied).
  const auto specs = tensor_specs(config_of(shared_config("deepseek-r1-distill-qwen-7b.json")));
  EXPECT_NEAR(static_cast<double>(total_params(specs)), 7.62e9, 0.01e9);
  EXPECT_TRUE(has(specs, "model.layers.27.self_attn.q_proj.bias"));
  EXPECT_TRUE(has(specs, "model.layers.27.self_attn.v_proj.bias"));
  EXPECT_FALSE(has(specs, "model.layers.0.self_attn.o_proj.bias"));
  EXPECT_TRUE(has(specs, "lm_head.weight"));
}

TEST(Arch, Qwen25HalfBParameterCount) {
  // Published: Qwen2.5-0.5B has 0.49 B parameters (tied embeddings).
  const auto specs = tensor_specs(config_of(shared_config("qwen2.5-0.5b-instruct.json")));
  EXPECT_NEAR(static_cast<double>(total_params(specs)), 0.494e9, 0.002e9);
  EXPECT_FALSE(has(specs, "lm_head.weight"));
}

TEST(Arch, DeepseekV3ParameterCountAndNames) {
  // Published: 671 B total parameters in the main model (685 B with the MTP module, which
  // transformers does not load).
  const auto c = config_of(shared_config("deepseek-v3.json"));
  const auto specs = tensor_specs(c);
  EXPECT_NEAR(static_cast<double>(total_params(specs)), 671e9, 3e9);
  EXPECT_TRUE(has(specs, "model.layers.0.mlp.gate_proj.weight"));  // first_k_dense_replace = 3
  EXPECT_FALSE(has(specs, "model.layers.3.mlp.gate_proj.weight"));
  EXPECT_TRUE(has(specs, "model.layers.3.mlp.gate.weight"));
  EXPECT_TRUE(has(specs, "model.layers.3.mlp.gate.e_score_correction_bias"));
  EXPECT_TRUE(has(specs, "model.layers.3.mlp.experts.255.down_proj.weight"));
  EXPECT_TRUE(has(specs, "model.layers.60.mlp.shared_experts.up_proj.weight"));
  EXPECT_TRUE(has(specs, "model.layers.0.self_attn.q_a_proj.weight"));
  EXPECT_TRUE(has(specs, "model.layers.0.self_attn.q_a_layernorm.weight"));
  EXPECT_TRUE(has(specs, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight"));
  EXPECT_TRUE(has(specs, "model.layers.0.self_attn.kv_b_proj.weight"));
  EXPECT_FALSE(has(specs, "model.layers.0.self_attn.q_proj.weight"));
}

TEST(Arch, DeepseekV2LiteParameterCount) {
  // Published: DeepSeek-V2-Lite has 15.7 B total parameters; q_proj is a plain linear.
  const auto specs = tensor_specs(config_of(shared_config("deepseek-v2-lite.json")));
  EXPECT_NEAR(static_cast<double>(total_params(specs)), 15.7e9, 0.2e9);
  EXPECT_TRUE(has(specs, "model.layers.0.self_attn.q_proj.weight"));
  EXPECT_FALSE(has(specs, "model.layers.1.mlp.gate.e_score_correction_bias"));
  EXPECT_TRUE(has(specs, "model.layers.1.mlp.experts.63.gate_proj.weight"));
}

TEST(Arch, DeepseekV2ParameterCount) {
  // Published: DeepSeek-V2 has 236 B total parameters.
  const auto specs = tensor_specs(config_of(shared_config("deepseek-v2.json")));
  EXPECT_NEAR(static_cast<double>(total_params(specs)), 236e9, 2.5e9);
}

}  // namespace
}  // namespace frugal::model
