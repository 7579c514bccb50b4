// Mixed-length load (issue 5, acceptance 4): requests with prompt and output lengths drawn from
// ranges, submitted at once (or at a Poisson rate) against a KV pool that may be much smaller
// than their total demand. Checks that every request completes with exactly its output length
// (none fails for lack of memory: they wait or are preempted instead) and reports KV usage and
// fragmentation sampled after every engine step. docs/bench_offline.md has the definitions.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "bench/step_recorder.h"
#include "bench/workload.h"
#include "core/status.h"
#include "runtime/engine.h"

namespace frugal::bench {

struct MixedLoadOptions {
  int32_t num_prompts = 0;  // 0 = skip
  LengthRange input{.lo = 16, .hi = 4096};
  LengthRange output{.lo = 1, .hi = 1024};
  LengthDist dist = LengthDist::kUniform;
  double rate = 0;                  // requests per second, Poisson arrivals; 0 = all at once
  double max_fragmentation = 0.04;  // pass threshold (fraction of allocated KV slots)
};

// Checks the options against the engine (context length); the message names the flag.
Status check_mixed_load(const MixedLoadOptions& o, int32_t max_model_len);

// Runs the load on a started engine whose step_observer feeds `steps`. The JSON holds the
// configuration, counts, throughput, KV usage, fragmentation and the "pass" verdict.
Result<nlohmann::json> run_mixed_load(runtime::Engine& engine, StepRecorder& steps, const MixedLoadOptions& o,
                                      int32_t block_size, SplitMix64& rng);

}  // namespace frugal::bench
