#include "tools/plan/calibration.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tools/plan/plan_format.h"

namespace frugal::tools {
namespace {

using json = nlohmann::json;

std::string str_or(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

double num_or(const json& j, const char* key, double def) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : def;
}

// One entry of "results"; returns an error string (entry skipped) or "".
std::string parse_point(const json& e, const json& top, BenchPoint* p) {
  if (!e.is_object()) return "not an object";
  p->kind = str_or(e, "kind");
  if (p->kind != "decode" && p->kind != "prefill") return "kind '" + p->kind + "' is not fitted";
  p->tok_per_s = num_or(e, "tok_per_s", 0);
  if (!(p->tok_per_s > 0)) return "field 'tok_per_s': expected a positive number";
  p->batch = static_cast<int64_t>(num_or(e, "batch", 1));
  if (p->batch < 1) return "field 'batch': expected >= 1";
  if (p->kind == "prefill") {
    p->prompt_len = static_cast<int64_t>(num_or(e, "prompt_len", 0));
    if (p->prompt_len < 1) return "field 'prompt_len': expected >= 1";
    return "";
  }
  // Decode: mean KV length over the timed window; the entry's own fields first, then the run's.
  const double prompt = num_or(e, "prompt_len", num_or(top, "decode_prompt_len", 0));
  const double gen = num_or(e, "gen_len", num_or(top, "decode_tokens", 0));
  p->prompt_len = static_cast<int64_t>(prompt);
  p->kv_len = num_or(e, "kv_len", prompt + gen / 2.0);
  return "";
}

double clamp_factor(double v, const char* name, std::vector<std::string>* notes) {
  if (v > 1.0) {
    notes->push_back(std::string(name) + " fitted to " + fixed(v, 3) +
                     " (> 1: faster than the datasheet allows; check the GPU or the model); capped at 1");
    return 1.0;
  }
  return std::max(v, 1e-3);
}

double predict(const SpeedModel& m, const BenchPoint& p) {
  if (p.kind == "prefill") return m.prefill_tok_per_s(p.prompt_len) * static_cast<double>(p.batch);
  return m.decode(p.batch, p.kv_len).tok_per_s();
}

}  // namespace

double CalibrationRow::error_before_pct() const {
  return (predicted_before - point.tok_per_s) / point.tok_per_s * 100.0;
}
double CalibrationRow::error_after_pct() const {
  return (predicted_after - point.tok_per_s) / point.tok_per_s * 100.0;
}

Result<BenchResults> load_bench_results(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("--calibrate: " + path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return corrupt("--calibrate: " + path + ": not valid JSON");
  if (!j.is_object() || !j.contains("results") || !j["results"].is_array()) {
    return invalid_argument("--calibrate: " + path + ": field 'results': expected a list of measurements");
  }
  BenchResults b;
  b.path = path;
  b.model = str_or(j, "model");
  b.gpu = str_or(j, "gpu");
  b.precision = str_or(j, "precision");
  b.kv_dtype = str_or(j, "kv_dtype");
  b.gpus = static_cast<int>(num_or(j, "gpus", 1));
  for (size_t i = 0; i < j["results"].size(); ++i) {
    BenchPoint p;
    const std::string why = parse_point(j["results"][i], j, &p);
    if (why.empty()) {
      b.points.push_back(p);
    } else {
      b.skipped.push_back("results[" + std::to_string(i) + "]: " + why);
    }
  }
  if (b.points.empty()) {
    return invalid_argument("--calibrate: " + path + ": field 'results': no decode or prefill measurement");
  }
  return b;
}

CalibrationReport calibrate(const SpeedModel& m, const BenchResults& bench) {
  CalibrationReport r;
  r.path = bench.path;
  r.before = m.eff;
  Efficiency e = m.eff;
  SpeedModel unit = m;  // every factor 1: times at the datasheet ceilings
  unit.eff.decode_bw = unit.eff.decode_mfu = unit.eff.prefill_mfu = 1.0;
  for (const std::string& s : bench.skipped) r.notes.push_back("skipped " + s);

  // decode_bw: the bandwidth fraction that reproduces each batch-1 decode rate.
  double sum = 0;
  int n = 0;
  for (const BenchPoint& p : bench.points) {
    if (p.kind != "decode" || p.batch != 1) continue;
    const StepTime t = unit.decode(1, p.kv_len);
    const double measured = 1.0 / p.tok_per_s - t.t_comm;
    if (measured > 0) sum += t.t_mem / measured, ++n;
  }
  if (n > 0) {
    e.decode_bw = clamp_factor(sum / n, "decode_bw", &r.notes);
    r.notes.push_back("decode_bw from " + std::to_string(n) + " batch-1 decode point(s)");
  }
  // decode_mfu: batched points slower than the (calibrated) bandwidth bound are compute-bound.
  sum = 0, n = 0;
  for (const BenchPoint& p : bench.points) {
    if (p.kind != "decode" || p.batch == 1) continue;
    const StepTime t = unit.decode(p.batch, p.kv_len);
    const double measured = static_cast<double>(p.batch) / p.tok_per_s - t.t_comm;
    if (measured > t.t_mem / e.decode_bw) sum += t.t_compute / measured, ++n;
  }
  if (n > 0) {
    e.decode_mfu = clamp_factor(sum / n, "decode_mfu", &r.notes);
    r.notes.push_back("decode_mfu from " + std::to_string(n) + " batched decode point(s) above the bandwidth bound");
  }
  // prefill_mfu: FLOP rate each prefill point implies.
  sum = 0, n = 0;
  for (const BenchPoint& p : bench.points) {
    if (p.kind != "prefill") continue;
    const double at_peak = unit.prefill_seconds_per_token(p.prompt_len);
    sum += at_peak * p.tok_per_s / static_cast<double>(p.batch), ++n;
  }
  if (n > 0) {
    e.prefill_mfu = clamp_factor(sum / n, "prefill_mfu", &r.notes);
    r.notes.push_back("prefill_mfu from " + std::to_string(n) + " prefill point(s)");
  }
  e.source = "calibrated on " + bench.path;
  r.after = e;
  SpeedModel fitted = m;
  fitted.eff = e;
  for (const BenchPoint& p : bench.points) {
    r.rows.push_back(CalibrationRow{.point = p, .predicted_before = predict(m, p), .predicted_after = predict(fitted, p)});
  }
  return r;
}

}  // namespace frugal::tools
