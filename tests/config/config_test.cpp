// Every config in tests/data/shared/configs parses to the values of the published architectures.
// Expected numbers come from the model cards / papers, not from our parser's output.
#include <gtest/gtest.h>

#include <filesystem>

#include "model/config.h"
#include "test_paths.h"

namespace frugal::model {
namespace {

ModelConfig load(const std::string& name) {
  auto r = load_model_config(testing::shared_data_dir() + "/configs/" + name + ".json");
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? *r : ModelConfig{};
}

TEST(ConfigTest, EveryFileInSharedConfigsParses) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(testing::shared_data_dir() + "/configs")) {
    if (e.path().extension() != ".json") continue;
    auto r = load_model_config(e.path().string());
    EXPECT_TRUE(r.is_ok()) << e.path() << ": " << r.status().to_string();
    ++n;
  }
  EXPECT_GE(n, 12);
}

TEST(ConfigTest, DistillQwen7B) {
  ModelConfig c = load("deepseek-r1-distill-qwen-7b");
  EXPECT_EQ(c.architecture, "Qwen2ForCausalLM");
  EXPECT_EQ(c.model_type, "qwen2");
  EXPECT_EQ(c.hidden_size, 3584);
  EXPECT_EQ(c.num_hidden_layers, 28);
  EXPECT_EQ(c.num_attention_heads, 28);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.vocab_size, 152064);
  EXPECT_EQ(c.intermediate_size, 18944);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_TRUE(c.attention_bias);  // Qwen2: q/k/v biases though config.json does not say
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.use_sliding_window);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kNone);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.torch_dtype, DType::kBF16);
  EXPECT_EQ(c.bos_token_ids, std::vector<int64_t>{151643});
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{151643});
  EXPECT_FALSE(c.is_moe());
  EXPECT_FALSE(c.is_mla());
}

TEST(ConfigTest, DistillQwen1_5B) {
  ModelConfig c = load("deepseek-r1-distill-qwen-1.5b");
  EXPECT_EQ(c.hidden_size, 1536);
  EXPECT_EQ(c.num_hidden_layers, 28);
  EXPECT_EQ(c.num_attention_heads, 12);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.intermediate_size, 8960);
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_FALSE(c.tie_word_embeddings);
}

TEST(ConfigTest, DistillQwen14BAnd32B) {
  ModelConfig c14 = load("deepseek-r1-distill-qwen-14b");
  EXPECT_EQ(c14.hidden_size, 5120);
  EXPECT_EQ(c14.num_hidden_layers, 48);
  EXPECT_EQ(c14.num_attention_heads, 40);
  EXPECT_EQ(c14.num_key_value_heads, 8);
  EXPECT_EQ(c14.intermediate_size, 13824);
  EXPECT_DOUBLE_EQ(c14.rope_theta, 1e6);
  EXPECT_EQ(c14.bos_token_ids, std::vector<int64_t>{151646});
  ModelConfig c32 = load("deepseek-r1-distill-qwen-32b");
  EXPECT_EQ(c32.num_hidden_layers, 64);
  EXPECT_EQ(c32.intermediate_size, 27648);
  EXPECT_EQ(c32.head_dim, 128);
}

TEST(ConfigTest, Qwen25HalfBTiesEmbeddings) {
  ModelConfig c = load("qwen2.5-0.5b-instruct");
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.head_dim, 64);  // 896 / 14
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{151645});
}

TEST(ConfigTest, DistillLlama8BUsesLlama3Rope) {
  ModelConfig c = load("deepseek-r1-distill-llama-8b");
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_hidden_layers, 32);
  EXPECT_EQ(c.num_attention_heads, 32);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.intermediate_size, 14336);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
}

TEST(ConfigTest, DistillLlama70BAndLlm67B) {
  ModelConfig c = load("deepseek-r1-distill-llama-70b");
  EXPECT_EQ(c.hidden_size, 8192);
  EXPECT_EQ(c.num_hidden_layers, 80);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.intermediate_size, 28672);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kLlama3);
  ModelConfig l = load("deepseek-llm-67b");
  EXPECT_EQ(l.num_hidden_layers, 95);  // DeepSeek LLM paper, table 2
  EXPECT_EQ(l.num_attention_heads, 64);
  EXPECT_EQ(l.num_key_value_heads, 8);
  EXPECT_EQ(l.vocab_size, 102400);
  EXPECT_EQ(l.max_position_embeddings, 4096);
}

TEST(ConfigTest, DeepSeekV3MlaAndMoe) {
  for (const char* name : {"deepseek-v3", "deepseek-r1"}) {
    ModelConfig c = load(name);
    EXPECT_EQ(c.architecture, "DeepseekV3ForCausalLM") << name;
    EXPECT_EQ(c.num_hidden_layers, 61);
    EXPECT_EQ(c.hidden_size, 7168);
    EXPECT_TRUE(c.is_mla());
    EXPECT_EQ(c.mla.q_lora_rank, 1536);
    EXPECT_EQ(c.mla.kv_lora_rank, 512);
    EXPECT_EQ(c.mla.qk_nope_head_dim, 128);
    EXPECT_EQ(c.mla.qk_rope_head_dim, 64);
    EXPECT_EQ(c.mla.v_head_dim, 128);
    EXPECT_EQ(c.head_dim, 192);
    EXPECT_TRUE(c.is_moe());
    EXPECT_EQ(c.moe.n_routed_experts, 256);
    EXPECT_EQ(c.moe.n_shared_experts, 1);
    EXPECT_EQ(c.moe.num_experts_per_tok, 8);
    EXPECT_EQ(c.moe.moe_intermediate_size, 2048);
    EXPECT_EQ(c.moe.first_k_dense_replace, 3);
    EXPECT_EQ(c.moe.n_group, 8);
    EXPECT_EQ(c.moe.topk_group, 4);
    EXPECT_EQ(c.moe.scoring_func, "sigmoid");
    EXPECT_EQ(c.moe.topk_method, "noaux_tc");
    EXPECT_TRUE(c.moe.norm_topk_prob);
    EXPECT_DOUBLE_EQ(c.moe.routed_scaling_factor, 2.5);
    EXPECT_EQ(c.moe.num_nextn_predict_layers, 1);
    EXPECT_EQ(c.rope_scaling.type, RopeScalingType::kYarn);
    EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 40.0);
    EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 4096);
    EXPECT_DOUBLE_EQ(c.rope_scaling.mscale_all_dim, 1.0);
    EXPECT_EQ(c.quantization.quant_method, "fp8");
    EXPECT_EQ(c.quantization.weight_block_size, (std::vector<int64_t>{128, 128}));
    EXPECT_EQ(c.bos_token_ids, std::vector<int64_t>{0});
  }
}

TEST(ConfigTest, DeepSeekV2AndLite) {
  ModelConfig v2 = load("deepseek-v2");
  EXPECT_EQ(v2.architecture, "DeepseekV2ForCausalLM");
  EXPECT_EQ(v2.num_hidden_layers, 60);
  EXPECT_EQ(v2.moe.n_routed_experts, 160);
  EXPECT_EQ(v2.moe.n_shared_experts, 2);
  EXPECT_EQ(v2.moe.num_experts_per_tok, 6);
  EXPECT_EQ(v2.moe.scoring_func, "softmax");
  EXPECT_DOUBLE_EQ(v2.moe.routed_scaling_factor, 16.0);
  EXPECT_EQ(v2.quantization.quant_method, "");
  ModelConfig lite = load("deepseek-v2-lite");
  EXPECT_EQ(lite.mla.q_lora_rank, 0);  // null in config.json: plain q_proj
  EXPECT_EQ(lite.mla.kv_lora_rank, 512);
  EXPECT_EQ(lite.num_hidden_layers, 27);
  EXPECT_EQ(lite.moe.n_routed_experts, 64);
  EXPECT_EQ(lite.moe.first_k_dense_replace, 1);
  EXPECT_DOUBLE_EQ(lite.rope_scaling.mscale, 0.707);
}

TEST(ConfigTest, LoadsFromModelDirectory) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "frugal_config_dir_test";
  fs::create_directories(dir);
  fs::copy_file(testing::shared_data_dir() + "/configs/deepseek-r1-distill-qwen-1.5b.json",
                dir / "config.json", fs::copy_options::overwrite_existing);
  auto r = load_model_config(dir.string());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->hidden_size, 1536);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace frugal::model
