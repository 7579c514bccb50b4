// Per-step engine stats for the offline benchmarks. run_offline installs on_step() as
// EngineOptions::step_observer; a benchmark phase brackets itself with start() / stop() and
// gets one sample per executed engine step (stats as of the end of the step).
#pragma once

#include <mutex>
#include <vector>

#include "bench/request_log.h"
#include "runtime/engine.h"

namespace frugal::bench {

struct StepSample {
  Clock::time_point t;  // when the step's stats were published
  runtime::EngineStats stats;
};

class StepRecorder {
 public:
  void start() {
    std::lock_guard<std::mutex> lk(mu_);
    samples_.clear();
    active_ = true;
  }
  std::vector<StepSample> stop() {
    std::lock_guard<std::mutex> lk(mu_);
    active_ = false;
    return std::move(samples_);
  }
  // Engine thread: cheap (one append under an uncontended lock).
  void on_step(const runtime::EngineStats& s) {
    const auto now = Clock::now();
    std::lock_guard<std::mutex> lk(mu_);
    if (active_) samples_.push_back({now, s});
  }

 private:
  std::mutex mu_;
  bool active_ = false;
  std::vector<StepSample> samples_;
};

}  // namespace frugal::bench
