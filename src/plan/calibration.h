// Calibration: read `frugal bench` results (schema in docs/plan.md), fit the efficiency
// factors of the time model to them, and report predicted vs measured.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "plan/speed.h"

namespace frugal::plan {

struct BenchPoint {
  std::string kind;  // "decode" | "prefill"
  int64_t batch = 1;
  int64_t prompt_len = 0;
  double kv_len = 0;  // decode: mean KV length over the timed window
  double tok_per_s = 0;
};

struct BenchResults {
  std::string path;
  std::string model, gpu, precision, kv_dtype;
  int gpus = 1;
  std::vector<BenchPoint> points;
  std::vector<std::string> skipped;  // entries not used ("throughput", malformed), with why
};

Result<BenchResults> load_bench_results(const std::string& path);

struct CalibrationRow {
  BenchPoint point;
  double predicted_before = 0;  // tok/s with the factors before calibration
  double predicted_after = 0;   // tok/s with the fitted factors
  double error_before_pct() const;  // (predicted - measured) / measured x 100
  double error_after_pct() const;
};

struct CalibrationReport {
  std::string path;
  Efficiency before, after;
  std::vector<CalibrationRow> rows;
  std::vector<std::string> notes;  // how each factor was fitted, mismatches, clamps
};

// Fits decode_bw to batch-1 decode points, decode_mfu to batched decode points slower than the
// bandwidth bound, and prefill_mfu to prefill points. Factors without data keep their value.
CalibrationReport calibrate(const SpeedModel& m, const BenchResults& bench);

}  // namespace frugal::plan
