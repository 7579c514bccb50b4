// Figures of `frugal bench serve` from the request records: latency summaries with bootstrap
// CIs, throughput, goodput, errors by kind, cost and energy per 1M tokens, soak windows; and
// their renderings (terminal table, markdown, CSV). Schema: docs/bench_serve.md.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/serve_runner.h"
#include "bench/stats.h"

namespace frugal::bench {

struct CostSpec {
  double usd_per_hour = 0;  // all GPUs together; <= 0: no cost figures
  int32_t gpus = 1;
  std::string gpu;          // catalog name, "" when only a price was given
  std::string price_source;
};

struct ReportOptions {
  SloSpec slo;
  CostSpec cost;
  double window_s = 0;  // soak windows (duration runs); <= 0: duration / 10
};

// One run (one rate x concurrency point). `telemetry` is the sampler's summary for that run.
nlohmann::json run_report(const LoadResult& load, const LoadOptions& o, const ReportOptions& ro,
                          const nlohmann::json& telemetry);

// {"n", "mean": {"value", "ci95": [lo, hi]}, "median", "p90", "p99", "min", "max", "stddev"}.
// Bootstrap resamples shrink for very large samples (ITL) to bound the time (>= 200).
nlohmann::json summary_json(const std::vector<double>& xs);

// The cost block from throughput and price (pure arithmetic, documented in docs/bench_serve.md).
nlohmann::json cost_json(const CostSpec& c, double output_tok_per_s, double total_tok_per_s,
                         double output_tokens, double total_tokens, const nlohmann::json& telemetry);

// Least-squares slope of ys over xs (0 for fewer than two points).
double slope(const std::vector<double>& xs, const std::vector<double>& ys);

// Renderings of the whole report ({"config", "runs": [...]}).
std::string format_serve_table(const nlohmann::json& report);
std::string format_serve_markdown(const nlohmann::json& report);
std::string format_serve_csv(const nlohmann::json& report);

}  // namespace frugal::bench
