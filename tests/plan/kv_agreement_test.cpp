// Issue 14, acceptance 3: the engine, the planner and the bench compute identical KV bytes per
// token for every catalog model, GQA and MLA alike, and all three equal the published formula
// worked out here from the config's fields:
//   GQA: 2 (K, V) x layers x ceil(kv heads / tp) x head_dim x dtype bytes
//   MLA: layers x (kv_lora_rank + qk_rope_head_dim) x dtype bytes, on every rank
// The engine side is what EngineImpl::init sizes its pool with (runtime::engine_kv_geometry) and,
// for GQA, what a real model::KvStorage allocates; for the small test models also what a real
// dummy-weight engine reports.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "bench/model_cost.h"
#include "core/mapped_file.h"
#include "kv/kv_geometry.h"
#include "model/kv_storage.h"
#include "ops/ref_backend.h"
#include "plan_test_util.h"
#include "runtime/engine.h"
#include "runtime/kv_sizing.h"
#include "test_paths.h"

namespace frugal::plan {
namespace {

namespace fs = std::filesystem;
using testing_util::catalog_dir;

constexpr int32_t kBlock = 16;

int64_t formula_bytes_per_token(const model::ModelConfig& c, int64_t elem_bytes, int64_t tp) {
  if (c.is_mla()) return c.num_hidden_layers * (c.mla.kv_lora_rank + c.mla.qk_rope_head_dim) * elem_bytes;
  const int64_t heads = (c.num_key_value_heads + tp - 1) / tp;
  return 2 * c.num_hidden_layers * heads * c.head_dim * elem_bytes;
}

// The planner's figure for one GPU and for n GPUs.
MemoryPlan planned(const ModelEntry& m, DType kv_dtype, int n_gpus) {
  PlanRequest r;
  r.model = m;
  r.gpu = testing_util::gpu("h200");
  r.n_gpus = n_gpus;
  r.kv_dtype = kv_dtype;
  auto p = make_plan(r);
  EXPECT_TRUE(p.is_ok()) << m.name << ": " << p.status().to_string();
  return p.is_ok() ? p->memory : MemoryPlan{};
}

// The bench's figure: it reads a config.json like `frugal bench offline --model`.
int64_t bench_bytes_per_token(const std::string& config_json, DType kv_dtype) {
  runtime::EngineOptions eo;
  eo.model_dir = config_json;
  eo.block_size = kBlock;
  auto mc = bench::model_cost(eo, kv_dtype);
  EXPECT_TRUE(mc.is_ok()) << config_json << ": " << mc.status().to_string();
  return mc.is_ok() ? mc->kv_bytes_per_token : -1;
}

// A catalog entry's config written out as the config.json a user would have.
std::string write_config(const std::string& catalog_file, const std::string& name) {
  auto text = read_file(catalog_file);
  EXPECT_TRUE(text.is_ok());
  const nlohmann::json j = nlohmann::json::parse(text.is_ok() ? *text : "{}");
  const fs::path dir = fs::path(::testing::TempDir()) / ("kv_agreement_" + name);
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << j.at("config").dump(2);
  return (dir / "config.json").string();
}

TEST(KvAgreement, EnginePlannerAndBenchAgreeOnEveryCatalogModel) {
  auto backend = ops::make_ref_backend();
  int n_gqa = 0, n_mla = 0;
  for (const std::string& name : catalog_model_names(catalog_dir())) {
    SCOPED_TRACE(name);
    const ModelEntry m = testing_util::model(name);
    const model::ModelConfig& c = m.config;
    const std::string config_json = write_config(catalog_dir() + "/models/" + name + ".json", name);
    for (DType dt : {DType::kBF16, DType::kF32}) {
      const int64_t expected = formula_bytes_per_token(c, dtype_bytes(dt, 1), 1);
      const kv::KvGeometry engine_g = runtime::engine_kv_geometry(c, dt, kBlock);
      EXPECT_EQ(kv::bytes_per_token(engine_g), expected) << "engine, " << dtype_name(dt);
      EXPECT_EQ(planned(m, dt, 1).kv_bytes_per_token, expected) << "planner, " << dtype_name(dt);
      EXPECT_EQ(bench_bytes_per_token(config_json, dt), expected) << "bench, " << dtype_name(dt);
    }
    // Tensor parallelism (planner only today): heads split (Qwen-1.5B's 2 KV heads replicate
    // onto 4 ranks), latents replicated. 8 ranks where the attention heads split that far, else 4.
    const int n = c.num_attention_heads % 8 == 0 ? 8 : 4;
    const MemoryPlan pn = planned(m, DType::kBF16, n);
    EXPECT_EQ(pn.kv_bytes_per_token, formula_bytes_per_token(c, 2, n)) << n << " GPUs";
    EXPECT_EQ(pn.kv_bytes_per_token_model, formula_bytes_per_token(c, 2, 1));
    if (c.is_mla()) {
      ++n_mla;
      EXPECT_EQ(runtime::engine_kv_geometry(c, DType::kBF16, kBlock).kind, kv::KvKind::kMla);
    } else {
      ++n_gqa;
    }
    // What the engine's KV storage really allocates: 2 blocks of 16 tokens (every catalog
    // model's rows are multiples of the 256-byte alignment, so no padding). MLA (issue 19,
    // acceptance 2): the latent arena holds (kv_lora_rank + qk_rope_head_dim) values per token per layer.
    auto kv = model::KvStorage::create(backend.get(), runtime::engine_kv_geometry(c, DType::kBF16, kBlock), 2);
    ASSERT_TRUE(kv.is_ok()) << kv.status().to_string();
    EXPECT_EQ((*kv)->bytes(), formula_bytes_per_token(c, 2, 1) * 2 * kBlock);
    auto from_config = model::KvStorage::create(backend.get(), c, {.n_blocks = 2, .block_size = kBlock,
                                                                   .dtype = DType::kBF16});
    ASSERT_TRUE(from_config.is_ok()) << from_config.status().to_string();
    EXPECT_EQ((*from_config)->bytes(), (*kv)->bytes());
  }
  EXPECT_GE(n_gqa, 8);
  EXPECT_GE(n_mla, 4);
}

// Real engines on the small GQA test models (dummy weights, the CPU backend's f32 KV): the pool
// the engine reports equals the planner's and the bench's bytes per token times its slots.
TEST(KvAgreement, DummyWeightEnginePoolsEqualThePlan) {
  int checked = 0;
  for (const auto& d : fs::directory_iterator(fs::path(frugal::testing::source_root()) / "tests/data/golden")) {
    const fs::path cfg = d.path() / "config.json";
    if (!fs::exists(cfg)) continue;
    SCOPED_TRACE(d.path().string());
    runtime::EngineOptions o;
    o.model_dir = d.path().string();
    o.dummy_weights = true;
    o.device = "cpu";
    o.threads = 1;
    o.max_num_seqs = 4;
    o.max_num_batched_tokens = 64;
    o.num_kv_blocks = 5;
    o.block_size = kBlock;
    auto e = runtime::create_engine(o);
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    const int64_t pool = (*e)->memory().kv_pool_bytes;
    (*e)->shutdown();
    const ModelEntry m = testing_util::model(d.path().string());
    const int64_t planner = planned(m, DType::kF32, 1).kv_bytes_per_token;
    EXPECT_EQ(planner, formula_bytes_per_token(m.config, 4, 1));
    EXPECT_EQ(bench_bytes_per_token(cfg.string(), DType::kF32), planner);
    EXPECT_EQ(pool, planner * 5 * kBlock);
    ++checked;
  }
  EXPECT_GE(checked, 6);
}

}  // namespace
}  // namespace frugal::plan
