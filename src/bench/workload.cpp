#include "bench/workload.h"

#include <algorithm>
#include <cmath>

namespace frugal::bench {

std::vector<int32_t> random_prompt(SplitMix64& rng, int32_t len, int32_t vocab) {
  std::vector<int32_t> p(static_cast<size_t>(std::max(0, len)));
  for (auto& t : p) t = static_cast<int32_t>(3 + rng.next() % static_cast<uint64_t>(std::max(1, vocab - 3)));
  return p;
}

Result<LengthDist> parse_length_dist(std::string_view name) {
  if (name == "uniform") return LengthDist::kUniform;
  if (name == "log-uniform") return LengthDist::kLogUniform;
  return invalid_argument("length distribution: expected uniform or log-uniform, got '" + std::string(name) + "'");
}

const char* length_dist_name(LengthDist d) {
  switch (d) {
    case LengthDist::kUniform: return "uniform";
    case LengthDist::kLogUniform: return "log-uniform";
  }
  return "?";
}

int32_t sample_length(SplitMix64& rng, int32_t lo, int32_t hi, LengthDist d) {
  if (hi <= lo) return lo;
  switch (d) {
    case LengthDist::kUniform:
      return lo + static_cast<int32_t>(rng.next() % static_cast<uint64_t>(hi - lo + 1));
    case LengthDist::kLogUniform: {
      // floor(exp(U[log lo, log(hi + 1)))) lands in [lo, hi] with log-uniform mass.
      const double a = std::log(static_cast<double>(lo)), b = std::log(static_cast<double>(hi) + 1.0);
      const double v = std::floor(std::exp(a + (b - a) * rng.uniform()));
      return std::clamp(static_cast<int32_t>(v), lo, hi);
    }
  }
  return lo;
}

Status check_range(const LengthRange& r, int32_t min_allowed, const std::string& flag) {
  if (r.lo < min_allowed) {
    return invalid_argument(flag + ": minimum must be >= " + std::to_string(min_allowed) + ", got " +
                            std::to_string(r.lo));
  }
  if (r.lo > r.hi) {
    return invalid_argument(flag + ": minimum " + std::to_string(r.lo) + " is greater than maximum " +
                            std::to_string(r.hi));
  }
  return Status::ok();
}

}  // namespace frugal::bench
