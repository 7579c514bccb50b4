// Speed and cost figures against hand arithmetic of the documented formulas, and calibration
// recovering known efficiency factors.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "plan_test_util.h"

namespace frugal::plan {
namespace {

using testing_util::plan;
using testing_util::request;

// R1-Distill-Qwen-7B: 7,615,616,512 parameters (hand count: see plan_weights_test), of which the
// embedding table is 152,064 x 3,584 = 544,997,376.
constexpr double kParams7b = 7615616512.0;
constexpr double kEmbed7b = 544997376.0;

TEST(PlanSpeedTest, Batch1DecodeIsTheBandwidthRoofline) {
  PlanRequest r = request("deepseek-r1-distill-qwen-7b", "h200", WeightPrecision::kBf16);
  r.context = 4096;
  const Plan p = plan(r);
  const double bytes = 2.0 * (kParams7b - kEmbed7b) + 4096.0 * 57344.0;
  EXPECT_NEAR(p.speed.decode_b1.bytes, bytes, 1.0);
  EXPECT_NEAR(p.speed.decode_b1.tok_per_s(), 0.75 * 4800e9 / bytes, 1e-6);
}

TEST(PlanSpeedTest, PrefillIsTwoFlopsPerParameterAtMfu) {
  PlanRequest r = request("deepseek-r1-distill-qwen-7b", "h200", WeightPrecision::kBf16);
  r.prompt_len = 2048;
  const Plan p = plan(r);
  // Linear params without embedding and lm_head; attention 4 x 28 layers x 28 heads x 128 x P/2.
  const double flops = 2.0 * (kParams7b - 2 * kEmbed7b) + 4.0 * 28 * 28 * 128 * 1024;
  EXPECT_NEAR(p.speed.prefill_flops_per_token, flops, 1.0);
  EXPECT_NEAR(p.speed.prefill_tok_per_s, 0.60 * 989e12 / flops, 1e-6);
  // TTFT = prompt / prefill rate + one decode step at the prompt's length.
  const double step = (2.0 * (kParams7b - kEmbed7b) + 2048.0 * 57344.0) / (0.75 * 4800e9);
  EXPECT_NEAR(p.speed.ttft_s, 2048.0 / p.speed.prefill_tok_per_s + step, 1e-9);
}

TEST(PlanSpeedTest, ConcurrencySweepCrossesFromMemoryToCompute) {
  PlanRequest r = request("deepseek-r1-distill-qwen-7b", "h200", WeightPrecision::kBf16);
  r.context = 512;
  const Plan p = plan(r);
  ASSERT_GT(p.speed.crossover_batch, 1);
  for (const StepTime& s : p.speed.sweep) {
    EXPECT_EQ(s.compute_bound(), s.batch >= p.speed.crossover_batch) << s.batch;
  }
  for (size_t i = 1; i < p.speed.sweep.size(); ++i) {
    EXPECT_GE(p.speed.sweep[i].tok_per_s(), p.speed.sweep[i - 1].tok_per_s());
  }
}

TEST(PlanSpeedTest, TensorParallelAddsAllReducePerLayer) {
  PlanRequest r = request("deepseek-r1-distill-llama-70b", "rtx-4090", WeightPrecision::kInt4);
  r.n_gpus = 2;
  const Plan p = plan(r);
  // 2 all-reduces x 80 layers x (25 us + 2 x (1/2) x 8192 x 2 B / (32 GB/s x 0.70))
  const double t = 160.0 * (25e-6 + 8192.0 * 2.0 / (32e9 * 0.70));
  EXPECT_NEAR(p.speed.decode_b1.t_comm, t, 1e-12);
}

TEST(PlanSpeedTest, CostPerMillionTokens) {
  PlanRequest r = request("deepseek-r1-distill-qwen-7b", "h200", WeightPrecision::kBf16);
  r.price_per_hour = 3.60;
  r.concurrency = 32;
  const Plan p = plan(r);
  EXPECT_NEAR(p.cost.usd_per_m_tokens_b1, 3.60 / (p.speed.decode_b1.tok_per_s() * 3600.0) * 1e6, 1e-12);
  EXPECT_NEAR(p.cost.usd_per_m_tokens_concurrency,
              3.60 / (p.speed.at_concurrency.tok_per_s() * 3600.0) * 1e6, 1e-12);
  EXPECT_LT(p.cost.usd_per_m_tokens_concurrency, p.cost.usd_per_m_tokens_b1);
}

TEST(PlanSpeedTest, CalibrationRecoversKnownFactors) {
  // Measurements made by the time model itself at known factors: fitting must give them back.
  PlanRequest r = request("deepseek-r1-distill-qwen-7b", "h200", WeightPrecision::kBf16);
  Plan p = plan(r);
  SpeedModel truth = make_speed_model(r.model.config, p.weights, r.gpu, 1, 57344.0, WeightPrecision::kBf16,
                                      Efficiency{.decode_bw = 0.62, .decode_mfu = 0.41, .prefill_mfu = 0.55});
  const double b1 = truth.decode(1, 576).tok_per_s();
  const double b256 = truth.decode(256, 576).tok_per_s();
  ASSERT_TRUE(truth.decode(256, 576).compute_bound());
  const double pf = truth.prefill_tok_per_s(2048);
  nlohmann::json bench = {{"model", "deepseek-r1-distill-qwen-7b"}, {"gpu", "h200"}, {"precision", "bf16"},
                          {"results", {{{"kind", "decode"}, {"batch", 1}, {"prompt_len", 512}, {"gen_len", 128},
                                        {"tok_per_s", b1}},
                                       {{"kind", "decode"}, {"batch", 256}, {"kv_len", 576}, {"tok_per_s", b256}},
                                       {{"kind", "prefill"}, {"prompt_len", 2048}, {"tok_per_s", pf}},
                                       {{"kind", "throughput"}, {"output_tok_per_s", 1.0}}}}};
  const std::string path = ::testing::TempDir() + "/plan_calibration_bench.json";
  std::ofstream(path) << bench.dump();
  r.calibrate_path = path;
  Plan c = plan(r);
  ASSERT_TRUE(c.calibration.has_value());
  EXPECT_NEAR(c.calibration->after.decode_bw, 0.62, 1e-9);
  EXPECT_NEAR(c.calibration->after.decode_mfu, 0.41, 1e-9);
  EXPECT_NEAR(c.calibration->after.prefill_mfu, 0.55, 1e-9);
  ASSERT_EQ(c.calibration->rows.size(), 3u);
  for (const CalibrationRow& row : c.calibration->rows) EXPECT_NEAR(row.error_after_pct(), 0.0, 1e-6);
  EXPECT_NEAR(c.calibration->rows[0].error_before_pct(), (0.75 / 0.62 - 1.0) * 100.0, 1e-6);
  EXPECT_NEAR(c.speed.decode_b1.tok_per_s(), truth.decode(1, 4096).tok_per_s(), 1e-6);
  std::remove(path.c_str());
}

TEST(PlanSpeedTest, CalibrationRecoversPerSequenceEngineOverhead) {
  // Measurements from the time model with a known per-sequence step overhead at batches that are
  // bandwidth-bound: the fit must return that overhead and reproduce every point.
  PlanRequest r = request("deepseek-r1-distill-qwen-7b", "h200", WeightPrecision::kBf16);
  Plan p = plan(r);
  SpeedModel truth = make_speed_model(r.model.config, p.weights, r.gpu, 1, 57344.0, WeightPrecision::kBf16,
                                      Efficiency{.decode_bw = 0.6, .decode_mfu = 0.5, .prefill_mfu = 0.5,
                                                 .seq_overhead_s = 2e-4});
  nlohmann::json results = nlohmann::json::array();
  for (int b : {1, 8, 32, 64}) {
    ASSERT_FALSE(truth.decode(b, 576).compute_bound());
    results.push_back({{"kind", "decode"}, {"batch", b}, {"kv_len", 576}, {"tok_per_s", truth.decode(b, 576).tok_per_s()}});
  }
  nlohmann::json bench = {{"model", "deepseek-r1-distill-qwen-7b"}, {"gpu", "h200"}, {"precision", "bf16"}, {"results", results}};
  const std::string path = ::testing::TempDir() + "/plan_calibration_overhead.json";
  std::ofstream(path) << bench.dump();
  r.calibrate_path = path;
  Plan c = plan(r);
  ASSERT_TRUE(c.calibration.has_value());
  // decode_bw is fitted from the batch-1 point before the overhead is known, so it absorbs one
  // sequence's overhead; everything must still land within 2%.
  EXPECT_NEAR(c.calibration->after.seq_overhead_s, 2e-4, 2e-5);
  for (const CalibrationRow& row : c.calibration->rows) EXPECT_LT(std::abs(row.error_after_pct()), 2.0) << row.point.batch;
  std::remove(path.c_str());
}

TEST(PlanSpeedTest, CalibrationFileErrorsNameTheFile) {
  PlanRequest r = request("deepseek-r1-distill-qwen-7b", "h200", WeightPrecision::kBf16);
  r.calibrate_path = "/nonexistent/bench.json";
  auto p = make_plan(r);
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("/nonexistent/bench.json"), std::string::npos);
  const std::string path = ::testing::TempDir() + "/plan_bad_bench.json";
  std::ofstream(path) << R"({"results": [{"kind": "decode", "batch": 1}]})";
  r.calibrate_path = path;
  p = make_plan(r);
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("results"), std::string::npos) << p.status().message();
  std::remove(path.c_str());
}

}  // namespace
}  // namespace frugal::plan

namespace frugal::plan {
namespace {

// Issue 8, acceptance 3: calibrated on what `frugal bench offline` measured on the H200, the
// planner's batch-1 decode and 64-concurrent decode predictions are within 15% of the
// measurements. Two engines: the eager one of the first H200 run (docs/perf/2026-11-29-h200.md:
// 181 tok/s at batch 1, 4,499 at 64) and the graph/device-sampling one (2026-11-30 input:
// 234 and 9,644), whose per-sequence overhead is 5x smaller.
class PlanCalibrationTest : public ::testing::TestWithParam<const char*> {};

TEST_P(PlanCalibrationTest, CalibratedOnH200BenchWithin15Percent) {
  PlanRequest r = request("deepseek-r1-distill-qwen-7b", "h200", WeightPrecision::kBf16);
  r.calibrate_path = frugal::testing::source_root() + "/docs/perf/data/" + GetParam();
  Plan c = plan(r);
  ASSERT_TRUE(c.calibration.has_value());
  int checked = 0;
  for (const CalibrationRow& row : c.calibration->rows) {
    if (row.point.kind != "decode" || (row.point.batch != 1 && row.point.batch != 64)) continue;
    EXPECT_LT(std::abs(row.error_after_pct()), 15.0) << "batch " << row.point.batch;
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

INSTANTIATE_TEST_SUITE_P(H200, PlanCalibrationTest,
                         ::testing::Values("2026-11-29-h200-q7b-calibration-input.json",
                                           "2026-11-30-h200-q7b-calibration-input.json"));

}  // namespace
}  // namespace frugal::plan
