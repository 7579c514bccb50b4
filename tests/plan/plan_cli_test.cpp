// Runs the real `frugal plan` binary and checks its --json and its shown arithmetic.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>

#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "test_paths.h"

namespace {

struct CliRun {
  int code = -1;
  std::string out;
};

CliRun run_plan(const std::string& args) {
  const std::string cmd = frugal::testing::frugal_binary() + " plan --catalog " + frugal::testing::source_root() +
                          "/data/catalog " + args + " 2>&1";
  CliRun r;
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(f);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

nlohmann::json plan_json(const std::string& args) {
  CliRun r = run_plan(args + " --json");
  EXPECT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  return j;
}

TEST(PlanCliTest, Qwen7bOnH200Bf16KvBytes) {
  auto j = plan_json("--model deepseek-r1-distill-qwen-7b --gpu h200 --precision bf16");
  EXPECT_EQ(j["memory"]["kv_bytes_per_token"], 57344);
  EXPECT_EQ(j["fits"], true);
}

TEST(PlanCliTest, Llama70bInt4OnRtx4090) {
  auto one = plan_json("--model deepseek-r1-distill-llama-70b --gpu rtx-4090 --precision int4");
  EXPECT_EQ(one["fits"], false);
  // The engine's int4 (f32 scale + offset per group of 128) needs four (plan_memory_test).
  EXPECT_EQ(one["smallest_fitting_gpus"], 4);
  auto four = plan_json("--model deepseek-r1-distill-llama-70b --gpu rtx-4090 --precision int4 --gpus 4");
  EXPECT_EQ(four["fits"], true);
  EXPECT_GE(four["memory"]["max_context_batch1"].get<int64_t>(), 4096);
}

TEST(PlanCliTest, JsonHasEveryFigure) {
  auto j = plan_json("--model deepseek-v2-lite --gpu l40s --precision int8 --kv-dtype fp8 --concurrency 8 "
                     "--price-per-hour 1.0");
  for (const char* k : {"request", "gpu", "fits", "weights", "memory", "speed", "cost", "tensor_parallel",
                        "smallest_fitting_gpus", "steps", "notes"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  for (const char* k : {"usable_bytes", "weights_bytes", "workspace_bytes", "overhead_bytes", "kv_budget_bytes",
                        "kv_bytes_per_token", "kv_blocks", "fits", "max_context_batch1", "max_concurrency"}) {
    EXPECT_TRUE(j["memory"].contains(k)) << k;
  }
  for (const char* k : {"decode_b1_tok_per_s", "prefill_tok_per_s", "ttft_s", "decode_vs_concurrency",
                        "crossover_batch", "decode_tok_per_s_at_concurrency", "efficiency"}) {
    EXPECT_TRUE(j["speed"].contains(k)) << k;
  }
  for (const char* k : {"usd_per_m_tokens_b1", "usd_per_m_tokens_concurrency", "price_per_gpu_hour"}) {
    EXPECT_TRUE(j["cost"].contains(k)) << k;
  }
  EXPECT_EQ(j["cost"]["price_per_gpu_hour"], 1.0);
  EXPECT_EQ(j["request"]["kv_dtype"], "fp8");
  // Quantized and bf16-kept tensors are both listed.
  bool quantized = false, kept = false;
  for (const auto& g : j["weights"]["groups"]) (g["quantized"].get<bool>() ? quantized : kept) = true;
  EXPECT_TRUE(quantized);
  EXPECT_TRUE(kept);
}

TEST(PlanCliTest, TextShowsTheArithmetic) {
  CliRun r = run_plan("--model deepseek-r1-distill-qwen-7b --gpu h200");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("2 x 28 x 4 x 128"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("57,344 B"), std::string::npos);
  EXPECT_NE(r.out.find("tok/s"), std::string::npos);
  EXPECT_NE(r.out.find("verdict: fits"), std::string::npos);
}

TEST(PlanCliTest, BadInputIsAClearError) {
  CliRun r = run_plan("--model deepseek-r1-distill-qwen-7b --gpu voodoo2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--gpu"), std::string::npos) << r.out;
  r = run_plan("--model deepseek-r1-distill-qwen-7b --gpu h200 --precision int3");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--precision"), std::string::npos) << r.out;
  r = run_plan("--model /nonexistent/config.json --gpu h200");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--model"), std::string::npos) << r.out;
}

}  // namespace

namespace {

TEST(PlanCliTest, CompareJsonRanksFittingConfigurations) {
  auto j = plan_json("--model deepseek-llm-67b --compare --gpus-max 2");
  ASSERT_TRUE(j["rows"].is_array());
  ASSERT_FALSE(j["rows"].empty());
  double last = 0;
  for (const auto& row : j["rows"]) {
    EXPECT_FALSE(row["gpu"] == "h200" && row["n_gpus"] == 1 && row["precision"] == "bf16");
    EXPECT_LE(last, row["usd_per_m_tokens_rent"].get<double>());
    last = row["usd_per_m_tokens_rent"].get<double>();
    EXPECT_GT(row["usd_per_m_tokens_own"].get<double>(), 0);
    EXPECT_GE(row["max_batch"].get<int64_t>(), row["batch"].get<int64_t>());
  }
  auto own = plan_json("--model deepseek-llm-67b --compare --gpus-max 2 --rank-by own --utilization 0.5");
  last = 0;
  for (const auto& row : own["rows"]) {
    EXPECT_LE(last, row["usd_per_m_tokens_own"].get<double>());
    last = row["usd_per_m_tokens_own"].get<double>();
  }
  CliRun text = run_plan("--model deepseek-r1-distill-qwen-7b --compare --gpu h200");
  EXPECT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("$/1M own"), std::string::npos) << text.out;
  CliRun bad = run_plan("--model deepseek-llm-67b --compare --rank-by cheapest");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("--rank-by"), std::string::npos) << bad.out;
  CliRun no_gpu = run_plan("--model deepseek-llm-67b");
  EXPECT_EQ(no_gpu.code, 2);
  EXPECT_NE(no_gpu.out.find("--gpu"), std::string::npos) << no_gpu.out;
}

}  // namespace
