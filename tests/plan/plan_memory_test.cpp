// KV bytes per token, the fit verdict, max context and max concurrency, by hand arithmetic.
#include <gtest/gtest.h>

#include "plan_test_util.h"

namespace frugal::plan {
namespace {

using testing_util::plan;
using testing_util::request;

TEST(PlanMemoryTest, GqaKvBytesPerToken) {
  PlanRequest r = request("deepseek-r1-distill-qwen-7b", "h200", WeightPrecision::kBf16);
  // 2 (K, V) x 28 layers x 4 KV heads x 128 x 2 bytes
  EXPECT_EQ(plan(r).memory.kv_bytes_per_token, 57344);
  r.kv_dtype = DType::kF8E4M3;  // 1 byte, per-layer scalar scales
  EXPECT_EQ(plan(r).memory.kv_bytes_per_token, 28672);
  r.kv_dtype = DType::kI8;  // 1 byte + an f32 scale per (token, KV head) for K and for V
  EXPECT_EQ(plan(r).memory.kv_bytes_per_token, 2 * 28 * (4 * 128 + 4 * 4));
}

TEST(PlanMemoryTest, MlaLatentKvBytesPerToken) {
  PlanRequest r = request("deepseek-v3", "h200", WeightPrecision::kFp8);
  r.n_gpus = 8;
  // (kv_lora_rank 512 + rope 64) x 61 layers x 2 bytes, replicated on every rank
  const Plan p = plan(r);
  EXPECT_EQ(p.memory.kv_bytes_per_token, 70272);
  EXPECT_EQ(p.memory.kv_bytes_per_token_model, 70272);
}

TEST(PlanMemoryTest, TensorParallelSplitsGqaHeads) {
  PlanRequest r = request("deepseek-r1-distill-llama-70b", "rtx-4090", WeightPrecision::kInt4);
  r.n_gpus = 2;
  const Plan p = plan(r);
  EXPECT_EQ(p.memory.kv_bytes_per_token_model, 2 * 80 * 8 * 128 * 2);
  EXPECT_EQ(p.memory.kv_bytes_per_token, 2 * 80 * 4 * 128 * 2);
}

TEST(PlanMemoryTest, Llama70BInt4OnRtx4090NeedsFour) {
  PlanRequest r = request("deepseek-r1-distill-llama-70b", "rtx-4090", WeightPrecision::kInt4);
  const Plan one = plan(r);
  EXPECT_FALSE(one.memory.fits);
  // The engine's int4 g128 holds an f32 scale and an f32 offset per group (0.5625 B/weight,
  // docs/quantization.md): ~37 GiB of linears + bf16 embeddings against 24 GiB x 0.90 per GPU;
  // two GPUs (43.2 GiB usable) no longer hold it with workspace and KV, four do.
  EXPECT_GT(one.weights.total_bytes, static_cast<int64_t>(2 * 24.0 * 0.9 * (1ll << 30) * 0.85));
  EXPECT_EQ(one.smallest_fitting_gpus, 4);
  r.n_gpus = 4;
  const Plan four = plan(r);
  EXPECT_TRUE(four.memory.fits);
  EXPECT_GE(four.memory.max_context_batch1, 4096);
}

TEST(PlanMemoryTest, BudgetIdentitiesAndBoundaries) {
  PlanRequest r = request("deepseek-r1-distill-qwen-7b", "rtx-4090", WeightPrecision::kInt8);
  r.context = 8192;
  const Plan p = plan(r);
  const MemoryPlan& m = p.memory;
  EXPECT_EQ(m.usable_bytes, static_cast<int64_t>(24.0 * (1ll << 30) * 0.90));
  EXPECT_EQ(m.weights_bytes, p.weights.total_bytes);
  EXPECT_EQ(m.kv_budget_bytes, m.usable_bytes - m.weights_bytes - m.workspace_bytes - m.overhead_bytes);
  // Pool of 16-token blocks; padding at most 256 B per tensor per layer.
  EXPECT_LE(m.kv_tokens * m.kv_bytes_per_token, m.kv_budget_bytes);
  EXPECT_GT((m.kv_tokens + 16) * m.kv_bytes_per_token + 2 * 28 * 256, m.kv_budget_bytes);
  EXPECT_EQ(m.max_context_batch1, std::min<int64_t>(m.kv_tokens, 131072));
  EXPECT_EQ(m.max_concurrency, m.kv_blocks / (8192 / 16));
  ASSERT_GT(m.max_concurrency, 0);
  r.concurrency = m.max_concurrency;
  EXPECT_TRUE(plan(r).memory.fits);
  r.concurrency = m.max_concurrency + 1;
  EXPECT_FALSE(plan(r).memory.fits);
}

// --kv-window 4096 --kv-sinks 4 at a 32k context (hand count, block 16): a decoding sequence
// keeps ceil(4 / 16) + ceil(4096 / 16) + 1 = 1 + 256 + 1 = 258 blocks instead of 2048, so 2048 /
// 258 = 7.9x the concurrency; decode reads 4,100 tokens of KV, not 32,768.
TEST(PlanMemoryTest, WindowBoundsBlocksPerSequence) {
  PlanRequest r = request("deepseek-r1-distill-qwen-7b", "h200", WeightPrecision::kBf16);
  r.context = 32768;
  const Plan full = plan(r);
  r.kv_window = 4096;
  r.kv_sinks = 4;
  const Plan win = plan(r);
  EXPECT_EQ(win.memory.kv_blocks, full.memory.kv_blocks);
  EXPECT_EQ(full.memory.max_concurrency, full.memory.kv_blocks / 2048);
  EXPECT_EQ(win.memory.max_concurrency, win.memory.kv_blocks / 258);
  EXPECT_EQ(win.memory.max_context_batch1, 131072);  // the window fits: any length runs
  EXPECT_NEAR(win.speed.decode_b1_bytes_per_token - full.speed.decode_b1_bytes_per_token,
              (4100.0 - 32768.0) * 57344, 1e3);
  r.kv_window = 0;  // sinks without a window
  EXPECT_EQ(make_plan(r).status().code(), ErrorCode::kInvalidArgument);
}

TEST(PlanMemoryTest, DeepSeekV3Fp8NeedsEightH200) {
  // ~690 GB of fp8 weights (+ bf16 embeddings, norms, routers) against 141 GiB x 0.90 per GPU.
  const Plan p = plan(request("deepseek-v3", "h200", WeightPrecision::kFp8));
  EXPECT_FALSE(p.memory.fits);
  EXPECT_EQ(p.smallest_fitting_gpus, 8);
}

TEST(PlanMemoryTest, BadRequestsNameTheOption) {
  PlanRequest r = request("deepseek-r1-distill-qwen-7b", "h200", WeightPrecision::kBf16);
  r.n_gpus = 3;  // 28 heads do not split over 3
  auto p = make_plan(r);
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("--gpus 3"), std::string::npos) << p.status().message();
  r.n_gpus = 1;
  r.concurrency = 0;
  p = make_plan(r);
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("--concurrency"), std::string::npos);
}

}  // namespace
}  // namespace frugal::plan
