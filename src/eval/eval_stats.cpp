#include "eval/eval_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace frugal::eval {

MeanSe mean_se(std::span<const double> xs) {
  MeanSe r;
  r.n = static_cast<int64_t>(xs.size());
  if (xs.empty()) return r;
  double sum = 0;
  for (double x : xs) sum += x;
  r.mean = sum / static_cast<double>(xs.size());
  if (xs.size() < 2) return r;
  double ss = 0;
  for (double x : xs) ss += (x - r.mean) * (x - r.mean);
  r.se = std::sqrt(ss / static_cast<double>(xs.size() - 1) / static_cast<double>(xs.size()));
  return r;
}

Interval wilson(int64_t k, int64_t n, double z) {
  if (n <= 0) return {0, 1};
  const double nn = static_cast<double>(n);
  const double p = static_cast<double>(k) / nn;
  const double z2 = z * z;
  const double denom = 1 + z2 / nn;
  const double center = (p + z2 / (2 * nn)) / denom;
  const double half = z * std::sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn)) / denom;
  return {std::max(0.0, center - half), std::min(1.0, center + half)};
}

Proportion proportion(int64_t k, int64_t n) {
  Proportion r{.k = k, .n = n, .p = 0, .se = 0, .ci95 = wilson(k, n)};
  if (n <= 0) return r;
  r.p = static_cast<double>(k) / static_cast<double>(n);
  if (n > 1) r.se = std::sqrt(r.p * (1 - r.p) / static_cast<double>(n - 1));
  return r;
}

double percentile(std::span<const double> xs, double q) {
  if (xs.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::vector<double> v(xs.begin(), xs.end());
  std::sort(v.begin(), v.end());
  const double rank = q / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  const double f = rank - static_cast<double>(lo);
  return v[lo] + (v[hi] - v[lo]) * f;
}

}  // namespace frugal::eval
