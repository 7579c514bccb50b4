// What the offline benchmarks record per request: submission time, the arrival time of every
// streamed token (taken in the engine-thread callback) and how the request ended.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/engine.h"

namespace frugal::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_between(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration<double>(t1 - t0).count();
}

struct RequestRecord {
  uint64_t id = 0;  // engine request id (0 when submit() refused it)
  Clock::time_point submitted;
  std::vector<Clock::time_point> token_times;  // one entry per streamed token
  bool finished = false;
  runtime::FinishReason finish = runtime::FinishReason::kNone;
  std::string error;  // submit() refusal or the engine's error
};

// Thread-safe log of n requests; callback(i) is the OutputCallback of request i.
class RequestLog {
 public:
  explicit RequestLog(size_t n) : reqs_(n) {}

  runtime::OutputCallback callback(size_t i);
  // Submits request i with callback(i). A refusal is recorded as a finished request with
  // FinishReason::kError (benchmarks count it as a failure) and returned.
  Status submit(runtime::Engine& engine, size_t i, runtime::GenerateRequest req);
  // Submits reqs as requests 0 .. reqs.size() - 1 in one Engine::submit_batch, so the engine
  // takes them in one step. A refusal refuses them all: each is recorded as failed.
  Status submit_all(runtime::Engine& engine, std::vector<runtime::GenerateRequest> reqs);
  // Blocks until pred(records) holds; pred is re-checked after every output. Returns false when
  // every request has finished and pred still does not hold (waiting longer could not help).
  bool wait_until(const std::function<bool(const std::vector<RequestRecord>&)>& pred);
  void wait_all_finished();
  std::vector<RequestRecord> snapshot() const;
  size_t size() const { return reqs_.size(); }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<RequestRecord> reqs_;
  size_t n_finished_ = 0;
};

}  // namespace frugal::bench
