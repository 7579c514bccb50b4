// Issue 20, acceptance 3 (the test half; the numbers are in docs/kv_cache.md): on the reference
// model, `eval kld` of fp8 and int8 KV and of window + sinks at two window sizes against bf16 KV
// is finite and ordered sensibly: the quantized caches cost little, a smaller window costs more.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include <unistd.h>

#include "eval/logits_file.h"
#include "eval/perplexity.h"
#include "eval/text_file.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace frugal::eval {
namespace {

std::string model_dir() { return frugal::testing::source_root() + "/models/reference-qwen2-20m"; }

class KvQuality : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() / ("frugal_kv_quality_" + std::to_string(::getpid()) + ".bin"))
                .string();
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::string path_;
};

TEST_F(KvQuality, QuantizedAndWindowedKvAgainstBf16) {
  const std::string text_path = frugal::testing::source_root() + "/tests/data/eval_oracle/story.txt";
  auto text = read_text_file(text_path);
  ASSERT_TRUE(text.is_ok()) << text.status().to_string();
  auto tok = Tokenizer::load(model_dir());
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  const bool bos = (*tok)->add_bos_token() && (*tok)->bos_id() >= 0;
  const std::vector<int32_t> tokens = (*tok)->encode(*text, {.add_bos = bos, .parse_special = false});
  constexpr int32_t kCtx = 256;  // scores rows [128, 255): every window below is shorter
  auto plan = plan_chunks(static_cast<int64_t>(tokens.size()), kCtx, 0, text_path);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  {
    auto m = load_scoring_model(model_dir(), "cpu", 2, kCtx, "bf16");
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    auto r = run_ppl(*m, tokens, bos ? (*tok)->bos_id() : -1, *plan, {.save_logits = path_, .top_k = 32});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  }
  auto ref = read_logits_file(path_);
  ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
  auto kld = [&](const std::string& dtype, int32_t window, int32_t sinks) -> double {
    auto m = load_scoring_model(model_dir(), "cpu", 2, kCtx, dtype, window, sinks);
    EXPECT_TRUE(m.is_ok()) << m.status().to_string();
    if (!m.is_ok()) return NAN;
    auto k = run_kld(*m, *ref, path_);
    EXPECT_TRUE(k.is_ok()) << k.status().to_string();
    return k.is_ok() ? k->kld.mean : NAN;
  };
  const double same = kld("bf16", 0, 0), fp8 = kld("fp8", 0, 0), int8 = kld("int8", 0, 0);
  const double w64 = kld("bf16", 64, 4), w32 = kld("bf16", 32, 4);
  for (double v : {same, fp8, int8, w64, w32}) EXPECT_TRUE(std::isfinite(v)) << v;
  EXPECT_EQ(same, 0.0);
  EXPECT_GT(fp8, 0.0);
  EXPECT_GT(int8, 0.0);
  EXPECT_LT(fp8, 0.01);   // quantized KV: small
  EXPECT_LT(int8, 0.01);
  EXPECT_GT(w64, std::max(fp8, int8));  // dropping context costs more than rounding it
  EXPECT_GT(w32, w64);                  // and a smaller window more still
}

}  // namespace
}  // namespace frugal::eval
