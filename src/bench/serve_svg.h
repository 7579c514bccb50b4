// Self-contained SVG plots of a `frugal bench serve` report (open in any browser): latency CDFs
// (TTFT, TPOT, ITL, E2E; one line per run) and throughput against concurrency (one line per
// request rate); for soak runs, throughput per window over time.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace frugal::bench {

struct PlotSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in order
};

struct PlotSpec {
  std::string title, x_label, y_label;
  bool log_x = false;
};

// s with <, >, & and " escaped for SVG text and attributes.
std::string svg_escape(const std::string& s);
// "Nice" tick positions covering [lo, hi] (steps of 1, 2 or 5 times a power of ten, at most ~6).
std::vector<double> svg_ticks(double lo, double hi);

// A line chart with axes, ticks, a legend and one marker per point.
std::string svg_line_chart(const PlotSpec& spec, const std::vector<PlotSeries>& series);

// Writes <dir>/{ttft,tpot,itl,e2e}_cdf.svg, throughput_vs_concurrency.svg and, for soak runs,
// soak_throughput.svg; returns the paths written.
Result<std::vector<std::string>> write_serve_svgs(const nlohmann::json& report, const std::string& dir);

}  // namespace frugal::bench
