// report.html: one self-contained page (inline CSS and SVG, no script, no network): the table,
// the Pareto front of $/1M tokens vs KLD, decode tok/s vs concurrency per precision, latency
// CDFs and the memory breakdown. Every plot is a <figure class="plot" id="...">.
#include <algorithm>
#include <cmath>
#include <sstream>

#include <fmt/format.h>

#include "bench/serve_svg.h"
#include "report/report.h"

namespace frugal::report {
namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2"};

void figure(std::ostringstream& os, const std::string& id, const std::string& caption, const std::string& svg) {
  os << "<figure class=\"plot\" id=\"" << id << "\">" << svg << "<figcaption>" << esc(caption)
     << "</figcaption></figure>\n";
}

std::string pareto(const Report& r) {
  // x: mean KLD vs bf16 (bf16 itself is 0), y: $/1M output tokens (rent, else owned).
  std::vector<bench::PlotSeries> series;
  for (const PrecisionRow& row : r.rows) {
    if (row.status != "ok") continue;
    const std::optional<double> usd = row.usd_per_m_rent ? row.usd_per_m_rent : row.usd_per_m_own;
    const std::optional<double> kld = row.precision == "bf16" ? std::optional<double>(0.0) : row.kld_mean;
    if (!usd || !kld) continue;
    series.push_back({.name = row.precision, .points = {{*kld, *usd}}});
  }
  if (series.empty()) series.push_back({.name = "no priced rows", .points = {{0, 0}}});
  return bench::svg_line_chart({.title = "Pareto front: $/1M output tokens vs mean KLD",
                                .x_label = "mean KLD vs bf16 (nats)", .y_label = "$ per 1M output tokens"},
                               series);
}

std::string sweep(const Report& r) {
  std::vector<bench::PlotSeries> series;
  for (const PrecisionRow& row : r.rows) {
    if (row.status != "ok") continue;
    bench::PlotSeries m{.name = row.precision + " measured"}, p{.name = row.precision + " predicted"};
    for (const SweepPoint& s : row.sweep) {
      m.points.emplace_back(s.batch, s.tok_per_s.value);
      if (s.predicted_tok_per_s > 0) p.points.emplace_back(s.batch, s.predicted_tok_per_s);
    }
    series.push_back(m);
    if (!p.points.empty()) series.push_back(p);
  }
  if (series.empty()) series.push_back({.name = "no rows", .points = {{1, 0}}});
  return bench::svg_line_chart(
      {.title = "Decode tok/s vs concurrency", .x_label = "concurrent sequences", .y_label = "output tok/s",
       .log_x = true},
      series);
}

std::string latency_cdf(const Report& r) {
  std::vector<bench::PlotSeries> series;
  for (const PrecisionRow& row : r.rows) {
    if (row.status != "ok") continue;
    bench::PlotSeries itl{.name = row.precision + " ITL (batch 1)"};
    for (size_t i = 0; i < row.itl_cdf_ms.size(); ++i) itl.points.emplace_back(row.itl_cdf_ms[i], 5.0 * i / 100.0);
    if (!itl.points.empty()) series.push_back(itl);
    std::vector<double> t = row.ttft_samples_ms;
    std::sort(t.begin(), t.end());
    bench::PlotSeries ttft{.name = row.precision + " TTFT"};
    for (size_t i = 0; i < t.size(); ++i) ttft.points.emplace_back(t[i], static_cast<double>(i + 1) / t.size());
    if (!ttft.points.empty()) series.push_back(ttft);
  }
  if (series.empty()) series.push_back({.name = "no rows", .points = {{0, 0}}});
  return bench::svg_line_chart({.title = "Latency CDFs", .x_label = "milliseconds", .y_label = "fraction"}, series);
}

// Stacked horizontal bars: weights, KV pool, workspace, graphs (GiB) per precision.
std::string memory(const Report& r) {
  std::vector<const PrecisionRow*> rows;
  double max_total = 0;
  for (const PrecisionRow& row : r.rows) {
    if (row.status != "ok") continue;
    rows.push_back(&row);
    max_total = std::max(max_total, row.weights_gib + row.kv_pool_gib + row.workspace_gib + row.graphs_gib);
  }
  const double w = 760, bar_h = 28, left = 110, right = 40, top = 50;
  const double h = top + std::max<size_t>(rows.size(), 1) * (bar_h + 12) + 50;
  std::ostringstream o;
  o << fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
                   "font-family=\"sans-serif\" font-size=\"12\">",
                   w, h, w, h);
  o << "<text x=\"10\" y=\"20\" font-size=\"15\">Memory breakdown (GiB, measured)</text>";
  const char* parts[] = {"weights", "KV pool", "workspace", "graphs"};
  for (int i = 0; i < 4; ++i) {
    o << fmt::format("<rect x=\"{}\" y=\"30\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{}\" y=\"40\">{}</text>",
                     left + i * 120, kColors[i], left + i * 120 + 16, parts[i]);
  }
  const double scale = max_total > 0 ? (w - left - right) / max_total : 0;
  for (size_t k = 0; k < rows.size(); ++k) {
    const PrecisionRow& row = *rows[k];
    const double y = top + k * (bar_h + 12);
    o << fmt::format("<text x=\"10\" y=\"{}\">{}</text>", y + bar_h / 2 + 4, esc(row.precision));
    double x = left;
    const double v[] = {row.weights_gib, row.kv_pool_gib, row.workspace_gib, row.graphs_gib};
    for (int i = 0; i < 4; ++i) {
      o << fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"><title>{} {:.4f} "
                       "GiB</title></rect>",
                       x, y, v[i] * scale, bar_h, kColors[i], parts[i], v[i]);
      x += v[i] * scale;
    }
    o << fmt::format("<text x=\"{:.1f}\" y=\"{}\">{:.3f}</text>", std::min(x + 4, w - right), y + bar_h / 2 + 4,
                     v[0] + v[1] + v[2] + v[3]);
  }
  o << "</svg>";
  return o.str();
}

std::string num(const std::optional<double>& v) { return v ? fmt::format("{:.4f}", *v) : "-"; }

}  // namespace

std::string format_report_html(const Report& r) {
  std::ostringstream os;
  os << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>frugal report: " << esc(r.model)
     << "</title>\n<style>body{font-family:sans-serif;margin:24px;max-width:1200px}table{border-collapse:collapse;"
        "font-size:13px}td,th{border:1px solid #ccc;padding:4px 6px;text-align:right}td:first-child,th:first-child"
        "{text-align:left}.failed{color:#a00}figure{margin:16px 0}</style></head><body>\n";
  os << "<h1>frugal report</h1>\n<p>" << esc(r.model) << " on " << esc(r.device) << (r.quick ? " (--quick)" : "")
     << "; prediction: " << esc(r.prediction_gpu) << "; "
     << (r.complete ? "complete" : "<b>interrupted</b>") << "; " << esc(r.started_utc) << " to " << esc(r.finished_utc)
     << "</p>\n";
  os << "<table id=\"rows\"><tr><th>precision</th><th>status</th><th>weights GiB (pred)</th><th>KV B/token (pred)"
        "</th><th>decode b1 tok/s [95% CI] (pred)</th><th>prefill tok/s [95% CI]</th><th>TTFT ms</th><th>ITL p99 ms"
        "</th><th>best tok/s</th><th>$/1M rent</th><th>$/1M own</th><th>kWh/1M</th><th>PPL</th><th>KLD</th><th>MMLU</th></tr>\n";
  for (const PrecisionRow& row : r.rows) {
    if (row.status != "ok") {
      os << "<tr class=\"failed\"><td>" << esc(row.precision) << "</td><td>" << esc(row.status)
         << "</td><td colspan=\"13\" style=\"text-align:left\">" << esc(row.why) << "</td></tr>\n";
      continue;
    }
    const Est& d = row.decode_b1_tok_per_s;
    const Est& p = row.prefill_tok_per_s;
    os << fmt::format(
        "<tr><td>{}</td><td>ok</td><td>{:.4f} ({:.4f})</td><td>{:.0f} ({:.0f})</td><td>{:.1f} [{:.1f}, {:.1f}] "
        "({:.1f})</td><td>{:.0f} [{:.0f}, {:.0f}]</td><td>{:.2f}</td><td>{:.3f}</td><td>{:.1f}</td><td>{}</td><td>{}"
        "</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        esc(row.precision), row.weights_gib, row.pred_weights_gib, row.kv_bytes_per_token, row.pred_kv_bytes_per_token,
        d.value, d.ci_lo, d.ci_hi, row.pred_decode_b1_tok_per_s, p.value, p.ci_lo, p.ci_hi, row.ttft_ms.value,
        row.itl_ms_p99.value, row.best_tok_per_s, num(row.usd_per_m_rent), num(row.usd_per_m_own), num(row.kwh_per_m),
        num(row.ppl), num(row.kld_mean),
        row.mmlu ? fmt::format("{:.3f} &plusmn; {:.3f}", *row.mmlu, row.mmlu_stderr.value_or(0)) : std::string("-"));
  }
  os << "</table>\n<h2>Recommendations</h2><ul>";
  for (const std::string& s : r.recommendations) os << "<li>" << esc(s) << "</li>";
  os << "</ul>\n";
  figure(os, "pareto", "$/1M output tokens vs mean KLD vs bf16 (rows without KLD are left out)", pareto(r));
  figure(os, "sweep", "decode tok/s vs concurrency, measured and predicted", sweep(r));
  figure(os, "latency", "ITL (batch 1) and TTFT cumulative distributions", latency_cdf(r));
  figure(os, "memory", "measured memory by precision", memory(r));
  os << "<h2>Notes</h2><ul>";
  for (const std::string& n : r.notes) os << "<li>" << esc(n) << "</li>";
  os << "</ul></body></html>\n";
  return os.str();
}

}  // namespace frugal::report
