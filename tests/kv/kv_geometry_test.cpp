// kv::kv_geometry against sizes worked out by hand from the published configs' fields
// (comments show the sums): GQA heads split over tensor-parallel ranks, MLA latents replicated.
#include "kv/kv_geometry.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace frugal::kv {
namespace {

using nlohmann::json;

// Llama-3-8B's shape (meta-llama/Meta-Llama-3-8B config.json): 32 layers, 32 heads of 128, 8 KV heads.
model::ModelConfig llama3_8b() {
  json j = {{"architectures", {"LlamaForCausalLM"}}, {"vocab_size", 128256}, {"hidden_size", 4096},
            {"intermediate_size", 14336}, {"num_hidden_layers", 32}, {"num_attention_heads", 32},
            {"num_key_value_heads", 8}, {"max_position_embeddings", 8192}};
  auto c = model::parse_model_config(j, "llama3-8b.json");
  EXPECT_TRUE(c.is_ok()) << c.status().to_string();
  return c.is_ok() ? *c : model::ModelConfig{};
}

// DeepSeek-V2-Lite's attention (deepseek-ai/DeepSeek-V2-Lite config.json): 27 layers,
// kv_lora_rank 512, qk_rope_head_dim 64, 16 heads (which an MLA cache does not store).
model::ModelConfig deepseek_v2_lite() {
  json j = {{"architectures", {"DeepseekV2ForCausalLM"}}, {"vocab_size", 102400}, {"hidden_size", 2048},
            {"intermediate_size", 10944}, {"num_hidden_layers", 27}, {"num_attention_heads", 16},
            {"num_key_value_heads", 16}, {"max_position_embeddings", 163840}, {"kv_lora_rank", 512},
            {"q_lora_rank", nullptr}, {"qk_nope_head_dim", 128}, {"qk_rope_head_dim", 64},
            {"v_head_dim", 128}};
  auto c = model::parse_model_config(j, "deepseek-v2-lite.json");
  EXPECT_TRUE(c.is_ok()) << c.status().to_string();
  return c.is_ok() ? *c : model::ModelConfig{};
}

TEST(KvGeometry, GqaOneRank) {
  const KvGeometry g = kv_geometry(llama3_8b(), {}, {.dtype = DType::kBF16, .block_size = 16});
  ASSERT_TRUE(validate(g).is_ok());
  EXPECT_EQ(g.kind, KvKind::kGqa);
  EXPECT_EQ(g.n_layers, 32);
  EXPECT_EQ(g.n_head_kv, 8);
  EXPECT_EQ(g.head_dim_k, 128);
  EXPECT_EQ(g.block_size, 16);
  EXPECT_EQ(bytes_per_token(g), 131072);  // 2 (K, V) * 8 heads * 128 * 2 bytes * 32 layers
  EXPECT_EQ(bytes_per_token(kv_geometry(llama3_8b(), {}, {.dtype = DType::kF32})), 262144);
}

TEST(KvGeometry, GqaHeadsSplitOverRanksAndReplicatedPastThem) {
  const auto bpt = [](int tp) {
    return bytes_per_token(kv_geometry(llama3_8b(), {.tensor_parallel = tp}, {.dtype = DType::kBF16}));
  };
  EXPECT_EQ(bpt(2), 65536);   // 4 heads per rank: 2 * 4 * 128 * 2 * 32
  EXPECT_EQ(bpt(8), 16384);   // 1 head per rank
  EXPECT_EQ(bpt(16), 16384);  // 16 ranks > 8 heads: each rank holds a replica of one head
  EXPECT_EQ(bpt(3), 49152);   // ceil(8 / 3) = 3 heads on the fullest rank: 2 * 3 * 128 * 2 * 32
}

TEST(KvGeometry, MlaLatentReplicatedOnEveryRank) {
  for (int tp : {1, 2, 8}) {
    const KvGeometry g = kv_geometry(deepseek_v2_lite(), {.tensor_parallel = tp}, {.dtype = DType::kBF16});
    ASSERT_TRUE(validate(g).is_ok());
    EXPECT_EQ(g.kind, KvKind::kMla);
    EXPECT_EQ(g.latent_dim, 512);
    EXPECT_EQ(g.rope_dim, 64);
    EXPECT_EQ(bytes_per_token_per_layer(g), 1152);  // (512 + 64) * 2 bytes
    EXPECT_EQ(bytes_per_token(g), 31104) << "tp " << tp;  // 1152 * 27 layers
  }
}

TEST(KvGeometry, KvDtypesGoThroughKvLayout) {
  // fp8: 1 byte, per-layer scalar scales; int8: 1 byte + an f32 scale per (token, head) for K and V.
  EXPECT_EQ(bytes_per_token(kv_geometry(llama3_8b(), {}, {.dtype = DType::kF8E4M3})), 65536);
  EXPECT_EQ(bytes_per_token(kv_geometry(llama3_8b(), {}, {.dtype = DType::kI8})), 67584);  // (2048 + 2 * 8 * 4) * 32
  // MLA int8: 576 bytes + one f32 scale per token and layer.
  EXPECT_EQ(bytes_per_token(kv_geometry(deepseek_v2_lite(), {}, {.dtype = DType::kI8})), 15660);  // 580 * 27
}

TEST(KvGeometry, KvDtypeNames) {
  EXPECT_EQ(*parse_kv_dtype("bf16"), DType::kBF16);
  EXPECT_EQ(*parse_kv_dtype("fp8"), DType::kF8E4M3);
  EXPECT_EQ(*parse_kv_dtype("int8"), DType::kI8);
  auto bad = parse_kv_dtype("fp4");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("'fp4'"), std::string::npos) << bad.status().message();
  EXPECT_STREQ(kv_dtype_label(DType::kF8E4M3), "fp8");
  EXPECT_STREQ(kv_dtype_label(DType::kI8), "int8");
}

}  // namespace
}  // namespace frugal::kv
