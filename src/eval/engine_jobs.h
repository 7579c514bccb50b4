// Runs many requests through the engine with a bounded number in flight, optionally ordering
// them: a job with `after` >= 0 is submitted only once job `after` has finished. frugal eval mc
// uses this to let one question per subject fill the prefix cache with the shared few-shot
// prompt before the subject's other questions arrive (which then hit it).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/status.h"
#include "runtime/engine.h"

namespace frugal::eval {

struct EngineJob {
  runtime::GenerateRequest req;
  int64_t after = -1;  // index of a job that must finish first; -1: none
};

struct EngineJobResult {
  std::vector<int32_t> tokens;
  std::vector<runtime::TokenLogprob> scored;
  runtime::FinishReason finish = runtime::FinishReason::kNone;
  int32_t prompt_tokens = 0;
  int32_t cached_prompt_tokens = 0;
};

// Results in job order. Stops at the first error (a refused submit or a request that ended in
// kError) after the requests in flight finished, returning it with the job's index.
// `after` must point to an earlier job. on_done(n) runs on the calling thread.
Result<std::vector<EngineJobResult>> run_engine_jobs(runtime::Engine& engine, std::vector<EngineJob> jobs,
                                                     int32_t max_in_flight,
                                                     const std::function<void(int64_t n_done)>& on_done = {});

}  // namespace frugal::eval
