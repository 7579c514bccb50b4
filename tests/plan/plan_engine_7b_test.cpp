// Issue 8, acceptance 1, for the dummy 7B configuration: the planner's weight bytes equal what
// the engine loads with --dummy-weights (15 GB of bf16 in host memory; label slow).
#include <gtest/gtest.h>

#include "model/model.h"
#include "ops/ref_backend.h"
#include "test_paths.h"
#include "plan/weights.h"

namespace frugal::plan {
namespace {

TEST(PlanEngineSlowTest, Dummy7bWeightBytesEqualThePlan) {
  const std::string cfg = frugal::testing::shared_data_dir() + "/configs/deepseek-r1-distill-qwen-7b.json";
  auto backend = ops::make_ref_backend();
  auto m = model::Model::load(cfg, backend.get(), {.dummy_weights = true, .max_batch_tokens = 16, .max_seqs = 1,
                                                   .max_logit_rows = 1, .max_context = 64});
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  auto s = summarize_weights((*m)->config(), {.precision = WeightPrecision::kBf16});
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ((*m)->weight_bytes(), s->total_bytes);
  EXPECT_NEAR(static_cast<double>(s->total_params), 7.62e9, 0.01 * 7.62e9);
}

// Issue 16, acceptance 3: the same for every quantized format (--dummy-weights --precision).
class PlanEngineSlowQuant : public ::testing::TestWithParam<const char*> {};

TEST_P(PlanEngineSlowQuant, Dummy7bWeightBytesEqualThePlan) {
  const std::string cfg = frugal::testing::shared_data_dir() + "/configs/deepseek-r1-distill-qwen-7b.json";
  auto backend = ops::make_ref_backend();
  auto prec = model::parse_dummy_precision(GetParam());
  ASSERT_TRUE(prec.is_ok());
  auto m = model::Model::load(cfg, backend.get(), {.dummy_weights = true, .dummy_precision = *prec, .max_batch_tokens = 16,
                                                   .max_seqs = 1, .max_logit_rows = 1, .max_context = 64});
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  auto p = parse_precision(GetParam());
  ASSERT_TRUE(p.is_ok());
  auto s = summarize_weights((*m)->config(), {.precision = *p});
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ((*m)->weight_bytes(), s->total_bytes);
}

INSTANTIATE_TEST_SUITE_P(Formats, PlanEngineSlowQuant, ::testing::Values("int8", "int4", "fp8", "nf4"));

}  // namespace
}  // namespace frugal::plan
