#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace frugal::bench {
namespace {

double percentile_sorted(const std::vector<double>& s, double q) {
  if (s.empty()) return std::numeric_limits<double>::quiet_NaN();
  double rank = q / 100.0 * static_cast<double>(s.size() - 1);
  auto lo = static_cast<size_t>(std::floor(rank));
  size_t hi = std::min(lo + 1, s.size() - 1);
  double frac = rank - static_cast<double>(lo);
  return s[lo] + (s[hi] - s[lo]) * frac;
}

}  // namespace

double percentile(std::span<const double> xs, double q) {
  std::vector<double> s(xs.begin(), xs.end());
  std::sort(s.begin(), s.end());
  return percentile_sorted(s, q);
}

double mean(std::span<const double> xs) {
  if (xs.empty()) return std::numeric_limits<double>::quiet_NaN();
  return std::accumulate(xs.begin(), xs.end(), 0.0) / static_cast<double>(xs.size());
}

double median(std::span<const double> xs) { return percentile(xs, 50); }

double stddev(std::span<const double> xs) {
  if (xs.size() < 2) return 0;
  double m = mean(xs), ss = 0;
  for (double x : xs) ss += (x - m) * (x - m);
  return std::sqrt(ss / static_cast<double>(xs.size() - 1));
}

double compute_statistic(std::span<const double> xs, Statistic stat) {
  switch (stat) {
    case Statistic::kMean: return mean(xs);
    case Statistic::kMedian: return percentile(xs, 50);
    case Statistic::kP90: return percentile(xs, 90);
    case Statistic::kP99: return percentile(xs, 99);
  }
  return std::numeric_limits<double>::quiet_NaN();
}

Interval bootstrap_ci(std::span<const double> xs, Statistic stat, double confidence,
                      int n_resamples, uint64_t seed) {
  if (xs.empty()) {
    double nan = std::numeric_limits<double>::quiet_NaN();
    return {nan, nan};
  }
  SplitMix64 rng(seed);
  std::vector<double> stats(static_cast<size_t>(n_resamples));
  std::vector<double> sample(xs.size());
  for (int r = 0; r < n_resamples; ++r) {
    for (double& v : sample) v = xs[rng.next() % xs.size()];
    stats[static_cast<size_t>(r)] = compute_statistic(sample, stat);
  }
  std::sort(stats.begin(), stats.end());
  double alpha = (1.0 - confidence) / 2.0;
  return {percentile_sorted(stats, alpha * 100.0), percentile_sorted(stats, (1.0 - alpha) * 100.0)};
}

Estimate estimate(std::span<const double> xs, Statistic stat) {
  return {compute_statistic(xs, stat), bootstrap_ci(xs, stat)};
}

Summary summarize(std::span<const double> xs) {
  Summary s;
  s.n = static_cast<int64_t>(xs.size());
  if (xs.empty()) return s;
  s.mean = estimate(xs, Statistic::kMean);
  s.median = estimate(xs, Statistic::kMedian);
  s.p90 = estimate(xs, Statistic::kP90);
  s.p99 = estimate(xs, Statistic::kP99);
  auto [mn, mx] = std::minmax_element(xs.begin(), xs.end());
  s.min = *mn;
  s.max = *mx;
  s.stddev = stddev(xs);
  return s;
}

int64_t count_meeting_slo(std::span<const RequestTiming> reqs, const SloSpec& slo) {
  int64_t n = 0;
  for (const auto& r : reqs) {
    bool ok = (slo.ttft_ms <= 0 || r.ttft_ms <= slo.ttft_ms) &&
              (slo.tpot_ms <= 0 || r.tpot_ms <= slo.tpot_ms) &&
              (slo.e2e_ms <= 0 || r.e2e_ms <= slo.e2e_ms);
    n += ok ? 1 : 0;
  }
  return n;
}

}  // namespace frugal::bench
