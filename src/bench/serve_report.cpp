#include "bench/serve_report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

namespace frugal::bench {

using json = nlohmann::json;

namespace {
json num_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json estimate_json(const std::vector<double>& xs, Statistic st, int resamples) {
  Interval ci = bootstrap_ci(xs, st, 0.95, resamples);
  return {{"value", num_or_null(compute_statistic(xs, st))}, {"ci95", {num_or_null(ci.lo), num_or_null(ci.hi)}}};
}

json quantiles(const std::vector<double>& xs) {
  if (xs.empty()) return json::array();
  std::vector<double> s = xs;
  std::sort(s.begin(), s.end());
  json q = json::array();
  for (int i = 0; i <= 100; ++i) {
    double rank = i / 100.0 * static_cast<double>(s.size() - 1);
    auto lo = static_cast<size_t>(std::floor(rank));
    size_t hi = std::min(lo + 1, s.size() - 1);
    q.push_back(s[lo] + (s[hi] - s[lo]) * (rank - static_cast<double>(lo)));
  }
  return q;
}

std::string rate_label(double rate) {
  return rate > 0 && std::isfinite(rate) ? fmt::format("{:g}", rate) : std::string("inf");
}

// Soak: per-window throughput and latency over [0, duration); requests are placed by when they
// finished; those finishing after the duration (the drain) are in no window.
json soak_json(const LoadResult& load, double duration_s, double window_s) {
  if (window_s <= 0) window_s = std::max(1.0, duration_s / 10.0);
  const int n_win = std::max(1, static_cast<int>(std::floor(duration_s / window_s + 1e-9)));
  struct Win {
    int64_t done = 0, errors = 0, out_tokens = 0;
    std::vector<double> ttft, tpot, e2e;
  };
  std::vector<Win> w(static_cast<size_t>(n_win));
  int64_t drained = 0;
  for (const auto& r : load.records) {
    int k = static_cast<int>(std::floor(r.end_s / window_s));
    if (k >= n_win) {
      ++drained;
      continue;
    }
    Win& x = w[static_cast<size_t>(std::max(0, k))];
    if (!r.ok) {
      ++x.errors;
      continue;
    }
    ++x.done;
    x.out_tokens += r.output_tokens;
    x.ttft.push_back(r.ttft_ms);
    x.tpot.push_back(r.tpot_ms);
    x.e2e.push_back(r.e2e_ms);
  }
  json windows = json::array();
  std::vector<double> mids, tput, ttft, e2e, tpot;
  for (int k = 0; k < n_win; ++k) {
    const Win& x = w[static_cast<size_t>(k)];
    double mid = (k + 0.5) * window_s;
    double tp = static_cast<double>(x.out_tokens) / window_s;
    json wj = {{"start_s", k * window_s}, {"end_s", (k + 1) * window_s}, {"completed", x.done}, {"errors", x.errors},
               {"requests_per_s", static_cast<double>(x.done) / window_s}, {"output_tokens_per_s", tp},
               {"ttft_ms_median", num_or_null(median(x.ttft))}, {"tpot_ms_median", num_or_null(median(x.tpot))},
               {"e2e_ms_median", num_or_null(median(x.e2e))}};
    windows.push_back(wj);
    mids.push_back(mid / 60.0);
    tput.push_back(tp);
    if (!x.e2e.empty()) {
      ttft.push_back(median(x.ttft));
      tpot.push_back(median(x.tpot));
      e2e.push_back(median(x.e2e));
    } else {
      ttft.push_back(NAN);
      tpot.push_back(NAN);
      e2e.push_back(NAN);
    }
  }
  auto drift = [&](const std::vector<double>& v) -> json {
    if (v.size() < 2 || !std::isfinite(v.front()) || !std::isfinite(v.back()) || v.front() == 0) return nullptr;
    return (v.back() - v.front()) / v.front();
  };
  auto fit = [&](const std::vector<double>& v) {
    std::vector<double> xs, ys;
    for (size_t i = 0; i < v.size(); ++i) {
      if (std::isfinite(v[i])) {
        xs.push_back(mids[i]);
        ys.push_back(v[i]);
      }
    }
    return slope(xs, ys);
  };
  return {{"window_s", window_s},
          {"windows", windows},
          {"drained_after_duration", drained},
          {"drift_last_vs_first",
           {{"output_tokens_per_s", drift(tput)}, {"ttft_ms_median", drift(ttft)}, {"tpot_ms_median", drift(tpot)},
            {"e2e_ms_median", drift(e2e)}}},
          {"slope_per_minute",
           {{"output_tokens_per_s", fit(tput)}, {"ttft_ms_median", fit(ttft)}, {"tpot_ms_median", fit(tpot)},
            {"e2e_ms_median", fit(e2e)}}}};
}
}  // namespace

double slope(const std::vector<double>& xs, const std::vector<double>& ys) {
  if (xs.size() < 2 || xs.size() != ys.size()) return 0;
  double mx = mean(xs), my = mean(ys), sxy = 0, sxx = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    sxy += (xs[i] - mx) * (ys[i] - my);
    sxx += (xs[i] - mx) * (xs[i] - mx);
  }
  return sxx > 0 ? sxy / sxx : 0;
}

json summary_json(const std::vector<double>& xs) {
  json j = {{"n", xs.size()}};
  if (xs.empty()) {
    for (const char* k : {"mean", "median", "p90", "p99"}) j[k] = {{"value", nullptr}, {"ci95", {nullptr, nullptr}}};
    j["min"] = j["max"] = j["stddev"] = nullptr;
    return j;
  }
  // Each resample sorts the sample: keep ~2e7 element-sorts per statistic, at least 200.
  int resamples = static_cast<int>(std::clamp<double>(2e7 / static_cast<double>(xs.size()), 200, 1000));
  j["mean"] = estimate_json(xs, Statistic::kMean, resamples);
  j["median"] = estimate_json(xs, Statistic::kMedian, resamples);
  j["p90"] = estimate_json(xs, Statistic::kP90, resamples);
  j["p99"] = estimate_json(xs, Statistic::kP99, resamples);
  auto [mn, mx] = std::minmax_element(xs.begin(), xs.end());
  j["min"] = *mn;
  j["max"] = *mx;
  j["stddev"] = stddev(xs);
  j["bootstrap_resamples"] = resamples;
  return j;
}

json cost_json(const CostSpec& c, double out_tps, double total_tps, double out_tokens, double total_tokens,
               const json& telemetry) {
  if (c.usd_per_hour <= 0) return nullptr;
  const double usd_per_s = c.usd_per_hour / 3600.0;
  json j = {{"gpu", c.gpu.empty() ? json(nullptr) : json(c.gpu)},
            {"gpus", c.gpus},
            {"usd_per_hour", c.usd_per_hour},
            {"price_source", c.price_source},
            {"usd_per_1m_output_tokens", out_tps > 0 ? json(usd_per_s / out_tps * 1e6) : json(nullptr)},
            {"usd_per_1m_total_tokens", total_tps > 0 ? json(usd_per_s / total_tps * 1e6) : json(nullptr)},
            {"output_tokens_per_s_per_usd_per_hour", out_tps / c.usd_per_hour},
            {"total_tokens_per_s_per_usd_per_hour", total_tps / c.usd_per_hour}};
  double energy = telemetry.is_object() && telemetry.value("available", false) ? telemetry.value("energy_j", 0.0) : 0.0;
  if (energy > 0 && out_tokens > 0) {
    j["energy_j"] = energy;
    j["joules_per_1m_output_tokens"] = energy / out_tokens * 1e6;
    j["kwh_per_1m_output_tokens"] = energy / out_tokens * 1e6 / 3.6e6;
    j["joules_per_1m_total_tokens"] = energy / total_tokens * 1e6;
    j["kwh_per_1m_total_tokens"] = energy / total_tokens * 1e6 / 3.6e6;
  } else {
    j["energy_j"] = nullptr;
    j["joules_per_1m_output_tokens"] = nullptr;
    j["kwh_per_1m_output_tokens"] = nullptr;
    j["joules_per_1m_total_tokens"] = nullptr;
    j["kwh_per_1m_total_tokens"] = nullptr;
  }
  return j;
}

json run_report(const LoadResult& load, const LoadOptions& o, const ReportOptions& ro, const json& telemetry) {
  std::vector<double> ttft, tpot, itl, e2e;
  std::vector<RequestTiming> timings;
  int64_t completed = 0, in_tokens = 0, out_tokens = 0;
  std::set<std::string> sources;
  std::map<std::string, int64_t> by_kind;
  json errors = json::array(), requests = json::array();
  for (const auto& r : load.records) {
    requests.push_back({{"index", r.index}, {"start_s", r.start_s}, {"end_s", r.end_s}, {"ok", r.ok},
                        {"ttft_ms", r.ok ? json(r.ttft_ms) : json(nullptr)},
                        {"tpot_ms", r.ok ? json(r.tpot_ms) : json(nullptr)}, {"e2e_ms", r.e2e_ms},
                        {"prompt_tokens", r.prompt_tokens}, {"output_tokens", r.output_tokens},
                        {"chunks", r.n_chunks}, {"error", r.ok ? json(nullptr) : json(r.error_kind)}});
    if (!r.ok) {
      ++by_kind[r.error_kind];
      errors.push_back({{"index", r.index}, {"time_s", r.end_s}, {"kind", r.error_kind}, {"message", r.error_message}});
      continue;
    }
    ++completed;
    in_tokens += r.prompt_tokens;
    out_tokens += r.output_tokens;
    sources.insert(r.token_count_source);
    ttft.push_back(r.ttft_ms);
    e2e.push_back(r.e2e_ms);
    if (r.output_tokens / std::max(1, r.n_choices) > 1) tpot.push_back(r.tpot_ms);
    itl.insert(itl.end(), r.itl_ms.begin(), r.itl_ms.end());
    timings.push_back({.ttft_ms = r.ttft_ms, .tpot_ms = r.tpot_ms, .e2e_ms = r.e2e_ms});
  }
  const int64_t sent = static_cast<int64_t>(load.records.size());
  const double wall = load.wall_s > 0 ? load.wall_s : NAN;
  const double out_tps = static_cast<double>(out_tokens) / wall;
  const double total_tps = static_cast<double>(in_tokens + out_tokens) / wall;
  json j;
  j["label"] = fmt::format("rate={} concurrency={}", rate_label(o.request_rate),
                           o.max_concurrency > 0 ? std::to_string(o.max_concurrency) : std::string("unlimited"));
  j["request_rate"] = rate_label(o.request_rate) == "inf" ? json("inf") : json(o.request_rate);
  j["max_concurrency"] = o.max_concurrency > 0 ? json(o.max_concurrency) : json(nullptr);
  j["num_prompts"] = o.duration_s > 0 ? json(nullptr) : json(o.num_prompts);
  j["duration_requested_s"] = o.duration_s > 0 ? json(o.duration_s) : json(nullptr);
  j["seed"] = o.seed;
  j["requests"] = {{"sent", sent}, {"completed", completed}, {"failed", sent - completed}};
  j["duration_s"] = num_or_null(load.wall_s);
  j["peak_concurrency"] = load.peak_concurrency;
  j["input_tokens"] = in_tokens;
  j["output_tokens"] = out_tokens;
  j["token_count_source"] = sources.empty() ? "none" : sources.size() == 1 ? *sources.begin() : "mixed";
  j["throughput"] = {{"requests_per_s", num_or_null(static_cast<double>(completed) / wall)},
                     {"output_tokens_per_s", num_or_null(out_tps)},
                     {"total_tokens_per_s", num_or_null(total_tps)}};
  j["latency_ms"] = {{"ttft", summary_json(ttft)}, {"tpot", summary_json(tpot)}, {"itl", summary_json(itl)},
                     {"e2e", summary_json(e2e)}};
  int64_t good = count_meeting_slo(timings, ro.slo);
  auto slo_v = [](double v) { return v > 0 ? json(v) : json(nullptr); };
  j["goodput"] = {{"slo_ms", {{"ttft", slo_v(ro.slo.ttft_ms)}, {"tpot", slo_v(ro.slo.tpot_ms)}, {"e2e", slo_v(ro.slo.e2e_ms)}}},
                  {"requests_meeting_slo", good},
                  {"fraction", sent > 0 ? json(static_cast<double>(good) / static_cast<double>(sent)) : json(nullptr)},
                  {"requests_per_s", num_or_null(static_cast<double>(good) / wall)}};
  json kinds = json::object();
  for (const auto& [k, n] : by_kind) kinds[k] = n;
  j["errors"] = {{"total", sent - completed}, {"by_kind", kinds}, {"list", errors}};
  j["cost"] = cost_json(ro.cost, std::isfinite(out_tps) ? out_tps : 0, std::isfinite(total_tps) ? total_tps : 0,
                        static_cast<double>(out_tokens), static_cast<double>(in_tokens + out_tokens), telemetry);
  j["telemetry"] = telemetry;
  if (o.duration_s > 0) j["soak"] = soak_json(load, o.duration_s, ro.window_s);
  j["cdf_ms"] = {{"ttft", quantiles(ttft)}, {"tpot", quantiles(tpot)}, {"itl", quantiles(itl)}, {"e2e", quantiles(e2e)}};
  j["per_request"] = requests;
  return j;
}

namespace {
std::string fv(const json& v, const char* f = "{:.2f}") {
  return v.is_number() ? fmt::format(fmt::runtime(f), v.get<double>()) : std::string("-");
}
std::string est(const json& e) {
  return fmt::format("{} [{}, {}]", fv(e["value"]), fv(e["ci95"][0]), fv(e["ci95"][1]));
}
}  // namespace

std::string format_serve_table(const json& rep) {
  std::ostringstream os;
  const json& c = rep["config"];
  os << fmt::format("frugal bench serve  {}  model {}  endpoint {}  dataset {}\n", c.value("url", ""),
                    c.value("model", ""), c.value("endpoint", ""), c.value("dataset", ""));
  for (const json& r : rep["runs"]) {
    os << fmt::format("\n== {} ==\n", r["label"].get<std::string>());
    os << fmt::format("requests: {} sent, {} completed, {} failed in {} s (peak concurrency {})\n",
                      r["requests"]["sent"].get<int64_t>(), r["requests"]["completed"].get<int64_t>(),
                      r["requests"]["failed"].get<int64_t>(), fv(r["duration_s"]), r["peak_concurrency"].get<int>());
    const json& t = r["throughput"];
    os << fmt::format("throughput: {} req/s, {} output tok/s, {} total tok/s (tokens from {}: {} in, {} out)\n",
                      fv(t["requests_per_s"]), fv(t["output_tokens_per_s"], "{:.1f}"), fv(t["total_tokens_per_s"], "{:.1f}"),
                      r["token_count_source"].get<std::string>(), r["input_tokens"].get<int64_t>(),
                      r["output_tokens"].get<int64_t>());
    os << fmt::format("{:<5} {:>30} {:>30} {:>30} {:>30}\n", "ms", "mean [95% CI]", "median [95% CI]", "P90 [95% CI]",
                      "P99 [95% CI]");
    for (const char* m : {"ttft", "tpot", "itl", "e2e"}) {
      const json& s = r["latency_ms"][m];
      std::string name = m;
      std::transform(name.begin(), name.end(), name.begin(), ::toupper);
      os << fmt::format("{:<5} {:>30} {:>30} {:>30} {:>30}\n", name, est(s["mean"]), est(s["median"]), est(s["p90"]),
                        est(s["p99"]));
    }
    const json& g = r["goodput"];
    os << fmt::format("goodput: {} requests met the SLO (ttft {} ms, tpot {} ms, e2e {} ms): {} of sent, {} req/s\n",
                      g["requests_meeting_slo"].get<int64_t>(), fv(g["slo_ms"]["ttft"], "{:g}"),
                      fv(g["slo_ms"]["tpot"], "{:g}"), fv(g["slo_ms"]["e2e"], "{:g}"), fv(g["fraction"], "{:.3f}"),
                      fv(g["requests_per_s"]));
    if (r["cost"].is_object()) {
      const json& k = r["cost"];
      os << fmt::format("cost at ${:g}/h ({} x {}): ${} per 1M output tokens, ${} per 1M total tokens, {} output tok/s per $/h\n",
                        k["usd_per_hour"].get<double>(), k["gpus"].get<int>(), k["gpu"].is_string() ? k["gpu"].get<std::string>() : "GPU",
                        fv(k["usd_per_1m_output_tokens"], "{:.4f}"), fv(k["usd_per_1m_total_tokens"], "{:.4f}"),
                        fv(k["output_tokens_per_s_per_usd_per_hour"], "{:.1f}"));
      if (k["kwh_per_1m_output_tokens"].is_number()) {
        os << fmt::format("energy: {} kWh per 1M output tokens ({} J measured)\n", fv(k["kwh_per_1m_output_tokens"], "{:.4f}"),
                          fv(k["energy_j"], "{:.0f}"));
      }
    }
    const json& tel = r["telemetry"];
    if (tel.is_object() && tel.value("available", false)) {
      for (const json& d : tel["devices"]) {
        os << fmt::format("gpu {}: power mean {} W max {} W, temp max {} C, SM clock mean {} MHz, memory used max {} GiB\n",
                          d["name"].get<std::string>(), d["power_w"].is_object() ? fv(d["power_w"]["mean"], "{:.0f}") : "-",
                          d["power_w"].is_object() ? fv(d["power_w"]["max"], "{:.0f}") : "-",
                          d["temperature_c"].is_object() ? fv(d["temperature_c"]["max"], "{:.0f}") : "-",
                          d["sm_clock_mhz"].is_object() ? fv(d["sm_clock_mhz"]["mean"], "{:.0f}") : "-",
                          d["memory_used_gib"].is_object() ? fv(d["memory_used_gib"]["max"], "{:.1f}") : "-");
      }
    } else if (tel.is_object()) {
      os << "gpu telemetry: unavailable (" << tel.value("reason", "") << ")\n";
    }
    if (r["errors"]["total"].get<int64_t>() > 0) {
      os << "errors:";
      for (const auto& [k, n] : r["errors"]["by_kind"].items()) os << fmt::format(" {} x{}", k, n.get<int64_t>());
      os << fmt::format("; first: {}\n", r["errors"]["list"][0]["message"].get<std::string>());
    }
    if (r.contains("soak")) {
      const json& s = r["soak"];
      os << fmt::format("soak: {} windows of {:g} s; output tok/s drift last vs first {}, slope {} tok/s per minute; "
                        "e2e median drift {}, slope {} ms per minute\n",
                        s["windows"].size(), s["window_s"].get<double>(),
                        fv(s["drift_last_vs_first"]["output_tokens_per_s"], "{:+.3f}"),
                        fv(s["slope_per_minute"]["output_tokens_per_s"]),
                        fv(s["drift_last_vs_first"]["e2e_ms_median"], "{:+.3f}"), fv(s["slope_per_minute"]["e2e_ms_median"]));
    }
  }
  return os.str();
}

namespace {
// One run's section of the markdown report: every figure of the run.
void markdown_run(std::ostringstream& os, const json& r) {
  os << fmt::format("\n## {}\n\n", r["label"].get<std::string>());
  os << fmt::format("{} requests sent, {} completed, {} failed in {} s (peak concurrency {}); {} input and {} output tokens "
                    "(counted from {}).\n\n",
                    r["requests"]["sent"].get<int64_t>(), r["requests"]["completed"].get<int64_t>(),
                    r["requests"]["failed"].get<int64_t>(), fv(r["duration_s"], "{:.3f}"), r["peak_concurrency"].get<int>(),
                    r["input_tokens"].get<int64_t>(), r["output_tokens"].get<int64_t>(),
                    r["token_count_source"].get<std::string>());
  os << "| latency (ms) | n | mean [95% CI] | median [95% CI] | P90 [95% CI] | P99 [95% CI] | min | max | stddev |\n"
        "|---|---|---|---|---|---|---|---|---|\n";
  for (const char* m : {"ttft", "tpot", "itl", "e2e"}) {
    const json& x = r["latency_ms"][m];
    std::string name = m;
    std::transform(name.begin(), name.end(), name.begin(), ::toupper);
    os << fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", name, x["n"].get<int64_t>(), est(x["mean"]),
                      est(x["median"]), est(x["p90"]), est(x["p99"]), fv(x["min"]), fv(x["max"]), fv(x["stddev"]));
  }
  const json& g = r["goodput"];
  os << fmt::format("\nGoodput (SLO ttft {} ms, tpot {} ms, e2e {} ms): {} requests, {} of those sent, {} req/s.\n",
                    fv(g["slo_ms"]["ttft"], "{:g}"), fv(g["slo_ms"]["tpot"], "{:g}"), fv(g["slo_ms"]["e2e"], "{:g}"),
                    g["requests_meeting_slo"].get<int64_t>(), fv(g["fraction"], "{:.3f}"), fv(g["requests_per_s"]));
  if (r["cost"].is_object()) {
    os << "\n| cost | value |\n|---|---|\n";
    for (const auto& [key, v] : r["cost"].items()) {
      os << fmt::format("| {} | {} |\n", key, v.is_number() ? fmt::format("{:.6g}", v.get<double>()) : v.is_string() ? v.get<std::string>() : "-");
    }
  }
  const json& tel = r["telemetry"];
  if (tel.is_object() && tel.value("available", false)) {
    os << "\n| GPU | power W min/mean/max | temp C max | SM MHz mean | mem MHz mean | memory GiB max | util % mean | energy J |\n"
          "|---|---|---|---|---|---|---|---|\n";
    auto f = [](const json& d, const char* k, const char* s) { return d[k].is_object() ? fv(d[k][s], "{:.0f}") : std::string("-"); };
    for (const json& d : tel["devices"]) {
      os << fmt::format("| {} | {}/{}/{} | {} | {} | {} | {} | {} | {} |\n", d["name"].get<std::string>(), f(d, "power_w", "min"),
                        f(d, "power_w", "mean"), f(d, "power_w", "max"), f(d, "temperature_c", "max"),
                        f(d, "sm_clock_mhz", "mean"), f(d, "mem_clock_mhz", "mean"),
                        d["memory_used_gib"].is_object() ? fv(d["memory_used_gib"]["max"], "{:.1f}") : "-",
                        f(d, "gpu_util_pct", "mean"), fv(d["energy_j"], "{:.0f}"));
    }
  } else if (tel.is_object()) {
    os << "\nGPU telemetry unavailable: " << tel.value("reason", "") << "\n";
  }
  if (r["errors"]["total"].get<int64_t>() > 0) {
    os << "\n| error kind | count |\n|---|---|\n";
    for (const auto& [kind, n] : r["errors"]["by_kind"].items()) os << fmt::format("| {} | {} |\n", kind, n.get<int64_t>());
  }
  if (r.contains("soak")) {
    const json& sk = r["soak"];
    os << "\n| window (s) | completed | errors | req/s | out tok/s | TTFT median ms | TPOT median ms | E2E median ms |\n"
          "|---|---|---|---|---|---|---|---|\n";
    for (const json& w : sk["windows"]) {
      os << fmt::format("| {:g}-{:g} | {} | {} | {} | {} | {} | {} | {} |\n", w["start_s"].get<double>(), w["end_s"].get<double>(),
                        w["completed"].get<int64_t>(), w["errors"].get<int64_t>(), fv(w["requests_per_s"]),
                        fv(w["output_tokens_per_s"], "{:.1f}"), fv(w["ttft_ms_median"]), fv(w["tpot_ms_median"]),
                        fv(w["e2e_ms_median"]));
    }
    os << fmt::format("\nDrift last vs first window: output tok/s {}, TTFT {}, TPOT {}, E2E {}; slope per minute: output tok/s {}, "
                      "E2E ms {}; {} requests finished after the duration.\n",
                      fv(sk["drift_last_vs_first"]["output_tokens_per_s"], "{:+.3f}"), fv(sk["drift_last_vs_first"]["ttft_ms_median"], "{:+.3f}"),
                      fv(sk["drift_last_vs_first"]["tpot_ms_median"], "{:+.3f}"), fv(sk["drift_last_vs_first"]["e2e_ms_median"], "{:+.3f}"),
                      fv(sk["slope_per_minute"]["output_tokens_per_s"]), fv(sk["slope_per_minute"]["e2e_ms_median"]),
                      sk["drained_after_duration"].get<int64_t>());
  }
}
}  // namespace

std::string format_serve_markdown(const json& rep) {
  std::ostringstream os;
  const json& c = rep["config"];
  os << "# frugal bench serve\n\n";
  os << fmt::format("- url: `{}`\n- model: `{}`\n- endpoint: `{}`\n- dataset: `{}`\n- command: `{}`\n- frugal {}; server `{}`; "
                    "devices: {}; host `{}`; started {}\n\n",
                    c.value("url", ""), c.value("model", ""), c.value("endpoint", ""), c.value("dataset", ""),
                    c.value("command_line", ""), c.value("frugal_version", ""), c.value("server_header", ""),
                    c.value("devices", json::array()).dump(), c.value("host", ""), c.value("started_at", ""));
  os << "| run | sent | ok | failed | req/s | out tok/s | total tok/s | TTFT median ms [95% CI] | TTFT P99 ms | "
        "TPOT median ms [95% CI] | ITL P99 ms | E2E median ms [95% CI] | E2E P99 ms | goodput | $/1M out | $/1M total | kWh/1M out |\n";
  os << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const json& r : rep["runs"]) {
    const json& l = r["latency_ms"];
    const json& k = r["cost"];
    auto cost = [&](const char* f) { return k.is_object() ? fv(k[f], "{:.4f}") : std::string("-"); };
    os << fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                      r["label"].get<std::string>(), r["requests"]["sent"].get<int64_t>(),
                      r["requests"]["completed"].get<int64_t>(), r["requests"]["failed"].get<int64_t>(),
                      fv(r["throughput"]["requests_per_s"]), fv(r["throughput"]["output_tokens_per_s"], "{:.1f}"),
                      fv(r["throughput"]["total_tokens_per_s"], "{:.1f}"), est(l["ttft"]["median"]),
                      fv(l["ttft"]["p99"]["value"]), est(l["tpot"]["median"]), fv(l["itl"]["p99"]["value"]),
                      est(l["e2e"]["median"]), fv(l["e2e"]["p99"]["value"]), fv(r["goodput"]["fraction"], "{:.3f}"),
                      cost("usd_per_1m_output_tokens"), cost("usd_per_1m_total_tokens"), cost("kwh_per_1m_output_tokens"));
  }
  for (const json& r : rep["runs"]) markdown_run(os, r);
  return os.str();
}

namespace {
// Every scalar of a run, flattened to dotted keys (lists of requests, errors, windows and CDFs
// are left to the JSON).
void flatten(const json& j, const std::string& prefix, std::vector<std::pair<std::string, std::string>>& out) {
  static const std::set<std::string> kSkip = {"per_request", "cdf_ms", "list", "windows", "devices"};
  for (const auto& [k, v] : j.items()) {
    if (kSkip.count(k)) continue;
    std::string key = prefix.empty() ? k : prefix + "." + k;
    if (v.is_object()) {
      flatten(v, key, out);
    } else if (v.is_array()) {
      for (size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_structured()) out.emplace_back(key + "." + std::to_string(i), v[i].is_string() ? v[i].get<std::string>() : v[i].dump());
      }
    } else {
      out.emplace_back(key, v.is_string() ? v.get<std::string>() : v.is_null() ? "" : v.dump());
    }
  }
}
std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}
}  // namespace

std::string format_serve_csv(const json& rep) {
  std::vector<std::vector<std::pair<std::string, std::string>>> rows;
  std::vector<std::string> cols;
  std::set<std::string> seen;
  for (const json& r : rep["runs"]) {
    std::vector<std::pair<std::string, std::string>> row;
    flatten(rep["config"], "config", row);
    flatten(r, "", row);
    for (const auto& [k, v] : row) {
      if (seen.insert(k).second) cols.push_back(k);
    }
    rows.push_back(std::move(row));
  }
  std::ostringstream os;
  for (size_t i = 0; i < cols.size(); ++i) os << (i ? "," : "") << csv_cell(cols[i]);
  os << "\n";
  for (const auto& row : rows) {
    std::map<std::string, std::string> m(row.begin(), row.end());
    for (size_t i = 0; i < cols.size(); ++i) os << (i ? "," : "") << csv_cell(m.count(cols[i]) ? m[cols[i]] : "");
    os << "\n";
  }
  return os.str();
}

}  // namespace frugal::bench
