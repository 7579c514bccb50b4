// Statistics of the eval reports (docs/eval.md): means with standard errors, binomial
// proportions with Wilson intervals, percentiles.
#pragma once

#include <cstdint>
#include <span>

namespace frugal::eval {

constexpr double kZ95 = 1.959963984540054;  // two-sided 95% normal quantile

struct MeanSe {
  double mean = 0;
  double se = 0;  // sample standard deviation / sqrt(n) (0 when n < 2)
  int64_t n = 0;
};
MeanSe mean_se(std::span<const double> xs);

// Wilson score interval of k successes in n trials (95% with the default z).
struct Interval {
  double lo = 0;
  double hi = 0;
};
Interval wilson(int64_t k, int64_t n, double z = kZ95);

// A proportion with its standard error sqrt(p (1 - p) / (n - 1)) (the sample standard error of
// 0/1 outcomes, as lm-evaluation-harness reports) and its Wilson 95% interval.
struct Proportion {
  int64_t k = 0;
  int64_t n = 0;
  double p = 0;
  double se = 0;
  Interval ci95;
};
Proportion proportion(int64_t k, int64_t n);

// NumPy-style linear-interpolation percentile, q in [0, 100]; sorts a copy. NaN when empty.
double percentile(std::span<const double> xs, double q);

}  // namespace frugal::eval
