// Synthetic workloads for the offline benchmarks: random prompts and request lengths drawn from
// a seeded SplitMix64, so a run is the same on every machine.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bench/stats.h"
#include "core/status.h"

namespace frugal::bench {

// `len` random token ids in [3, vocab): the lowest ids are often special tokens, and unique
// random prompts defeat prefix caching.
std::vector<int32_t> random_prompt(SplitMix64& rng, int32_t len, int32_t vocab);

// How request lengths are drawn from an inclusive range [lo, hi]:
//   kUniform: every integer equally likely (vLLM's "random" dataset);
//   kLogUniform: log(length) uniform, i.e. as many requests in [16, 64) as in [1024, 4096).
enum class LengthDist { kUniform, kLogUniform };
Result<LengthDist> parse_length_dist(std::string_view name);  // "uniform" | "log-uniform"
const char* length_dist_name(LengthDist d);
int32_t sample_length(SplitMix64& rng, int32_t lo, int32_t hi, LengthDist d);

// An inclusive integer range given on the command line as "min,max".
struct LengthRange {
  int32_t lo = 0;
  int32_t hi = 0;
};
// Checks a range for flag `flag`: lo >= min_allowed and lo <= hi; the message names the flag.
Status check_range(const LengthRange& r, int32_t min_allowed, const std::string& flag);

}  // namespace frugal::bench
