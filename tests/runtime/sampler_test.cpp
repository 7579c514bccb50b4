// Sampler: each filter against distributions computed by hand, penalties against their
// definitions, the RNG against its published algorithm, and seeded reproducibility.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/sampler.h"

namespace frugal::runtime {
namespace {

// Logits 0, ln 2, ln 4: softmax = [1, 2, 4] / 7.
std::vector<float> base_logits() { return {0.0f, std::log(2.0f), std::log(4.0f)}; }

std::vector<double> dist(SamplingParams p, std::vector<float> logits = base_logits(),
                         std::vector<int32_t> prompt = {}, std::vector<int32_t> output = {}) {
  p.seed = 1;
  Sampler s(p);
  return s.distribution(logits, prompt, output);
}

void expect_probs(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
}

TEST(Rng, MatchesReferenceXoshiro256StarStar) {
  // splitmix64 from state 0 yields 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, ... (Vigna's
  // splitmix64.c); xoshiro256** outputs from that state computed with the reference algorithm.
  Rng r(0);
  EXPECT_EQ(r.next(), 0x99ec5f36cb75f2b4ull);
  EXPECT_EQ(r.next(), 0xbf6e1f784956452aull);
  EXPECT_EQ(r.next(), 0x1a5f849d4933e6e0ull);
}

TEST(Sampler, GreedyIsArgmaxLowestIdOnTies) {
  SamplingParams p{.temperature = 0};
  p.seed = 1;
  Sampler s(p);
  std::vector<float> l = {1, 5, 5, 2};
  EXPECT_EQ(s.sample(l, {}, {}), 1);
}

TEST(Sampler, Temperature) {
  expect_probs(dist({.temperature = 1}), {1 / 7.0, 2 / 7.0, 4 / 7.0});
  expect_probs(dist({.temperature = 0.5f}), {1 / 21.0, 4 / 21.0, 16 / 21.0});  // squared weights
}

TEST(Sampler, TopK) { expect_probs(dist({.temperature = 1, .top_k = 2}), {0, 2 / 6.0, 4 / 6.0}); }

TEST(Sampler, TopP) {
  expect_probs(dist({.temperature = 1, .top_p = 0.5f}), {0, 0, 1});          // 4/7 >= 0.5
  expect_probs(dist({.temperature = 1, .top_p = 0.6f}), {0, 2 / 6.0, 4 / 6.0});  // 4/7 < 0.6
}

TEST(Sampler, MinP) {
  // Keep p >= 0.3 * 4/7 = 0.171: drops 1/7, keeps 2/7.
  expect_probs(dist({.temperature = 1, .min_p = 0.3f}), {0, 1 / 3.0, 2 / 3.0});
}

TEST(Sampler, RepetitionPenaltyDividesPositiveMultipliesNegative) {
  // Seen tokens 0 (logit 2 -> 1) and 1 (logit -1 -> -2); token 2 (0.5) untouched.
  SamplingParams p{.temperature = 1, .repetition_penalty = 2};
  const auto got = dist(p, {2.0f, -1.0f, 0.5f}, {0}, {1, 1});
  const double w[] = {std::exp(1.0), std::exp(-2.0), std::exp(0.5)}, z = w[0] + w[1] + w[2];
  expect_probs(got, {w[0] / z, w[1] / z, w[2] / z});
}

TEST(Sampler, PresenceAndFrequencyPenaltiesUseOutputCounts) {
  // Output [2, 2, 0]: token 0 -= 0.5 + 0.25, token 2 -= 0.5 + 2 * 0.25; prompt tokens ignored.
  SamplingParams p{.temperature = 1, .presence_penalty = 0.5f, .frequency_penalty = 0.25f};
  const auto got = dist(p, {0.0f, 0.0f, 0.0f}, {1, 1}, {2, 2, 0});
  const double w[] = {std::exp(-0.75), 1.0, std::exp(-1.0)}, z = w[0] + w[1] + w[2];
  expect_probs(got, {w[0] / z, w[1] / z, w[2] / z});
}

TEST(Sampler, DrawsFollowTheDistribution) {
  SamplingParams p{.temperature = 1};
  p.seed = 42;
  Sampler s(p);
  const int n = 20000;
  std::vector<int> counts(3, 0);
  for (int i = 0; i < n; ++i) {
    auto l = base_logits();
    ++counts[static_cast<size_t>(s.sample(l, {}, {}))];
  }
  // 5 standard deviations (sqrt(p (1 - p) / n) <= 0.0036).
  const double want[] = {1 / 7.0, 2 / 7.0, 4 / 7.0};
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(counts[static_cast<size_t>(i)] / static_cast<double>(n), want[i], 0.018) << i;
}

TEST(Sampler, SameSeedSameTokens) {
  auto run = [](uint64_t seed) {
    SamplingParams p{.temperature = 1};
    p.seed = seed;
    Sampler s(p);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) {
      std::vector<float> l = {0.1f, 0.2f, 0.3f, 0.0f, -0.5f};
      out.push_back(s.sample(l, {}, {}));
    }
    return out;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST(Sampler, ValidateNamesParameter) {
  EXPECT_NE(validate({.temperature = -1}).message().find("temperature"), std::string::npos);
  EXPECT_NE(validate({.top_p = 0}).message().find("top_p"), std::string::npos);
  EXPECT_NE(validate({.top_k = -2}).message().find("top_k"), std::string::npos);
  EXPECT_NE(validate({.min_p = 2}).message().find("min_p"), std::string::npos);
  EXPECT_NE(validate({.repetition_penalty = 0}).message().find("repetition_penalty"), std::string::npos);
  EXPECT_TRUE(validate({}).is_ok());
}

}  // namespace
}  // namespace frugal::runtime
