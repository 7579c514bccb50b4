// The sample op (ops::ref::sample, the CPU backend's sample) against values computed by hand:
// greedy is the argmax with the lowest id on ties; temperature sampling draws from
// softmax(z / T); top-k keeps the k largest; top-p the smallest head holding >= p of the mass.
// Distribution checks draw 40,000 seeds and compare frequencies with the exact probabilities
// (5 standard errors).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/thread_pool.h"
#include "ops/backend.h"
#include "ops/reference.h"

namespace frugal::ops {
namespace {

struct Rows {
  std::vector<float> logits, temperature, top_p;
  std::vector<int32_t> top_k, ids;
  std::vector<uint64_t> seeds;
  int32_t vocab = 0;
  SampleParams params() {
    return SampleParams{.logits = logits.data(), .logits_dtype = DType::kF32, .ld_logits = vocab,
                        .n_rows = static_cast<int32_t>(temperature.size()), .vocab = vocab,
                        .temperature = temperature.data(), .top_k = top_k.data(), .top_p = top_p.data(),
                        .seeds = seeds.data(), .out_ids = ids.data()};
  }
};

// n_rows copies of one logits row, seeds 1..n_rows.
Rows replicate(const std::vector<float>& row, int n_rows, float temperature, int32_t top_k, float top_p) {
  Rows r;
  r.vocab = static_cast<int32_t>(row.size());
  for (int i = 0; i < n_rows; ++i) {
    r.logits.insert(r.logits.end(), row.begin(), row.end());
    r.temperature.push_back(temperature);
    r.top_k.push_back(top_k);
    r.top_p.push_back(top_p);
    r.seeds.push_back(static_cast<uint64_t>(i) * 7919 + 1);
  }
  r.ids.assign(static_cast<size_t>(n_rows), -1);
  return r;
}

std::vector<double> frequencies(const Rows& r) {
  std::vector<double> f(static_cast<size_t>(r.vocab), 0.0);
  for (int32_t id : r.ids) f[static_cast<size_t>(id)] += 1.0 / static_cast<double>(r.ids.size());
  return f;
}

void expect_distribution(const std::vector<double>& got, const std::vector<double>& want, size_t n) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const double se = std::sqrt(std::max(want[i] * (1 - want[i]), 1e-12) / static_cast<double>(n));
    EXPECT_NEAR(got[i], want[i], 5 * se + 1e-9) << "token " << i;
  }
}

TEST(SampleOp, GreedyIsArgmaxWithLowestIdOnTies) {
  Rows r;
  r.vocab = 5;
  r.logits = {0.1f, 3.0f, -1.0f, 3.0f, 2.9f,   // tie between 1 and 3: 1
              -5.f, -4.f, -3.f, -2.f, -1.f,    // last
              NAN, 1.0f, NAN, 2.0f, 0.f};      // NaN never wins
  r.temperature = {0.f, -1.f, 0.f};
  r.top_k = {0, 0, 0};
  r.top_p = {1.f, 1.f, 1.f};
  r.seeds = {1, 2, 3};
  r.ids.assign(3, -1);
  ref::sample(r.params());
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 4, 3}));
}

TEST(SampleOp, TemperatureSamplesTheSoftmax) {
  const std::vector<float> row = {1.0f, 2.0f, 0.5f, -1.0f};
  const float T = 0.7f;
  Rows r = replicate(row, 40000, T, 0, 1.f);
  ref::sample(r.params());
  std::vector<double> want(row.size());
  double z = 0;
  for (size_t i = 0; i < row.size(); ++i) z += std::exp(row[i] / T);
  for (size_t i = 0; i < row.size(); ++i) want[i] = std::exp(row[i] / T) / z;
  expect_distribution(frequencies(r), want, r.ids.size());
}

TEST(SampleOp, TopKKeepsTheKLargest) {
  const std::vector<float> row = {0.f, 1.f, 2.f, 3.f, 2.5f};
  Rows r = replicate(row, 40000, 1.f, 2, 1.f);
  ref::sample(r.params());
  const double e3 = std::exp(3.0), e25 = std::exp(2.5);
  expect_distribution(frequencies(r), {0, 0, 0, e3 / (e3 + e25), e25 / (e3 + e25)}, r.ids.size());
}

TEST(SampleOp, TopPKeepsTheSmallestHeadWithEnoughMass) {
  // probabilities 0.5, 0.3, 0.15, 0.05: p = 0.7 keeps {0, 1} (mass 0.8), renormalized.
  const std::vector<float> row = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  Rows r = replicate(row, 40000, 1.f, 0, 0.7f);
  ref::sample(r.params());
  expect_distribution(frequencies(r), {0.5 / 0.8, 0.3 / 0.8, 0, 0}, r.ids.size());
  // p = 0.85 needs the third token too.
  Rows r2 = replicate(row, 40000, 1.f, 0, 0.85f);
  ref::sample(r2.params());
  expect_distribution(frequencies(r2), {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0}, r2.ids.size());
}

TEST(SampleOp, SameSeedSameToken) {
  const std::vector<float> row = {0.3f, 0.2f, 0.1f, 0.4f, 0.0f, 0.25f};
  Rows a = replicate(row, 64, 1.f, 0, 1.f), b = replicate(row, 64, 1.f, 0, 1.f);
  ref::sample(a.params());
  ref::sample(b.params());
  EXPECT_EQ(a.ids, b.ids);
  std::vector<int32_t> distinct(a.ids);
  std::sort(distinct.begin(), distinct.end());
  EXPECT_GT(std::unique(distinct.begin(), distinct.end()) - distinct.begin(), 3) << "seeds should vary the draw";
}

TEST(SampleOp, CpuBackendEqualsReference) {
  std::vector<float> row(1000);
  for (size_t i = 0; i < row.size(); ++i) row[i] = std::sin(static_cast<float>(i) * 0.37f) * 4.f;
  Rows a = replicate(row, 300, 0.8f, 50, 0.9f), b = replicate(row, 300, 0.8f, 50, 0.9f);
  for (size_t i = 0; i < a.temperature.size(); i += 3) a.temperature[i] = b.temperature[i] = 0.f;
  ref::sample(a.params());
  auto cpu = make_cpu_backend(&ThreadPool::global());
  ASSERT_TRUE(cpu->supports_sample());
  ASSERT_TRUE(cpu->sample(b.params()).is_ok());
  EXPECT_EQ(a.ids, b.ids);
}

}  // namespace
}  // namespace frugal::ops
