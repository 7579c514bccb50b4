// The load generator of `frugal bench serve`: one thread, one Asio event loop, one coroutine per
// request in flight (1000 concurrent streams cost 1000 coroutines, not 1000 threads). Arrivals
// are Poisson at a given rate (seeded) or all at once (rate inf), capped by max concurrency, for
// a number of prompts or a duration.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/serve_request.h"

namespace frugal::bench {

struct LoadOptions {
  Url url;
  std::string target;  // "/v1/completions"
  std::map<std::string, std::string> headers;
  RequestOptions request;
  double request_rate = 0;      // requests/s; <= 0 or inf: all at once
  int32_t max_concurrency = 0;  // 0: unlimited
  int64_t num_prompts = 0;      // requests to send (prompts are cycled); ignored when duration_s > 0
  double duration_s = 0;       // > 0: send until then, then wait for those in flight
  double timeout_s = 600;       // per request
  uint64_t seed = 0;
  bool progress = false;        // progress bar on stderr
  std::string label;            // shown next to the progress bar
};

struct LoadResult {
  std::vector<RequestRecord> records;  // in issue order
  double wall_s = 0;                   // first request sent -> last finished
  int32_t peak_concurrency = 0;
};

// Errors only for setup (unresolvable host); request failures are in the records.
Result<LoadResult> run_load(const LoadOptions& o, const std::vector<BenchPrompt>& prompts, const Tokenizer* tok);

// Inter-arrival gaps of a Poisson process at `rate` requests/s, deterministic for a seed.
std::vector<double> poisson_gaps(double rate, int64_t n, uint64_t seed);

}  // namespace frugal::bench
