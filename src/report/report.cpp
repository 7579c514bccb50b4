// The report's pipeline: per precision, quantize (or reuse) -> bench -> eval -> plan.
#include "report/report.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "bench/offline.h"
#include "bench/telemetry.h"
#include "plan/catalog.h"
#include "plan/planner.h"
#include "report/report_quality.h"
#include "report/report_quantize.h"

namespace frugal::report {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The dummy-weight format of a report precision (model::parse_dummy_precision): the int4 rows
// share one format (AWQ, GPTQ and RTN differ in the values, not in the bytes or the kernels).
std::string dummy_precision(const std::string& p) {
  if (p == "bf16" || p == "fp8" || p == "int8" || p == "nf4") return p;
  return "int4";
}

Est est_of(const nlohmann::json& e) {
  Est out;
  out.value = e.value("median", 0.0);
  out.ci_lo = out.ci_hi = out.value;
  if (e.contains("ci95") && e["ci95"].is_array() && e["ci95"].size() == 2) {
    out.ci_lo = e["ci95"][0].get<double>();
    out.ci_hi = e["ci95"][1].get<double>();
  }
  return out;
}

// summary_json's {"median": {"value", "ci95"}, "p99": {...}} entries.
Est est_of_summary(const nlohmann::json& s, const char* key) {
  Est out;
  if (!s.contains(key) || !s[key].is_object()) return out;
  const nlohmann::json& e = s[key];
  out.value = e.value("value", 0.0);
  out.ci_lo = out.ci_hi = out.value;
  if (e.contains("ci95") && e["ci95"].is_array() && e["ci95"].size() == 2 && e["ci95"][0].is_number()) {
    out.ci_lo = e["ci95"][0].get<double>();
    out.ci_hi = e["ci95"][1].get<double>();
  }
  return out;
}

bench::OfflineOptions bench_options(const ReportOptions& o, const std::vector<int32_t>& batches,
                                    const std::string& model_dir, const std::string& precision = "bf16",
                                    const std::string& lm_head = "bf16") {
  bench::OfflineOptions b;
  b.engine.model_dir = model_dir;
  b.engine.dummy_weights = o.dummy_weights;
  // Checkpoints load in the format they are stored in (the lm_head too); dummy weights take the
  // row's format and lm_head.
  if (o.dummy_weights) {
    b.engine.weight_precision = dummy_precision(precision);
    if (lm_head == "int8") b.engine.lm_head_precision = "int8";
  }
  b.precision = precision;
  b.engine.device = o.device;
  b.engine.threads = o.threads;
  if (o.quick) {
    b.prefill_lens = {32};
    b.decode_prompt_len = 16;
    b.decode_tokens = 16;
    b.reps = 3;
    b.warmup = 1;
    b.engine.max_model_len = 256;
  } else if (o.device.rfind("cuda", 0) == 0) {
    b.prefill_lens = {2048};
    b.decode_prompt_len = 512;
    b.decode_tokens = 128;
    b.reps = 5;
  } else {
    // Sized so the seven rows of the default model fit in about two minutes on two cores.
    b.prefill_lens = {256};
    b.decode_prompt_len = 64;
    b.decode_tokens = 64;
    b.reps = 3;
  }
  if (o.prefill_len > 0) b.prefill_lens = {o.prefill_len};
  if (o.decode_tokens > 0) b.decode_tokens = o.decode_tokens;
  if (o.reps > 0) b.reps = o.reps;
  b.batches = batches;
  b.gpu_name = o.gpu;
  return b;
}

// Fills the measured columns of `row` from run_offline's JSON.
void read_bench(const nlohmann::json& j, PrecisionRow& row) {
  const nlohmann::json& m = j["memory"];
  row.weights_gib = m.value("weights_bytes", int64_t{0}) / kGiB;
  row.kv_pool_gib = m.value("kv_pool_bytes", int64_t{0}) / kGiB;
  row.workspace_gib = m.value("workspace_bytes", int64_t{0}) / kGiB;
  row.graphs_gib = m.value("graphs_bytes", int64_t{0}) / kGiB;
  row.kv_bytes_per_token = j.value("kv_bytes_per_token", 0.0);
  if (row.kv_bytes_per_token > 0) {
    row.kv_capacity_tokens = static_cast<int64_t>(m.value("kv_pool_bytes", int64_t{0}) / row.kv_bytes_per_token);
  }
  for (const auto& p : j["prefill"]) {
    row.prefill_len = p["prompt_len"].get<int32_t>();
    row.prefill_tok_per_s = est_of(p["tok_per_s"]);
    row.ttft_ms = est_of_summary(p["ttft_ms"], "median");
    row.ttft_samples_ms = p["ttft_ms_samples"].get<std::vector<double>>();
  }
  for (const auto& d : j["decode"]) {
    SweepPoint s{.batch = d["batch"].get<int32_t>(), .tok_per_s = est_of(d["tok_per_s"])};
    row.sweep.push_back(s);
    if (s.tok_per_s.value > row.best_tok_per_s) {
      row.best_tok_per_s = s.tok_per_s.value;
      row.best_batch = s.batch;
    }
    if (s.batch == 1) {
      row.decode_b1_tok_per_s = s.tok_per_s;
      row.itl_ms_p50 = est_of_summary(d["itl_ms"], "median");
      row.itl_ms_p99 = est_of_summary(d["itl_ms"], "p99");
      row.itl_cdf_ms = d["itl_ms_cdf"].get<std::vector<double>>();
    }
  }
}

plan::WeightPrecision plan_precision(const std::string& p) {
  if (p == "bf16") return plan::WeightPrecision::kBf16;
  if (p == "fp8") return plan::WeightPrecision::kFp8;
  if (p == "int8") return plan::WeightPrecision::kInt8;
  if (p == "nf4") return plan::WeightPrecision::kNf4;
  return plan::WeightPrecision::kInt4;  // int4-awq/gptq/rtn: 4-bit codes in groups
}

struct Prediction {
  plan::ModelEntry model;
  plan::GpuSpec gpu;
  bool host = false;  // no --gpu: a host "GPU" with the measured copy bandwidth
};

void predict(const Prediction& pr, const ReportOptions& o, PrecisionRow& row) {
  plan::PlanRequest r;
  r.model = pr.model;
  r.gpu = pr.gpu;
  r.quant.precision = plan_precision(row.precision);
  if (r.quant.precision == plan::WeightPrecision::kInt4) r.quant.group_size = o.group_size;
  r.quant.lm_head_int8 = row.lm_head == "int8";
  // The KV dtype the bench's engine uses (bench/offline.cpp): f32 on the CPU, bf16 on devices.
  r.kv_dtype = o.device.rfind("cuda", 0) == 0 ? DType::kBF16 : DType::kF32;
  r.context = std::min<int64_t>(o.quick ? 256 : 4096, pr.model.config.max_position_embeddings);
  r.concurrency = 1;
  r.price_per_hour = 0;
  auto p = plan::make_plan(r);
  if (!p.is_ok()) return;
  row.pred_weights_gib = p->memory.weights_bytes / kGiB;
  row.pred_kv_bytes_per_token = static_cast<double>(p->memory.kv_bytes_per_token);
  // The bench's decode runs at KV length prompt + tokens / 2 (bench_options).
  const bench::OfflineOptions b = bench_options(o, {}, o.model_dir);
  const double kv_len = b.decode_prompt_len + b.decode_tokens / 2.0;
  const plan::SpeedModel sm = plan::make_speed_model(pr.model.config, p->weights, pr.gpu, 1,
                                                     row.pred_kv_bytes_per_token, r.quant.precision, r.eff);
  row.pred_decode_b1_tok_per_s = sm.decode(1, kv_len).tok_per_s();
  for (SweepPoint& s : row.sweep) s.predicted_tok_per_s = sm.decode(s.batch, kv_len).tok_per_s();
  if (!pr.host && row.prefill_len > 0) {
    row.pred_prefill_available = true;
    row.pred_prefill_tok_per_s = sm.prefill_tok_per_s(row.prefill_len);
  }
}

void cost(Report& rep, PrecisionRow& row, double power_w, bool power_given) {
  if (row.best_tok_per_s <= 0) return;
  if (rep.price_per_hour >= 0) {
    row.usd_per_m_rent = plan::rent_usd_per_m_tokens(rep.price_per_hour, 1, row.best_tok_per_s);
  } else {
    row.cost_why = "no price: pass --gpu or --price-per-hour";
  }
  if (rep.own_why.empty()) {
    plan::OwnershipInputs in = rep.own;
    if (power_w > 0) {
      in.power_w = power_w;
      in.power_source = "NVML average while benchmarking";
    }
    const plan::OwnershipCost c = plan::ownership_cost(in, 1, row.best_tok_per_s);
    row.usd_per_m_own = c.usd_per_m_tokens;
    if (power_w > 0 || power_given) row.kwh_per_m = c.kwh_per_m_tokens;
  }
}

void recommend(Report& rep) {
  const PrecisionRow* cheapest = nullptr;
  const PrecisionRow* fastest = nullptr;
  const PrecisionRow* smallest = nullptr;
  for (const PrecisionRow& r : rep.rows) {
    if (r.status != "ok") continue;
    if (r.usd_per_m_rent && (!cheapest || *r.usd_per_m_rent < *cheapest->usd_per_m_rent)) cheapest = &r;
    if (!fastest || r.decode_b1_tok_per_s.value > fastest->decode_b1_tok_per_s.value) fastest = &r;
    if (!smallest || r.weights_gib < smallest->weights_gib) smallest = &r;
  }
  rep.recommendations.clear();
  bool have_mmlu = false;
  for (const PrecisionRow& r : rep.rows) have_mmlu = have_mmlu || r.mmlu.has_value();
  const PrecisionRow* bf16 = nullptr;
  for (const PrecisionRow& r : rep.rows) bf16 = r.precision == "bf16" && r.status == "ok" ? &r : bf16;
  if (have_mmlu && bf16 && bf16->mmlu) {
    // Within 1 point of accuracy (absolute) of the bf16 row; cheapest rented, else owned.
    const PrecisionRow* best = nullptr;
    const auto usd = [](const PrecisionRow& r) { return r.usd_per_m_rent ? r.usd_per_m_rent : r.usd_per_m_own; };
    for (const PrecisionRow& r : rep.rows) {
      if (r.status != "ok" || !r.mmlu || *r.mmlu < *bf16->mmlu - 0.01 || !usd(r)) continue;
      if (!best || *usd(r) < *usd(*best)) best = &r;
    }
    rep.recommendations.push_back(
        best ? "cheapest per 1M tokens within 1% MMLU of bf16: " + best->precision
             : std::string("cheapest per 1M tokens within 1% MMLU of bf16: not answerable (no priced row)"));
  } else {
    rep.recommendations.push_back("cheapest per 1M tokens within 1% MMLU of bf16: not answerable (MMLU not measured" +
                                  std::string(bf16 ? ": " + bf16->mmlu_why : "") + ")");
  }
  if (cheapest) {
    rep.recommendations.push_back("cheapest per 1M output tokens (rent): " + cheapest->precision + " at batch " +
                                  std::to_string(cheapest->best_batch));
  }
  if (fastest) rep.recommendations.push_back("fastest batch-1 decode: " + fastest->precision);
  if (smallest) rep.recommendations.push_back("smallest weights: " + smallest->precision);
}

}  // namespace

std::string default_calib_file() { return std::string(FRUGAL_SOURCE_ROOT) + "/data/calib/war-and-peace-ch1-3.txt"; }

const std::vector<std::string>& known_precisions() {
  static const std::vector<std::string> k = {"bf16", "fp8", "int8", "int4-awq", "int4-gptq", "int4-rtn", "nf4"};
  return k;
}

Result<std::vector<std::string>> parse_precisions(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string p = list.substr(start, comma - start);
    if (std::find(known_precisions().begin(), known_precisions().end(), p) == known_precisions().end()) {
      std::string names;
      for (const std::string& k : known_precisions()) names += (names.empty() ? "" : ", ") + k;
      return invalid_argument("--precisions: unknown precision '" + p + "' (expected a comma list of " + names + ")");
    }
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
    start = comma + 1;
  }
  return out;
}

Result<std::map<std::string, std::string>> parse_checkpoints(const std::vector<std::string>& entries) {
  std::map<std::string, std::string> out;
  for (const std::string& e : entries) {
    const size_t eq = e.find('=');
    if (eq == std::string::npos || eq + 1 == e.size()) {
      return invalid_argument("--checkpoint '" + e + "': expected PRECISION=DIR");
    }
    FRUGAL_ASSIGN_OR_RETURN(auto p, parse_precisions(e.substr(0, eq)));
    if (!std::filesystem::exists(e.substr(eq + 1) + "/config.json")) {
      return not_found("--checkpoint '" + e + "': no config.json in " + e.substr(eq + 1));
    }
    out[p[0]] = e.substr(eq + 1);
  }
  return out;
}

Result<Report> run_report(const ReportOptions& o) {
  if (o.out_dir.empty()) return invalid_argument("--out: expected a directory");
  if (o.precisions.empty()) return invalid_argument("--precisions: expected at least one");
  if (o.lm_head != "bf16" && o.lm_head != "int8")
    return invalid_argument("--lm-head: expected bf16 or int8, got '" + o.lm_head + "'");
  std::error_code ec;
  std::filesystem::create_directories(o.out_dir, ec);
  if (ec) return io_error("--out " + o.out_dir + ": cannot create the directory: " + ec.message());
  Report rep;
  rep.started_utc = utc_now();
  rep.model_dir = o.model_dir;
  rep.device = o.device;
  rep.gpu = o.gpu;
  rep.quick = o.quick;
  const std::string catalog = o.catalog.empty() ? plan::default_catalog_dir() : o.catalog;
  FRUGAL_ASSIGN_OR_RETURN(plan::ModelEntry model, plan::resolve_model(o.model_dir, catalog));
  rep.model = model.config.architecture + " (" + o.model_dir + ")";
  const bool lm_int8 = o.lm_head == "int8";
  if (lm_int8 && model.config.tie_word_embeddings)
    return invalid_argument("--lm-head int8: " + o.model_dir +
                            " ties lm_head to the embedding table (tie_word_embeddings), so there is no separate lm_head to "
                            "quantize");
  Prediction pred{.model = model};
  if (!o.gpu.empty()) {
    FRUGAL_ASSIGN_OR_RETURN(auto gpus, plan::load_gpu_catalog(catalog));
    FRUGAL_ASSIGN_OR_RETURN(pred.gpu, plan::find_gpu(gpus, o.gpu));
    rep.prediction_gpu = pred.gpu.name + " (catalog)";
    rep.price_per_hour = o.price_per_hour >= 0 ? o.price_per_hour : pred.gpu.price_usd_per_hour;
    rep.price_source = o.price_per_hour >= 0 ? "--price-per-hour" : pred.gpu.price_source;
    auto own = plan::resolve_ownership(o.own, pred.gpu);
    if (own.is_ok()) {
      rep.own = *own;
    } else {
      rep.own_why = own.status().message();
    }
  } else {
    // No GPU named: predict on the host with its measured copy bandwidth (decode only).
    const double gbps = bench::measure_host_copy_gbps(1ll << 26, 3);
    pred.host = true;
    pred.gpu = plan::GpuSpec{.name = "host", .display_name = "host CPU", .memory_gib = 64, .bandwidth_gb_s = gbps,
                             .tflops_bf16 = 1e6};
    rep.prediction_gpu = "host (measured copy bandwidth " + std::to_string(static_cast<int>(gbps)) +
                         " GB/s; compute not modelled, so no prefill prediction)";
    rep.price_per_hour = o.price_per_hour;
    rep.price_source = o.price_per_hour >= 0 ? "--price-per-hour" : "";
    plan::GpuSpec host = pred.gpu;
    auto own = plan::resolve_ownership(o.own, host);
    if (own.is_ok()) {
      rep.own = *own;
    } else {
      rep.own_why = own.status().message() + " (without --gpu pass --purchase-usd and --power-w)";
    }
  }
  // A bf16.logits of an earlier run in this directory must not become this run's KLD reference.
  std::filesystem::remove(o.out_dir + "/bf16.logits", ec);
  std::vector<int32_t> batches = o.concurrency;
  if (batches.empty()) {
    if (o.quick) {
      batches = {1, 2, 4};
    } else if (o.device.rfind("cuda", 0) == 0) {
      batches = {1, 4, 16, 64, 128, 256};
    } else {
      batches = {1, 2, 4, 8};
    }
  }
  if (std::find(batches.begin(), batches.end(), 1) == batches.end()) batches.insert(batches.begin(), 1);

  // Until a row runs, the files written after each row say why it has no figures (a run
  // killed mid-row leaves exactly that).
  for (const std::string& p : o.precisions) {
    rep.rows.push_back(PrecisionRow{.precision = p, .why = "not run yet: the run stopped before this row"});
  }
  const std::string quality_why = "not measured (the row did not run)";
  bool stopped = false;
  for (PrecisionRow& row : rep.rows) {
    row.quality_why = quality_why;
    row.mmlu_why = quality_why;
    if (!stopped && o.should_stop && o.should_stop()) stopped = true;
    if (stopped) {
      row.status = "not run";
      row.why = "interrupted before this row";
      continue;
    }
    row.why.clear();
    const auto reuse = o.checkpoints.find(row.precision);
    row.model_dir = reuse != o.checkpoints.end() ? reuse->second : o.model_dir;
    Status s = Status::ok();
    // The row's lm_head (ReportOptions::lm_head): int8 in the quantized rows that can store it.
    if (model.config.tie_word_embeddings) {
      row.lm_head = "tied to the embeddings";
    } else if (reuse != o.checkpoints.end()) {
      row.lm_head = "as stored in the checkpoint";
    } else if (!lm_int8 || row.precision == "bf16") {
      row.lm_head = "bf16";
    } else if (o.dummy_weights || lm_head_storable(row.precision)) {
      row.lm_head = "int8";
    } else {
      row.lm_head = "bf16 (the " + row.precision + " checkpoint layout keeps it dense)";
    }
    if (o.dummy_weights) {
      row.weights_source = "dummy weights (" + dummy_precision(row.precision) + (row.lm_head == "int8" ? ", lm_head int8" : "") +
                           "; speed only)";
    } else if (reuse != o.checkpoints.end()) {
      row.weights_source = "checkpoint " + row.model_dir + " (--checkpoint)";
    } else if (row.precision == "bf16") {
      row.weights_source = "checkpoint " + row.model_dir;
    } else {
      // Quantize the source checkpoint (or reuse this report's cached result).
      if (o.progress) o.progress(row.precision + ": quantizing (or reusing) ...");
      auto ck = quantize_or_reuse({.model_dir = o.model_dir, .precision = row.precision,
                                   .cache_dir = o.quant_cache.empty() ? o.out_dir + "/checkpoints" : o.quant_cache,
                                   .calib_file = o.calib_file, .default_calib_file = default_calib_file(),
                                   .calib_tokens = o.calib_tokens > 0 ? o.calib_tokens : (o.quick ? 512 : 2048),
                                   .group_size = o.group_size, .lm_head_int8 = row.lm_head == "int8"});
      if (ck.is_ok()) {
        row.model_dir = ck->dir;
        row.quantization = ck->description;
        row.quant_reused = ck->reused;
        row.quant_calib_tokens = ck->calib_tokens;
        row.quant_seconds = ck->seconds;
        row.weights_source = "frugal quantize " + ck->description + (ck->reused ? ", reused from " : " -> ") + ck->dir;
      } else {
        s = ck.status();
      }
    }
    // Dummy weights of the three int4 rows are the same bytes through the same kernels (AWQ,
    // GPTQ and RTN differ in values only): measure the format once and say so.
    const PrecisionRow* same = nullptr;
    if (o.dummy_weights) {
      for (const PrecisionRow& prev : rep.rows) {
        if (&prev == &row) break;
        if (prev.status == "ok" && dummy_precision(prev.precision) == dummy_precision(row.precision) && prev.lm_head == row.lm_head)
          same = &prev;
      }
    }
    if (s.is_ok() && same != nullptr) {
      PrecisionRow copy = *same;
      copy.precision = row.precision;
      copy.weights_source = "dummy weights (" + dummy_precision(row.precision) + (row.lm_head == "int8" ? ", lm_head int8" : "") +
                            "; speed only): the " + same->precision +
                            " row's measurement (the same format and kernels)";
      row = copy;
    } else if (s.is_ok()) {
      auto telemetry = bench::TelemetrySampler::with_nvml();
      telemetry->start();
      auto j = bench::run_offline(bench_options(o, batches, row.model_dir, row.precision, row.lm_head));
      telemetry->stop();
      if (j.is_ok()) {
        read_bench(*j, row);
        predict(pred, o, row);
        const nlohmann::json t = telemetry->summary();
        const double power = t.value("available", false) ? t.value("power_w_mean", 0.0) : 0.0;
        if (power > 0) rep.energy_source = "NVML average power";
        cost(rep, row, power, o.own.power_w > 0);
        row.status = "ok";
        if (o.dummy_weights) {
          row.quality_why = "dummy weights: quality is not measured";
          row.mmlu_why = row.quality_why;
        } else {
          const QualityOptions q{.model_dir = row.model_dir, .tokenizer_dir = o.model_dir, .text_file = o.text_file, .out_dir = o.out_dir,
                                 .device = o.device, .threads = o.threads, .ctx = o.quick ? 128 : 512,
                                 .max_chunks = o.quick ? 4 : 16, .mc_dir = o.mc_dir, .mc_shots = o.quick ? 1 : 5,
                                 .mc_limit = o.quick ? 4 : 0};
          const Status qs = measure_quality(q, row);
          if (!qs.is_ok()) row.quality_why = "quality failed: " + qs.message();
          const Status ms = measure_mmlu(q, row);
          if (!ms.is_ok()) row.mmlu_why = "MMLU failed: " + ms.message();
        }
      } else {
        s = j.status();
      }
    }
    if (!s.is_ok()) {
      row.status = "failed";
      row.why = s.message();
    }
    if (o.progress) o.progress(row.precision + ": " + row.status + (row.why.empty() ? "" : " (" + row.why + ")"));
    recommend(rep);
    rep.finished_utc = utc_now();
    FRUGAL_RETURN_IF_ERROR(write_report(rep, o.out_dir));
  }
  rep.complete = !stopped;
  if (rep.energy_source.empty() && o.own.power_w > 0) rep.energy_source = "--power-w";
  if (o.dummy_weights) rep.notes.push_back("speed rows use dummy (random) weights of the configuration");
  for (const PrecisionRow& row : rep.rows) {
    if (row.status == "ok") {
      rep.notes.push_back("quality: " + row.quality_why + "; MMLU: " + row.mmlu_why);
      break;
    }
  }
  rep.notes.push_back("$/1M output tokens at each row's best measured batch; owned cost per docs/plan.md");
  if (!rep.complete) rep.notes.push_back("interrupted: rows marked 'not run' did not run");
  recommend(rep);
  rep.finished_utc = utc_now();
  FRUGAL_RETURN_IF_ERROR(write_report(rep, o.out_dir));
  return rep;
}

}  // namespace frugal::report
