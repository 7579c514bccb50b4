// Statistics checked against values computed independently: hand-worked NumPy "linear"
// percentiles, and the bootstrap's coverage and width against normal-theory values.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "bench/stats.h"

namespace frugal::bench {
namespace {

TEST(Percentile, MatchesNumpyLinearMethod) {
  // np.percentile([1,2,3,4], 90) = 3.7 ; np.percentile([15,20,35,40,50], 40) = 29.0
  std::vector<double> a{4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(percentile(a, 90), 3.7);
  EXPECT_DOUBLE_EQ(percentile(a, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile(a, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(a, 100), 4);
  std::vector<double> b{15, 20, 35, 40, 50};
  EXPECT_DOUBLE_EQ(percentile(b, 40), 29.0);
  EXPECT_DOUBLE_EQ(median(b), 35);
  EXPECT_DOUBLE_EQ(mean(b), 32);
  // sample std of b: sqrt(((17^2)+(12^2)+(3^2)+(8^2)+(18^2))/4) = sqrt(830/4)
  EXPECT_NEAR(stddev(b), std::sqrt(830.0 / 4), 1e-12);
  EXPECT_TRUE(std::isnan(percentile(std::vector<double>{}, 50)));
}

TEST(Bootstrap, ConstantSampleHasZeroWidth) {
  std::vector<double> c(50, 7.0);
  Interval ci = bootstrap_ci(c, Statistic::kMedian);
  EXPECT_DOUBLE_EQ(ci.lo, 7.0);
  EXPECT_DOUBLE_EQ(ci.hi, 7.0);
}

std::vector<double> normal_sample(SplitMix64& rng, int n, double mu, double sigma) {
  std::vector<double> xs;
  while (static_cast<int>(xs.size()) < n) {  // Box-Muller
    double u1 = rng.uniform(), u2 = rng.uniform();
    if (u1 <= 0) continue;
    double r = std::sqrt(-2 * std::log(u1));
    xs.push_back(mu + sigma * r * std::cos(2 * M_PI * u2));
    xs.push_back(mu + sigma * r * std::sin(2 * M_PI * u2));
  }
  xs.resize(static_cast<size_t>(n));
  return xs;
}

TEST(Bootstrap, MeanIntervalCoversTrueMeanAbout95Percent) {
  SplitMix64 rng(42);
  int covered = 0;
  const int trials = 300;
  for (int t = 0; t < trials; ++t) {
    auto xs = normal_sample(rng, 100, 10.0, 2.0);
    Interval ci = bootstrap_ci(xs, Statistic::kMean, 0.95, 400, 1000 + static_cast<uint64_t>(t));
    covered += (ci.lo <= 10.0 && 10.0 <= ci.hi) ? 1 : 0;
  }
  double coverage = static_cast<double>(covered) / trials;
  // Binomial(300, 0.95) sd ~ 1.3%; the percentile bootstrap under-covers slightly at n=100.
  EXPECT_GT(coverage, 0.89);
  EXPECT_LT(coverage, 0.99);
}

TEST(Bootstrap, MedianIntervalWidthMatchesNormalTheory) {
  SplitMix64 rng(7);
  auto xs = normal_sample(rng, 2000, 0.0, 1.0);
  Interval ci = bootstrap_ci(xs, Statistic::kMedian, 0.95, 1000, 3);
  // se(median) = sqrt(pi/2) * sigma / sqrt(n); 95% width = 2 * 1.96 * se
  double expected = 2 * 1.96 * std::sqrt(M_PI / 2) / std::sqrt(2000.0);
  double width = ci.hi - ci.lo;
  EXPECT_GT(width, 0.7 * expected);
  EXPECT_LT(width, 1.3 * expected);
}

TEST(Summary, OrderedPercentilesAndDeterminism) {
  SplitMix64 rng(9);
  auto xs = normal_sample(rng, 500, 50, 10);
  Summary a = summarize(xs), b = summarize(xs);
  EXPECT_LE(a.median.value, a.p90.value);
  EXPECT_LE(a.p90.value, a.p99.value);
  EXPECT_LE(a.p99.value, a.max);
  EXPECT_LE(a.median.ci95.lo, a.median.value);
  EXPECT_GE(a.median.ci95.hi, a.median.value);
  EXPECT_EQ(a.p99.ci95.lo, b.p99.ci95.lo);  // same seed, same interval
}

TEST(Goodput, CountsRequestsMeetingEverySlo) {
  std::vector<RequestTiming> r{{100, 10, 1000}, {300, 10, 1200}, {100, 30, 900}, {50, 5, 5000}};
  EXPECT_EQ(count_meeting_slo(r, SloSpec{.ttft_ms = 200}), 3);
  EXPECT_EQ(count_meeting_slo(r, SloSpec{.ttft_ms = 200, .tpot_ms = 20}), 2);
  EXPECT_EQ(count_meeting_slo(r, SloSpec{.ttft_ms = 200, .tpot_ms = 20, .e2e_ms = 2000}), 1);
  EXPECT_EQ(count_meeting_slo(r, SloSpec{}), 4);
}

}  // namespace
}  // namespace frugal::bench
