// Issue 20, acceptance 2: with an fp8 or int8 KV cache the pool holds twice the tokens of bf16 in
// the same memory (int8 minus its per (token, kv head) f32 scales), as the engine reports it
// (MemoryReport::kv_capacity_tokens) and exactly as the planner computes it for the same budget.
// Expected values are worked out by hand from the reference model's config: 6 layers, 2 KV
// heads of 64, block 16.
#include <gtest/gtest.h>

#include <cmath>

#include "plan_test_util.h"
#include "runtime/engine.h"
#include "test_paths.h"

namespace frugal::plan {
namespace {

std::string model_dir() { return frugal::testing::source_root() + "/models/reference-qwen2-20m"; }

struct Capacity {
  int64_t engine_tokens, engine_bytes_per_token, planner_tokens, planner_bytes_per_token;
};

// The planner on a GPU sized so its KV budget is about `kv_budget` bytes, and an engine on the CPU
// given exactly the planner's budget.
Capacity capacity(DType dtype, const std::string& flag, int64_t kv_budget) {
  PlanRequest r;
  r.model = testing_util::model(model_dir());
  r.gpu = testing_util::gpu("h200");
  r.kv_dtype = dtype;
  r.concurrency = 1;
  r.context = 256;
  r.over.cuda_context_bytes = 0;
  r.over.graphs_bytes = 0;
  const Plan big = testing_util::plan(r);
  const int64_t non_kv = big.memory.usable_bytes - big.memory.kv_budget_bytes;
  r.gpu.memory_gib = static_cast<double>(non_kv + kv_budget) / r.over.gpu_memory_utilization / (1024.0 * 1024 * 1024);
  const Plan p = testing_util::plan(r);
  EXPECT_GT(p.memory.kv_budget_bytes, kv_budget / 2);

  runtime::EngineOptions o;
  o.model_dir = model_dir();
  o.dummy_weights = true;
  o.device = "cpu";
  o.threads = 1;
  o.max_num_seqs = 64;
  o.max_num_batched_tokens = 64;
  o.kv_cache_dtype = flag;
  o.cpu_kv_budget_bytes = p.memory.kv_budget_bytes;
  auto e = runtime::create_engine(o);
  EXPECT_TRUE(e.is_ok()) << e.status().to_string();
  if (!e.is_ok()) return {};
  const runtime::MemoryReport m = (*e)->memory();
  (*e)->shutdown();
  EXPECT_EQ(m.kv_dtype, flag);
  EXPECT_LE(m.kv_pool_bytes, p.memory.kv_budget_bytes);
  return {m.kv_capacity_tokens, m.kv_bytes_per_token, p.memory.kv_tokens, p.memory.kv_bytes_per_token};
}

TEST(KvCapacityTest, Fp8AndInt8HoldTwiceTheTokensOfBf16) {
  constexpr int64_t kBudget = 8 << 20;
  const Capacity bf16 = capacity(DType::kBF16, "bf16", kBudget);
  const Capacity fp8 = capacity(DType::kF8E4M3, "fp8", kBudget);
  const Capacity int8 = capacity(DType::kI8, "int8", kBudget);
  // Per token: bf16 2 x 6 x 2 x 64 x 2 = 3072 B; fp8 1536 B (per-layer scalar scales);
  // int8 1536 + 2 (K, V) x 6 layers x 2 heads x 4 B = 1632 B.
  EXPECT_EQ(bf16.engine_bytes_per_token, 3072);
  EXPECT_EQ(fp8.engine_bytes_per_token, 1536);
  EXPECT_EQ(int8.engine_bytes_per_token, 1632);
  for (const Capacity* c : {&bf16, &fp8, &int8}) {
    EXPECT_EQ(c->engine_tokens, c->planner_tokens);
    EXPECT_EQ(c->engine_bytes_per_token, c->planner_bytes_per_token);
    EXPECT_GT(c->engine_tokens, 0);
  }
  // The same memory: fp8 holds 2x the tokens of bf16 (to a block: each tensor region is aligned
  // to 256 B), int8 2x minus its scales, 3072 / 1632 = 1.88x.
  EXPECT_NEAR(static_cast<double>(fp8.engine_tokens) / bf16.engine_tokens, 2.0, 0.01);
  EXPECT_NEAR(static_cast<double>(int8.engine_tokens) / bf16.engine_tokens, 3072.0 / 1632.0, 0.01);
}

TEST(KvCapacityTest, UnknownKvDtypeIsRefusedByName) {
  runtime::EngineOptions o;
  o.model_dir = model_dir();
  o.dummy_weights = true;
  o.device = "cpu";
  o.threads = 1;
  o.kv_cache_dtype = "fp4";
  auto e = runtime::create_engine(o);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().to_string().find("fp4"), std::string::npos) << e.status().to_string();
}

}  // namespace
}  // namespace frugal::plan
