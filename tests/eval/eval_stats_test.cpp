// Statistics and KLD math against hand-computed values (issue 15, acceptance 2), and the
// --save-logits file format (round trip, corruption errors).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "eval/eval_stats.h"
#include "eval/kld.h"
#include "eval/logits_file.h"

namespace frugal::eval {
namespace {

std::vector<float> logs(const std::vector<double>& p) {
  std::vector<float> out;
  for (double x : p) out.push_back(static_cast<float>(std::log(x)));
  return out;
}

TEST(EvalStats, WilsonIntervalPublishedValues) {
  // 8 of 10: the textbook Wilson 95% interval is [0.4902, 0.9433].
  const Interval a = wilson(8, 10);
  EXPECT_NEAR(a.lo, 0.4902, 1e-4);
  EXPECT_NEAR(a.hi, 0.9433, 1e-4);
  // 0 of 5: [0, z^2/n / (1 + z^2/n)] = [0, 0.4345].
  const Interval b = wilson(0, 5);
  EXPECT_EQ(b.lo, 0.0);
  EXPECT_NEAR(b.hi, 0.4345, 1e-4);
  const Proportion p = proportion(3, 4);
  EXPECT_DOUBLE_EQ(p.p, 0.75);
  EXPECT_NEAR(p.se, std::sqrt(0.75 * 0.25 / 3), 1e-12);
}

TEST(EvalStats, MeanStandardErrorAndPercentiles) {
  const std::vector<double> xs = {1, 2, 3, 4};
  const MeanSe m = mean_se(xs);
  EXPECT_DOUBLE_EQ(m.mean, 2.5);
  EXPECT_NEAR(m.se, std::sqrt((2.25 * 2 + 0.25 * 2) / 3.0 / 4.0), 1e-12);  // 0.6455
  EXPECT_DOUBLE_EQ(percentile(xs, 50), 2.5);
  EXPECT_NEAR(percentile(xs, 99), 3.97, 1e-12);
  EXPECT_DOUBLE_EQ(percentile(xs, 100), 4.0);
}

TEST(Kld, HandComputedFullAndTopKPlusRest) {
  // P = (1/2, 1/4, 1/8, 1/8), Q = (0.4, 0.3, 0.2, 0.1), next token 1.
  const auto p = logs({0.5, 0.25, 0.125, 0.125});
  const auto q = logs({0.4, 0.3, 0.2, 0.1});
  // Full: sum p log(p/q) = 0.0351339 (by hand: 0.111572 - 0.045580 - 0.058751 + 0.027893).
  const TopK full = compress_topk(p, 1, 4);
  EXPECT_NEAR(kld_topk(full, q), 0.035133876717175515, 1e-6);
  EXPECT_EQ(full.log_rest, -INFINITY);
  // Top-2 + rest: buckets {0}, {1}, {2, 3}: 0.5 ln(0.5/0.4) + 0.25 ln(0.25/0.3) + 0.25 ln(0.25/0.3).
  const TopK top2 = compress_topk(p, 1, 2);
  EXPECT_EQ(top2.ids, (std::vector<int32_t>{0, 1}));
  EXPECT_NEAR(std::exp(top2.log_rest), 0.25, 1e-6);
  EXPECT_NEAR(kld_topk(top2, q), 0.020410997260127593, 1e-6);
  EXPECT_LE(kld_topk(top2, q), kld_topk(full, q));  // merging buckets never raises KL
  const KldSample s = kld_sample(top2, q);
  EXPECT_NEAR(s.dp, 0.3 - 0.25, 1e-6);
  EXPECT_NEAR(s.nll_ref, std::log(4.0), 1e-6);
  EXPECT_NEAR(s.nll_q, -std::log(0.3), 1e-6);
  EXPECT_TRUE(s.same_top1);
  // Against itself: exactly 0 and the same top-1.
  const KldSample self = kld_sample(top2, p);
  EXPECT_EQ(self.kld, 0.0);
  EXPECT_TRUE(self.same_top1);
  EXPECT_EQ(self.dp, 0.0);
  // Q's argmax differs from P's.
  EXPECT_FALSE(kld_sample(top2, logs({0.1, 0.6, 0.2, 0.1})).same_top1);
}

TEST(Kld, TopKTiesTakeTheLowerIdFirst) {
  const auto p = logs({0.25, 0.25, 0.25, 0.25});
  EXPECT_EQ(compress_topk(p, 0, 3).ids, (std::vector<int32_t>{0, 1, 2}));
}

TEST(Kld, ScoreboardSummary) {
  // kld {0.1, 0.2, 0.3, 0.4}; dp {0.1, -0.1, 0.2, 0}; nll_q {1, 2, 1, 2}; nll_ref {1, 1, 1, 1}.
  std::vector<KldSample> xs = {{0.1, 1, 1, 0.1, true}, {0.2, 1, 2, -0.1, true}, {0.3, 1, 1, 0.2, false}, {0.4, 1, 2, 0, true}};
  const KldReport r = summarize_kld(xs);
  EXPECT_EQ(r.n, 4);
  EXPECT_NEAR(r.kld.mean, 0.25, 1e-12);
  EXPECT_NEAR(r.kld.se, std::sqrt(0.05 / 3 / 4), 1e-12);
  EXPECT_NEAR(r.kld_ci95.lo, 0.25 - 1.959964 * std::sqrt(0.05 / 12), 1e-6);
  EXPECT_NEAR(r.kld_median, 0.25, 1e-12);
  EXPECT_NEAR(r.kld_max, 0.4, 1e-12);
  EXPECT_NEAR(r.kld_p99, 0.397, 1e-12);
  EXPECT_EQ(r.same_top1.k, 3);
  EXPECT_NEAR(r.rms_dp, std::sqrt(0.015), 1e-12);
  EXPECT_NEAR(r.ppl_q, std::exp(1.5), 1e-12);
  EXPECT_NEAR(r.ppl_ref, std::exp(1.0), 1e-12);
  EXPECT_NEAR(r.ppl_ratio, std::exp(0.5), 1e-12);
  EXPECT_NEAR(r.delta_ppl, std::exp(1.5) - std::exp(1.0), 1e-12);
  // nll_ref is constant: ΔPPL's error is PPL(Q)'s.
  EXPECT_NEAR(r.delta_ppl_se, r.ppl_q_se, 1e-12);
}

class LogitsFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("frugal_eval_logits_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(LogitsFileTest, RoundTripAndCorruption) {
  const std::string path = (dir_ / "ref.bin").string();
  const auto p = logs({0.5, 0.25, 0.125, 0.125});
  LogitsHeader h{.model_hash = 42, .vocab = 4, .ctx = 4, .stride = 4, .top_k = 2, .first = 2, .bos = -1,
                 .n_chunks = 1, .n_tokens = 4, .n_scored = 1, .tokens_hash = 0};
  {
    auto w = LogitsWriter::open(path, h, {3, 2, 1, 0});
    ASSERT_TRUE(w.is_ok()) << w.status().to_string();
    ASSERT_TRUE((*w)->add(compress_topk(p, 0, 2)).is_ok());
    ASSERT_TRUE((*w)->close().is_ok());
  }
  EXPECT_EQ(std::filesystem::file_size(path), 80u + 16u + (12u + 16u));
  auto r = read_logits_file(path);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->header.model_hash, 42u);
  EXPECT_EQ(r->header.vocab, 4);
  EXPECT_EQ(r->tokens, (std::vector<int32_t>{3, 2, 1, 0}));
  ASSERT_EQ(r->records.size(), 1u);
  EXPECT_EQ(r->records[0].ids, (std::vector<int32_t>{0, 1}));
  EXPECT_FLOAT_EQ(r->records[0].next_logprob, p[0]);
  EXPECT_NEAR(std::exp(r->records[0].log_rest), 0.25, 1e-6);

  // Truncated.
  std::filesystem::resize_file(path, 100);
  auto t = read_logits_file(path);
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("truncated"), std::string::npos) << t.status().message();
  // Not ours.
  std::ofstream(path) << "hello, this is not a logits file at all, but it is long enough for a header....";
  auto m = read_logits_file(path);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("magic"), std::string::npos);
  EXPECT_FALSE(read_logits_file((dir_ / "missing.bin").string()).is_ok());
}

}  // namespace
}  // namespace frugal::eval
