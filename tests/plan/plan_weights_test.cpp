// Weight bytes per precision against hand arithmetic, and parameter totals against the
// published counts and the architecture's own formula.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "plan_test_util.h"
#include "plan/weights.h"

namespace frugal::plan {
namespace {

using testing_util::model;

// Tiny Llama: 1 layer, hidden 256, intermediate 512, 4 heads x 64, vocab 1000.
model::ModelConfig tiny() {
  auto j = nlohmann::json::parse(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 256,
    "intermediate_size": 512, "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 1000,
    "max_position_embeddings": 128})");
  auto c = model::parse_model_config(j, "tiny.json");
  EXPECT_TRUE(c.is_ok()) << c.status().to_string();
  return *c;
}

int64_t bytes(const model::ModelConfig& c, QuantOptions q) {
  auto s = summarize_weights(c, q);
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  return s.is_ok() ? s->total_bytes : -1;
}

// Linear tensors: q/k/v/o 256x256 (x4), gate/up 512x256 (x2), down 256x512. The rest (bf16):
// embedding + lm_head 2 x 1000 x 256 x 2 B = 1,024,000; three norms 3 x 256 x 2 B = 1,536.
constexpr int64_t kBf16Rest = 1024000 + 1536;

TEST(PlanWeightsTest, Bf16IsTwoBytesPerParameter) {
  // params = 512,000 (embeddings) + 768 (norms) + 4 x 65,536 + 3 x 131,072 = 1,168,128
  EXPECT_EQ(bytes(tiny(), {.precision = WeightPrecision::kBf16}), 2 * 1168128);
}

// Quantized linears count the engine's own format (ops/weight_format.h): codes (rows padded
// to 32 inputs; every size here is a multiple), f32 scales, f32 offsets for int4 zero points.
TEST(PlanWeightsTest, Int8PerChannel) {
  // rows x cols + rows x 4 B: 4 x (65,536 + 1,024) + 2 x (131,072 + 2,048) + (131,072 + 1,024)
  EXPECT_EQ(bytes(tiny(), {.precision = WeightPrecision::kInt8}), 664576 + kBf16Rest);
}

TEST(PlanWeightsTest, Nf4Absmax64) {
  // rows x cols / 2 + groups x 4 B, groups = rows x cols / 64:
  // 256x256: 32,768 + 4,096 (x4); 512x256 and 256x512: 65,536 + 8,192 (x3)
  EXPECT_EQ(bytes(tiny(), {.precision = WeightPrecision::kNf4}), 4 * 36864 + 3 * 73728 + kBf16Rest);
}

TEST(PlanWeightsTest, Int4GroupedWithZeroPoints) {
  // rows x cols / 2 + groups x 4 B (scale) + groups x 4 B (offset), groups = rows x cols/128:
  // 256x256: 32,768 + 2,048 + 2,048 = 36,864 (x4); 512x256 and 256x512: 65,536 + 4,096 + 4,096 = 73,728 (x3)
  const int64_t linear = 4 * 36864 + 3 * 73728;
  EXPECT_EQ(bytes(tiny(), {.precision = WeightPrecision::kInt4, .group_size = 128}), linear + kBf16Rest);
  // Symmetric: no offsets (4 x 2,048 + 3 x 4,096 bytes fewer).
  EXPECT_EQ(bytes(tiny(), {.precision = WeightPrecision::kInt4, .group_size = 128, .int4_zero_point = false}),
            linear - 20480 + kBf16Rest);
  // lm_head int8 per channel: 1000 x 256 + 1000 x 4 B instead of 512,000 B.
  EXPECT_EQ(bytes(tiny(), {.precision = WeightPrecision::kInt4, .group_size = 128, .lm_head_int8 = true}),
            linear + kBf16Rest - 512000 + 260000);
  // A tied model has no lm_head of its own: --lm-head int8 is refused, as the engine refuses it.
  model::ModelConfig tied = tiny();
  tied.tie_word_embeddings = true;
  auto t = summarize_weights(tied, {.precision = WeightPrecision::kInt4, .group_size = 128, .lm_head_int8 = true});
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("tie_word_embeddings"), std::string::npos) << t.status().to_string();
  // Group 64 doubles the groups: 256x256: 32,768 + 4,096 + 4,096 = 40,960; others 65,536 + 8,192 + 8,192.
  EXPECT_EQ(bytes(tiny(), {.precision = WeightPrecision::kInt4, .group_size = 64}),
            4 * 40960 + 3 * 81920 + kBf16Rest);
}

TEST(PlanWeightsTest, Fp8BlockAndTensorScales) {
  // 128x128 blocks, f32 scale each: 256x256 -> 4 blocks, 512x256 and 256x512 -> 8 blocks.
  const int64_t linear = 4 * (65536 + 16) + 3 * (131072 + 32);
  EXPECT_EQ(bytes(tiny(), {.precision = WeightPrecision::kFp8}), linear + kBf16Rest);
  EXPECT_EQ(bytes(tiny(), {.precision = WeightPrecision::kFp8, .fp8_block = 0}),
            4 * 65536 + 3 * 131072 + 7 * 4 + kBf16Rest);
}

TEST(PlanWeightsTest, BadGroupSizeNamesTheOption) {
  auto s = summarize_weights(tiny(), {.precision = WeightPrecision::kInt4, .group_size = 0});
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("--group-size"), std::string::npos);
}

// Qwen2 parameter count from the architecture: per layer q/o h x h, k/v h x kv, q/k/v biases,
// gate/up/down 3 x h x inter, two norms; plus embedding and untied lm_head, final norm.
int64_t qwen2_params(int64_t h, int64_t kv, int64_t inter, int64_t vocab, int64_t layers) {
  const int64_t layer = 2 * h * h + 2 * h * kv + (h + 2 * kv) + 3 * h * inter + 2 * h;
  return layers * layer + 2 * vocab * h + h;
}

TEST(PlanWeightsTest, DistillQwenTotalsMatchArchitectureAndPublished) {
  auto s7 = summarize_weights(model("deepseek-r1-distill-qwen-7b").config, {});
  ASSERT_TRUE(s7.is_ok());
  EXPECT_EQ(s7->total_params, qwen2_params(3584, 512, 18944, 152064, 28));
  EXPECT_NEAR(static_cast<double>(s7->total_params) / 1e9, 7.62, 7.62 * 0.01);
  auto s15 = summarize_weights(model("deepseek-r1-distill-qwen-1.5b").config, {});
  ASSERT_TRUE(s15.is_ok());
  EXPECT_EQ(s15->total_params, qwen2_params(1536, 256, 8960, 151936, 28));
  EXPECT_NEAR(static_cast<double>(s15->total_params) / 1e9, 1.78, 1.78 * 0.01);
  // PERFORMANCE.md: bf16 7B reads 14.1 GB per token (all weights but the embedding table).
  EXPECT_NEAR(s7->step_weight_bytes(1) / 1e9, 14.1, 14.1 * 0.01);
}

TEST(PlanWeightsTest, EveryCatalogModelMatchesItsPublishedParameterCount) {
  for (const std::string& name : catalog_model_names(testing_util::catalog_dir())) {
    ModelEntry e = model(name);
    ASSERT_GT(e.published_params_b, 0) << name;
    auto s = summarize_weights(e.config, {});
    ASSERT_TRUE(s.is_ok()) << name << ": " << s.status().to_string();
    const double b = static_cast<double>(s->total_params) / 1e9;
    // deepseek-llm-7b's "7B" is a nominal size (6.9 B by its shapes): 2% for it.
    const double tol = name == "deepseek-llm-7b" ? 0.02 : 0.01;
    EXPECT_NEAR(b, e.published_params_b, e.published_params_b * tol) << name;
    EXPECT_EQ(s->total_bytes, 2 * s->total_params) << name;
  }
}

TEST(PlanWeightsTest, MoeActiveParametersAndDistinctExperts) {
  auto v3 = summarize_weights(model("deepseek-v3").config, {});
  ASSERT_TRUE(v3.is_ok());
  EXPECT_EQ(v3->n_moe_layers, 58);  // 61 layers, first 3 dense
  EXPECT_EQ(v3->n_routed_experts, 256);
  // Published: 37 B activated per token (embedding included in their count: within 5%).
  EXPECT_NEAR(v3->active_params_per_token() / 1e9, 37.0, 37.0 * 0.05);
  auto lite = summarize_weights(model("deepseek-v2-lite").config, {});
  ASSERT_TRUE(lite.is_ok());
  EXPECT_DOUBLE_EQ(lite->expected_distinct_experts(1), 6.0);
  // 64 x (1 - (58/64)^2) = 64 x 0.1787109375
  EXPECT_DOUBLE_EQ(lite->expected_distinct_experts(2), 11.4375);
  EXPECT_NEAR(lite->expected_distinct_experts(4096), 64.0, 1e-9);
}

}  // namespace
}  // namespace frugal::plan
