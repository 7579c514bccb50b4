// Prometheus metrics for /metrics (prometheus-cpp core registry, text exposition format).
// Request counters and latency histograms are observed by the server; engine gauges (running,
// waiting, KV usage, prefix-cache hit rate, preemptions) are refreshed from Engine::stats() at
// scrape time so they are never stale.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "runtime/engine.h"

namespace prometheus {
class Registry;
}

namespace frugal::server {

class Metrics {
 public:
  Metrics();
  ~Metrics();
  void count_request(const std::string& endpoint, int status);
  void observe_tokens(int64_t prompt_tokens, int64_t generation_tokens);
  void observe_ttft(double seconds);
  void observe_itl(double seconds);
  void observe_e2e(double seconds);
  // Refreshes engine gauges from `stats` and returns the text exposition.
  std::string render(const runtime::EngineStats& stats);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace frugal::server
