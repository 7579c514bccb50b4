// Summary statistics for benchmarks: percentiles, bootstrap confidence intervals, goodput.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace frugal::bench {

// Percentile q in [0, 100] with linear interpolation between closest ranks (NumPy's default
// "linear" method): rank = q/100 * (n - 1). Empty input gives NaN.
double percentile(std::span<const double> xs, double q);
double mean(std::span<const double> xs);
double median(std::span<const double> xs);
double stddev(std::span<const double> xs);  // sample standard deviation (n - 1)

struct Interval {
  double lo = 0;
  double hi = 0;
};

// Percentile-bootstrap confidence interval of statistic `stat` (e.g. the median or P99):
// n_resamples resamples with replacement, deterministic for a seed.
enum class Statistic { kMean, kMedian, kP90, kP99 };
double compute_statistic(std::span<const double> xs, Statistic stat);
Interval bootstrap_ci(std::span<const double> xs, Statistic stat, double confidence = 0.95,
                      int n_resamples = 1000, uint64_t seed = 0x5eed);

// A value with its 95% bootstrap interval.
struct Estimate {
  double value = 0;
  Interval ci95;
};
Estimate estimate(std::span<const double> xs, Statistic stat);

// Everything a latency report needs.
struct Summary {
  int64_t n = 0;
  Estimate mean, median, p90, p99;
  double min = 0, max = 0, stddev = 0;
};
Summary summarize(std::span<const double> xs);

// Goodput: fraction (and count) of requests that met every SLO given (<= 0 means unset).
struct SloSpec {
  double ttft_ms = 0;
  double tpot_ms = 0;
  double e2e_ms = 0;
};
struct RequestTiming {
  double ttft_ms = 0;
  double tpot_ms = 0;
  double e2e_ms = 0;
};
int64_t count_meeting_slo(std::span<const RequestTiming> reqs, const SloSpec& slo);

// SplitMix64: a tiny, fixed random generator (same stream on every platform).
struct SplitMix64 {
  uint64_t state;
  explicit SplitMix64(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
};

}  // namespace frugal::bench
