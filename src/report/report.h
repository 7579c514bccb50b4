// `frugal report`: per precision, quantize (or reuse) -> bench -> eval -> plan, written as one
// terminal table, report.md, report.json (schema: docs/report.schema.json) and a
// self-contained report.html with inline SVG plots (docs/report.md).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "plan/ownership.h"

namespace frugal::report {

// The precisions a report knows, in report order.
const std::vector<std::string>& known_precisions();

struct ReportOptions {
  std::string model_dir;
  bool dummy_weights = false;  // model_dir is a config.json: speed rows only
  std::vector<std::string> precisions = known_precisions();
  std::string gpu;             // catalog GPU for the price, TDP and the plan's prediction
  double price_per_hour = -1;  // per GPU-hour; < 0: the catalog's (needs --gpu)
  std::string text_file;       // eval: perplexity text
  std::string mc_dir;          // eval: multiple-choice (MMLU-style) questions
  bool quick = false;          // CI-sized runs
  std::string out_dir;
  std::string device = "cpu";
  int32_t threads = 0;
  std::string catalog;         // empty: plan::default_catalog_dir()
  plan::OwnershipInputs own;   // purchase_usd / power_w < 0: the catalog's list price / TDP
  std::vector<int32_t> concurrency;  // empty: {1, 2, 4, 8} ({1, 2, 4} with --quick)
  // Bench sizes; 0: the mode's (docs/report.md, "What each row does").
  int32_t prefill_len = 0;
  int32_t decode_tokens = 0;
  int32_t reps = 0;
  // Reuse: precision -> an existing checkpoint of this model at that precision (--checkpoint
  // P=DIR). Rows without one are quantized from model_dir (report_quantize.h).
  std::map<std::string, std::string> checkpoints;
  // Quantized rows: checkpoints are made (or reused) under quant_cache (empty: out_dir/checkpoints).
  std::string quant_cache;
  std::string calib_file;          // AWQ / GPTQ calibration text; empty: default_calib_file()
  int64_t calib_tokens = 0;        // 0: 2048 (512 with --quick)
  int64_t group_size = 128;        // the int4 rows' group (AWQ, GPTQ and RTN alike)
  // The untied lm_head of the quantized rows: "bf16" (kept dense, the default) or "int8" (per
  // channel, in the rows whose checkpoint layouts store it quantized: report_quantize.h's
  // lm_head_storable; every quantized row with dummy weights). A tied model is refused with int8.
  std::string lm_head = "bf16";
  // Polled between rows: true stops the run, the rows not run are written as such.
  std::function<bool()> should_stop;
  // Called after each row with a one-line status.
  std::function<void(const std::string&)> progress;
};

// An estimate with its 95% CI; ci_lo / ci_hi are NaN-free (equal to value without repetitions).
struct Est {
  double value = 0, ci_lo = 0, ci_hi = 0;
};

struct SweepPoint {
  int32_t batch = 1;
  Est tok_per_s;
  double predicted_tok_per_s = 0;
};

struct PrecisionRow {
  std::string precision;
  std::string status = "not run";  // "ok" | "failed" | "not run"
  std::string why;                 // failed / not run: the reason
  std::string weights_source;      // "checkpoint DIR", "dummy weights", ...
  std::string model_dir;           // the checkpoint the row ran on
  // Quantized by this report (or reused from its cache): how, and what it cost.
  std::string quantization;        // "int4 awq g128 (AutoAWQ GEMM)"; empty for bf16 / --checkpoint / dummy
  bool quant_reused = false;
  int64_t quant_calib_tokens = 0;
  double quant_seconds = 0;
  // The row's lm_head: "bf16", "int8", "tied to the embeddings", "as stored in the checkpoint"
  // (--checkpoint) or "bf16 (the ... layout keeps it dense)".
  std::string lm_head;
  // Measured (bench, in process).
  double weights_gib = 0, kv_pool_gib = 0, workspace_gib = 0, graphs_gib = 0;
  double kv_bytes_per_token = 0;
  int64_t kv_capacity_tokens = 0;
  Est decode_b1_tok_per_s, prefill_tok_per_s, ttft_ms, itl_ms_p50, itl_ms_p99;
  int32_t prefill_len = 0;
  std::vector<SweepPoint> sweep;
  std::vector<double> itl_cdf_ms;   // ITL percentiles 0, 5, ..., 100 at batch 1
  std::vector<double> ttft_samples_ms;
  double best_tok_per_s = 0;        // the sweep's highest
  int32_t best_batch = 0;
  // The planner's prediction beside each measured figure.
  double pred_weights_gib = 0, pred_kv_bytes_per_token = 0, pred_decode_b1_tok_per_s = 0,
         pred_prefill_tok_per_s = 0;
  bool pred_prefill_available = false;
  // Cost (at best_tok_per_s) and energy.
  std::optional<double> usd_per_m_rent, usd_per_m_own, kwh_per_m;
  std::string cost_why;             // why a cost is missing
  // Quality vs the bf16 row (frugal eval); absent with quality_why until eval runs.
  std::optional<double> ppl, delta_ppl, kld_mean, kld_p99, same_top1, mmlu, mmlu_stderr;
  std::string quality_why;
  std::string mmlu_why;
};

struct Report {
  std::string model, model_dir, device, gpu, prediction_gpu, price_source;
  double price_per_hour = -1;
  plan::OwnershipInputs own;  // resolved where possible
  std::string own_why;        // why owned cost is not computed
  std::string energy_source;  // "NVML average power" | "rated TDP" | ""
  bool quick = false;
  bool complete = false;      // every row ran (ok or failed); false: interrupted
  std::vector<PrecisionRow> rows;
  std::vector<std::string> recommendations;
  std::vector<std::string> notes;
  std::string started_utc, finished_utc;
};

// The bundled calibration text (data/calib/war-and-peace-ch1-3.txt of the source tree).
std::string default_calib_file();

// Parses "bf16,fp8,..." against known_precisions(); the error names the unknown entry.
Result<std::vector<std::string>> parse_precisions(const std::string& list);
// Parses "--checkpoint P=DIR" entries; the error names the entry.
Result<std::map<std::string, std::string>> parse_checkpoints(const std::vector<std::string>& entries);

// Runs every row; a row that fails is recorded (never aborts the others). Writes the outputs
// into out_dir after every row so an interrupted run leaves a consistent report.
Result<Report> run_report(const ReportOptions& o);

// Renderings.
std::string format_report_text(const Report& r);
std::string format_report_markdown(const Report& r);
nlohmann::json report_to_json(const Report& r);
std::string format_report_html(const Report& r);
// report.md, report.json, report.html under dir (created).
Status write_report(const Report& r, const std::string& dir);

}  // namespace frugal::report
