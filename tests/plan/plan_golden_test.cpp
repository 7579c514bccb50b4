// Acceptance: predicted weight bytes equal the bytes of the tensors in real checkpoints
// (the transformers-saved golden models under tests/data/golden).
#include <gtest/gtest.h>

#include <filesystem>

#include "model/safetensors.h"
#include "test_paths.h"
#include "plan/weights.h"

namespace frugal::plan {
namespace {

TEST(PlanGoldenTest, WeightBytesMatchCheckpoints) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(frugal::testing::source_root()) / "tests/data/golden";
  int checked = 0;
  for (const auto& d : fs::directory_iterator(root)) {
    if (!d.is_directory() || !fs::exists(d.path() / "config.json")) continue;
    auto cfg = model::load_model_config(d.path().string());
    ASSERT_TRUE(cfg.is_ok()) << cfg.status().to_string();
    auto set = model::SafetensorsSet::open_dir(d.path().string());
    ASSERT_TRUE(set.is_ok()) << set.status().to_string();
    int64_t numel = 0, bytes = 0;
    for (const std::string& name : (*set)->names()) {
      const model::TensorEntry* t = (*set)->find(name);
      numel += t->shape.numel();
      bytes += t->nbytes;
    }
    auto s = summarize_weights(*cfg, {.precision = WeightPrecision::kBf16});
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    EXPECT_EQ(s->total_params, numel) << d.path();
    // Checkpoints are stored in torch_dtype; the planner's bf16 figure is 2 bytes per element.
    EXPECT_EQ(s->total_bytes, numel * 2) << d.path();
    EXPECT_EQ(dtype_bytes(cfg->torch_dtype, numel), bytes) << d.path();
    ++checked;
  }
  EXPECT_GE(checked, 4);
}

}  // namespace
}  // namespace frugal::plan
