// Issue 8, acceptance 1: the planner's figures equal what the engine actually allocates.
//  - weight bytes: every golden checkpoint loaded by the engine (ref backend, weights used in
//    place) and the Qwen2.5-0.5B configuration with --dummy-weights (tied embeddings);
//  - KV bytes per token: the engine's KV storage for the R1-Distill-Qwen-7B configuration.
#include <gtest/gtest.h>

#include <filesystem>

#include "model/kv_storage.h"
#include "model/model.h"
#include "ops/ref_backend.h"
#include "plan_test_util.h"
#include "test_paths.h"
#include "plan/weights.h"

namespace frugal::plan {
namespace {

using testing_util::plan;
using testing_util::request;

TEST(PlanEngineTest, WeightBytesEqualWhatTheEngineLoads) {
  namespace fs = std::filesystem;
  auto backend = ops::make_ref_backend();
  int checked = 0;
  for (const auto& d : fs::directory_iterator(fs::path(frugal::testing::source_root()) / "tests/data/golden")) {
    if (!d.is_directory() || !fs::exists(d.path() / "config.json")) continue;
    auto m = model::Model::load(d.path().string(), backend.get(), {});
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    auto s = summarize_weights((*m)->config(), {.precision = WeightPrecision::kBf16});
    ASSERT_TRUE(s.is_ok());
    // The planner's bf16 figure is 2 bytes per parameter; checkpoints are stored in torch_dtype.
    EXPECT_EQ((*m)->weight_bytes(), dtype_bytes((*m)->config().torch_dtype, s->total_params)) << d.path();
    if ((*m)->config().torch_dtype == DType::kBF16) {
      EXPECT_EQ((*m)->weight_bytes(), s->total_bytes) << d.path();
    }
    ++checked;
  }
  EXPECT_GE(checked, 6);
}

TEST(PlanEngineTest, DummyWeightBytesEqualThePlan) {
  const std::string cfg = frugal::testing::shared_data_dir() + "/configs/qwen2.5-0.5b-instruct.json";
  auto backend = ops::make_ref_backend();
  auto m = model::Model::load(cfg, backend.get(), {.dummy_weights = true});
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  auto s = summarize_weights((*m)->config(), {.precision = WeightPrecision::kBf16});
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ((*m)->weight_bytes(), s->total_bytes);
}

TEST(PlanEngineTest, KvBytesPerTokenEqualTheEnginePool) {
  PlanRequest r = request("deepseek-r1-distill-qwen-7b", "h200", WeightPrecision::kBf16);
  const Plan p = plan(r);
  auto backend = ops::make_ref_backend();
  const int32_t n_blocks = 3, block_size = 16;
  auto kv = model::KvStorage::create(backend.get(), r.model.config,
                                     {.n_blocks = n_blocks, .block_size = block_size, .dtype = DType::kBF16});
  ASSERT_TRUE(kv.is_ok()) << kv.status().to_string();
  EXPECT_EQ((*kv)->bytes(), p.memory.kv_bytes_per_token * n_blocks * block_size);
  EXPECT_EQ(p.memory.kv_bytes_per_token, 57344);
}

}  // namespace
}  // namespace frugal::plan

namespace frugal::plan {
namespace {

// Issue 19, acceptance 4: DeepSeek-V2-Lite and V3. The engine loads exactly tensor_specs(config)
// (checked tensor by tensor against the golden checkpoints above and by WeightStore::load), so its
// weight bytes with bf16 --dummy-weights are their bf16 sizes; the planner's figure must equal
// that sum, and its KV bytes per token the engine's latent pool (a real KvStorage).
TEST(PlanEngineTest, DeepseekWeightAndKvBytesEqualTheEngine) {
  auto backend = ops::make_ref_backend();
  for (const char* name : {"deepseek-v2-lite", "deepseek-v3"}) {
    SCOPED_TRACE(name);
    PlanRequest r = request(name, "h200", WeightPrecision::kBf16);
    r.n_gpus = std::string(name) == "deepseek-v3" ? 16 : 1;
    auto p = make_plan(r);
    ASSERT_TRUE(p.is_ok()) << p.status().to_string();
    int64_t engine_bytes = 0;
    for (const auto& s : model::tensor_specs(r.model.config)) engine_bytes += dtype_bytes(DType::kBF16, s.shape.numel());
    auto w = summarize_weights(r.model.config, {.precision = WeightPrecision::kBf16});
    ASSERT_TRUE(w.is_ok());
    EXPECT_EQ(w->total_bytes, engine_bytes);
    const int32_t n_blocks = 2, block_size = 16;
    auto kv = model::KvStorage::create(backend.get(), r.model.config,
                                       {.n_blocks = n_blocks, .block_size = block_size, .dtype = DType::kBF16});
    ASSERT_TRUE(kv.is_ok()) << kv.status().to_string();
    EXPECT_EQ((*kv)->bytes(), p->memory.kv_bytes_per_token_model * n_blocks * block_size);
    const auto& m = r.model.config.mla;
    EXPECT_EQ(p->memory.kv_bytes_per_token_model, (m.kv_lora_rank + m.qk_rope_head_dim) * 2 * r.model.config.num_hidden_layers);
  }
}

}  // namespace
}  // namespace frugal::plan
