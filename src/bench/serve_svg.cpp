#include "bench/serve_svg.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

namespace frugal::bench {

using json = nlohmann::json;

namespace {
constexpr double kW = 760, kH = 460, kLeft = 80, kRight = 200, kTop = 40, kBottom = 60;
const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};
}  // namespace

std::string svg_escape(const std::string& s) {
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

std::vector<double> svg_ticks(double lo, double hi) {
  double span = hi - lo;
  if (span <= 0) span = std::abs(hi) > 0 ? std::abs(hi) : 1;
  double step = std::pow(10, std::floor(std::log10(span / 5)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (span / (step * m) <= 6) {
      step *= m;
      break;
    }
  }
  std::vector<double> t;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) t.push_back(std::abs(v) < step * 1e-9 ? 0 : v);
  return t;
}

std::string svg_line_chart(const PlotSpec& spec, const std::vector<PlotSeries>& series) {
  double x0 = INFINITY, x1 = -INFINITY, y0 = 0, y1 = -INFINITY;
  for (const auto& s : series) {
    for (auto [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y) || (spec.log_x && x <= 0)) continue;
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      y0 = std::min(y0, y);
      y1 = std::max(y1, y);
    }
  }
  if (!std::isfinite(x0)) x0 = 0, x1 = 1, y1 = 1;
  if (y1 <= y0) y1 = y0 + 1;
  if (auto yt = svg_ticks(y0, y1); yt.size() >= 2) {  // end the axis on a tick
    double step = yt[1] - yt[0];
    y1 = std::ceil(y1 / step - 1e-9) * step;
  }
  auto fx = [&](double x) { return spec.log_x ? std::log2(x) : x; };
  double fx0 = fx(x0), fx1 = fx(x1);
  if (fx1 <= fx0) fx0 -= 0.5, fx1 += 0.5;
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (fx(x) - fx0) / (fx1 - fx0) * pw; };
  auto py = [&](double y) { return kTop + ph - (y - y0) / (y1 - y0) * ph; };
  std::ostringstream o;
  o << fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
                   "font-family=\"sans-serif\" font-size=\"12\">\n",
                   kW, kH, kW, kH);
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << fmt::format("<text x=\"{}\" y=\"22\" font-size=\"15\" text-anchor=\"middle\">{}</text>\n", kLeft + pw / 2, svg_escape(spec.title));
  // Axes and ticks.
  o << fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n", kLeft, kTop, pw, ph);
  std::vector<double> xt;
  if (spec.log_x) {
    for (double v = std::exp2(std::floor(fx0)); v <= x1 * 1.0001; v *= 2) if (v >= x0 * 0.9999) xt.push_back(v);
  } else {
    xt = svg_ticks(x0, x1);
  }
  for (double v : xt) {
    double X = px(v);
    o << fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#ddd\"/>\n", X, kTop, X, kTop + ph);
    o << fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:g}</text>\n", X, kTop + ph + 16, v);
  }
  for (double v : svg_ticks(y0, y1)) {
    double Y = py(v);
    o << fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n", kLeft, Y, kLeft + pw, Y);
    o << fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n", kLeft - 6, Y + 4, v);
  }
  o << fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", kLeft + pw / 2, kH - 18, svg_escape(spec.x_label));
  o << fmt::format("<text x=\"18\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {})\">{}</text>\n",
                   kTop + ph / 2, kTop + ph / 2, svg_escape(spec.y_label));
  // Series.
  for (size_t i = 0; i < series.size(); ++i) {
    const char* color = kColors[i % std::size(kColors)];
    std::string path;
    for (auto [x, y] : series[i].points) {
      if (!std::isfinite(x) || !std::isfinite(y) || (spec.log_x && x <= 0)) continue;
      path += fmt::format("{}{:.1f},{:.1f} ", path.empty() ? "M" : "L", px(x), py(y));
    }
    o << fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", path, color);
    if (series[i].points.size() <= 64) {
      for (auto [x, y] : series[i].points) {
        if (!std::isfinite(x) || !std::isfinite(y) || (spec.log_x && x <= 0)) continue;
        o << fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"><title>{:g}, {:g}</title></circle>\n",
                         px(x), py(y), color, x, y);
      }
    }
    double ly = kTop + 10 + 18.0 * static_cast<double>(i);
    o << fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2\"/>\n", kW - kRight + 12, ly,
                     kW - kRight + 32, ly, color);
    o << fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", kW - kRight + 38, ly + 4, svg_escape(series[i].name));
  }
  o << "</svg>\n";
  return o.str();
}

Result<std::vector<std::string>> write_serve_svgs(const json& report, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return io_error("--svg-dir '" + dir + "': cannot create the directory: " + ec.message());
  std::vector<std::string> written;
  auto write = [&](const std::string& name, const std::string& svg) -> Status {
    std::string path = dir + "/" + name;
    std::ofstream f(path);
    f << svg;
    if (!f) return io_error("cannot write " + path);
    written.push_back(path);
    return Status::ok();
  };
  const json& runs = report["runs"];
  const std::map<std::string, std::string> titles = {
      {"ttft", "Time to first token"}, {"tpot", "Time per output token"}, {"itl", "Inter-token latency"}, {"e2e", "End-to-end latency"}};
  for (const auto& [m, title] : titles) {
    std::vector<PlotSeries> ss;
    for (const json& r : runs) {
      PlotSeries s{.name = r["label"].get<std::string>()};
      const json& q = r["cdf_ms"][m];
      for (size_t i = 0; i < q.size(); ++i) s.points.emplace_back(q[i].get<double>(), static_cast<double>(i) / 100.0);
      ss.push_back(std::move(s));
    }
    FRUGAL_RETURN_IF_ERROR(write(m + "_cdf.svg", svg_line_chart({.title = title + " (CDF)", .x_label = "ms",
                                                                  .y_label = "fraction of requests"}, ss)));
  }
  // Throughput against concurrency, one line per request rate.
  std::map<std::string, PlotSeries> by_rate;
  double xmin = INFINITY, xmax = 0;
  for (const json& r : runs) {
    std::string rate = r["request_rate"].is_string() ? r["request_rate"].get<std::string>() : fmt::format("{:g}", r["request_rate"].get<double>());
    double x = r["max_concurrency"].is_number() ? r["max_concurrency"].get<double>() : r["peak_concurrency"].get<double>();
    double y = r["throughput"]["output_tokens_per_s"].is_number() ? r["throughput"]["output_tokens_per_s"].get<double>() : NAN;
    auto& s = by_rate[rate];
    s.name = "rate " + rate + " req/s";
    s.points.emplace_back(x, y);
    xmin = std::min(xmin, x);
    xmax = std::max(xmax, x);
  }
  std::vector<PlotSeries> tp;
  for (auto& [k, s] : by_rate) {
    std::sort(s.points.begin(), s.points.end());
    tp.push_back(std::move(s));
  }
  FRUGAL_RETURN_IF_ERROR(write("throughput_vs_concurrency.svg",
                               svg_line_chart({.title = "Output throughput vs concurrency", .x_label = "max concurrency",
                                               .y_label = "output tokens/s", .log_x = xmin > 0 && xmax / xmin >= 8}, tp)));
  std::vector<PlotSeries> soak;
  for (const json& r : runs) {
    if (!r.contains("soak")) continue;
    PlotSeries s{.name = r["label"].get<std::string>()};
    for (const json& w : r["soak"]["windows"]) {
      s.points.emplace_back((w["start_s"].get<double>() + w["end_s"].get<double>()) / 2, w["output_tokens_per_s"].get<double>());
    }
    soak.push_back(std::move(s));
  }
  if (!soak.empty()) {
    FRUGAL_RETURN_IF_ERROR(write("soak_throughput.svg", svg_line_chart({.title = "Output throughput per window (soak)",
                                                                        .x_label = "time (s)", .y_label = "output tokens/s"}, soak)));
  }
  return written;
}

}  // namespace frugal::bench
