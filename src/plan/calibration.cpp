#include "plan/calibration.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "plan/plan_format.h"

namespace frugal::plan {
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

  // decode_bw and seq_overhead: a bandwidth-bound decode step takes t_mem / decode_bw plus
  // B x seq_overhead (the engine's per-sequence work). decode_bw comes from the batch-1 points and
  // seq_overhead (least squares over step times) from the batched points that are clearly
  // bandwidth-bound at the prior factors (compute under 80% of the memory time); each depends on
  // the other, so the two are alternated to a fixed point. seq_overhead and decode_mfu both grow
  // with the batch, so compute-bound points are left to decode_mfu below.
  auto clearly_bandwidth_bound = [&](const StepTime& t) {
    return t.t_compute / m.eff.decode_mfu < 0.8 * t.t_mem / m.eff.decode_bw;
  };
  struct MemPoint {
    double b, t_mem, step;
  };
  std::vector<MemPoint> b1, batched;
  for (const BenchPoint& p : bench.points) {
    if (p.kind != "decode") continue;
    const StepTime t = unit.decode(p.batch, p.kv_len);
    const double b = static_cast<double>(p.batch), step = b / p.tok_per_s - t.t_comm;
    if (step <= 0) continue;
    if (p.batch == 1) b1.push_back({b, t.t_mem, step});
    else if (clearly_bandwidth_bound(t)) batched.push_back({b, t.t_mem, step});
  }
  double bw = e.decode_bw, o = 0;
  for (int iter = 0; iter < 50 && !b1.empty(); ++iter) {
    double sum = 0;
    for (const auto& q : b1) sum += q.t_mem / std::max(q.step - o, 1e-9);
    bw = sum / static_cast<double>(b1.size());
    double num = 0, den = 0;
    for (const auto& q : batched) num += q.b * (q.step - q.t_mem / bw), den += q.b * q.b;
    o = den > 0 ? std::max(0.0, num / den) : 0;
  }
  if (!b1.empty()) {
    e.decode_bw = clamp_factor(bw, "decode_bw", &r.notes);
    r.notes.push_back("decode_bw from " + std::to_string(b1.size()) + " batch-1 decode point(s)");
  }
  if (o > 0) {
    e.seq_overhead_s = o;
    r.notes.push_back(fmt::format("seq_overhead {:.4f} ms per sequence per step from {} bandwidth-bound batched decode point(s)",
                                  o * 1e3, batched.size()));
  }
  double sum = 0;
  int n = 0;
  // decode_mfu: the other batched points, once the per-sequence overhead is taken out.
  sum = 0, n = 0;
  for (const BenchPoint& p : bench.points) {
    if (p.kind != "decode" || p.batch == 1) continue;
    const StepTime t = unit.decode(p.batch, p.kv_len);
    if (clearly_bandwidth_bound(t)) continue;
    const double b = static_cast<double>(p.batch);
    const double measured = b / p.tok_per_s - t.t_comm - b * e.seq_overhead_s;
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

}  // namespace frugal::plan
