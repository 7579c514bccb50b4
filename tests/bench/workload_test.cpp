// Request-length distributions of the offline benchmarks against their closed forms: the
// median of uniform integers on [lo, hi] is (lo + hi) / 2, of log-uniform ones about
// sqrt(lo * (hi + 1)); both stay inside the range and reach its ends.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "bench/workload.h"

namespace frugal::bench {
namespace {

std::vector<double> draw(LengthDist d, int32_t lo, int32_t hi, int n) {
  SplitMix64 rng(42);
  std::vector<double> xs;
  for (int i = 0; i < n; ++i) xs.push_back(sample_length(rng, lo, hi, d));
  return xs;
}

TEST(Workload, UniformLengthsCoverTheRange) {
  const auto xs = draw(LengthDist::kUniform, 16, 4096, 20000);
  EXPECT_EQ(*std::min_element(xs.begin(), xs.end()), 16);
  EXPECT_EQ(*std::max_element(xs.begin(), xs.end()), 4096);
  // Median of U{16..4096} is 2056; the sample median's sd is ~ 4080 / (2 sqrt(20000)) = 14.
  EXPECT_NEAR(median(xs), 2056, 80);
}

TEST(Workload, LogUniformLengthsHaveTheGeometricMedian) {
  const auto xs = draw(LengthDist::kLogUniform, 16, 4096, 20000);
  EXPECT_GE(*std::min_element(xs.begin(), xs.end()), 16);
  EXPECT_LE(*std::max_element(xs.begin(), xs.end()), 4096);
  EXPECT_EQ(*std::min_element(xs.begin(), xs.end()), 16);
  // exp((ln 16 + ln 4097) / 2) = 256.03; floor() shifts it down by < 1.
  EXPECT_NEAR(median(xs), 256, 15);
  // As many draws per octave: [16, 32) and [2048, 4096] each hold ~1/8 of them.
  const auto in = [&](double a, double b) {
    return std::count_if(xs.begin(), xs.end(), [&](double x) { return x >= a && x < b; }) / 20000.0;
  };
  EXPECT_NEAR(in(16, 32), 0.125, 0.015);
  EXPECT_NEAR(in(2048, 4097), 0.125, 0.015);
}

TEST(Workload, DegenerateRangeAndParsing) {
  SplitMix64 rng(1);
  EXPECT_EQ(sample_length(rng, 7, 7, LengthDist::kUniform), 7);
  EXPECT_EQ(sample_length(rng, 7, 7, LengthDist::kLogUniform), 7);
  EXPECT_EQ(*parse_length_dist("log-uniform"), LengthDist::kLogUniform);
  EXPECT_EQ(*parse_length_dist("uniform"), LengthDist::kUniform);
  EXPECT_FALSE(parse_length_dist("normal").is_ok());
  EXPECT_TRUE(check_range({.lo = 1, .hi = 1}, 1, "--x").is_ok());
  const Status bad = check_range({.lo = 9, .hi = 3}, 1, "--x-range");
  EXPECT_FALSE(bad.is_ok());
  EXPECT_NE(bad.to_string().find("--x-range"), std::string::npos);
  EXPECT_FALSE(check_range({.lo = 0, .hi = 3}, 1, "--x").is_ok());
}

TEST(Workload, RandomPromptsAvoidTheLowestIds) {
  SplitMix64 rng(3);
  const auto p = random_prompt(rng, 1000, 512);
  ASSERT_EQ(p.size(), 1000u);
  EXPECT_GE(*std::min_element(p.begin(), p.end()), 3);
  EXPECT_LT(*std::max_element(p.begin(), p.end()), 512);
}

}  // namespace
}  // namespace frugal::bench
