// Inter-token-latency probe (issue 5, acceptance 5): `batch` sequences decode steadily; then one
// request with a long prompt arrives. Chunked prefill should keep the decoders' inter-token
// latency (ITL) near its previous median while the long prompt is prefilled. Measured from the
// token arrival times of the decoders' callbacks, split by engine step (docs/bench_offline.md).
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "bench/stats.h"
#include "bench/step_recorder.h"
#include "core/status.h"
#include "runtime/engine.h"

namespace frugal::bench {

struct ItlProbeOptions {
  int32_t batch = 0;            // decoding sequences; 0 = skip the probe
  int32_t prompt_len = 32;      // the decoders' prompts
  int32_t long_prompt = 10000;  // the long request's prompt
  int32_t warmup_tokens = 8;    // tokens each decoder produces before the "before" window
  int32_t window = 32;          // ITL samples per decoder before and after the long prefill
  double max_ratio = 2.0;       // pass: median ITL during / median ITL before <= max_ratio
};

// Checks the options against the engine configuration; the message names the flag.
Status check_itl_probe(const ItlProbeOptions& o, const runtime::EngineOptions& eo, int32_t max_model_len);

// Runs the probe on a started engine whose step_observer feeds `steps`.
Result<nlohmann::json> run_itl_probe(runtime::Engine& engine, StepRecorder& steps, const ItlProbeOptions& o,
                                     const runtime::EngineOptions& eo, SplitMix64& rng);

}  // namespace frugal::bench
