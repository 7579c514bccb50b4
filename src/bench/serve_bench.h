// `frugal bench serve`: load against any OpenAI-compatible endpoint, one run per (request rate,
// max concurrency) point, GPU telemetry around each run, and one report with every figure and
// the exact configuration. See docs/bench_serve.md.
#pragma once

#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/serve_report.h"
#include "bench/serve_request.h"
#include "core/status.h"

namespace frugal::bench {

struct ServeBenchOptions {
  std::string url;
  std::string model;    // "": the first of GET /v1/models
  std::string api_key;  // sent as "Authorization: Bearer ..."
  std::string endpoint = "/v1/completions";
  std::string dataset = "random";  // random | path to a .jsonl
  std::string prompt_field;        // JSONL field holding the prompt ("" = guess)
  std::string tokenizer_dir;       // HF model directory with tokenizer.json ("" = none)
  RandomDatasetOptions random;     // input/output lengths, range ratio, fallback vocab
  int32_t num_prompts = 100;
  double duration_s = 0;  // > 0: soak mode
  std::vector<double> request_rates{std::numeric_limits<double>::infinity()};
  std::vector<int32_t> max_concurrency{0};
  uint64_t seed = 0;
  double timeout_s = 600;
  double temperature = 0;
  int32_t n = 1;
  bool ignore_eos = true;
  bool include_usage = true;
  std::string extra_body;  // JSON object merged into every request
  SloSpec slo;
  std::string gpu;              // catalog name: price per GPU-hour from data/catalog/gpus.json
  double price_per_hour = -1;   // USD per GPU-hour; overrides the catalog's
  int32_t gpus = 1;
  std::string catalog_dir;      // "" = default catalog
  double window_s = 0;
  int32_t telemetry_interval_ms = 200;
  bool telemetry = true;
  bool progress = false;
  std::string command_line;
};

// Checks every option and reaches the server before any load; errors name the bad input.
Result<nlohmann::json> run_serve_bench(const ServeBenchOptions& o);

// "inf" or a positive number, comma-separated ("1,4,inf").
Result<std::vector<double>> parse_rates(const std::string& s);
Result<std::vector<int32_t>> parse_concurrency(const std::string& s);

}  // namespace frugal::bench
