#include "bench/kernel_trace.h"

#include <algorithm>
#include <map>
#include <queue>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>

#include "bench/serve_svg.h"

namespace frugal::bench {
namespace {

// A step: one graph launch's kernels (graph mode), or the whole window (eager).
struct Span {
  uint64_t start = UINT64_MAX, end = 0;
};

std::string dims(const int32_t (&d)[3]) { return fmt::format("({}, {}, {})", d[0], d[1], d[2]); }

double us(uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

// The graph launches of the trace, by start: groups of records with a graph and one correlation.
std::vector<Span> graph_launches(std::span<const KernelRecord> records) {
  std::map<uint32_t, Span> by_corr;
  for (const KernelRecord& r : records) {
    if (r.graph_id == 0) continue;
    Span& s = by_corr[r.correlation];
    s.start = std::min(s.start, r.start_ns);
    s.end = std::max(s.end, r.end_ns);
  }
  std::vector<Span> out;
  out.reserve(by_corr.size());
  for (const auto& [corr, s] : by_corr) out.push_back(s);
  std::sort(out.begin(), out.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
  return out;
}

}  // namespace

std::string short_kernel_name(const std::string& name) {
  std::string s = name;
  if (s.rfind("void ", 0) == 0) s = s.substr(5);
  // Drop the parameter list: the last '(' at template depth 0 whose ')' ends the name.
  if (!s.empty() && s.back() == ')') {
    int depth = 0;
    for (size_t i = s.size(); i-- > 0;) {
      const char c = s[i];
      if (c == ')') ++depth;
      else if (c == '(' && --depth == 0) {
        // "(anonymous namespace)" is not a parameter list; a name ends before this '('.
        if (i > 0 && s.compare(i, 21, "(anonymous namespace)") != 0) s.resize(i);
        break;
      }
    }
  }
  for (const char* prefix : {"frugal::cuda::", "frugal::", "(anonymous namespace)::"}) {
    for (size_t p; (p = s.find(prefix)) != std::string::npos;) s.erase(p, std::char_traits<char>::length(prefix));
  }
  return s;
}

Result<nlohmann::json> analyze_kernel_trace(std::span<const KernelRecord> records, const KernelTraceOptions& opts) {
  if (records.empty()) {
    return invalid_argument("kernel trace: no kernels were recorded (is the device the tracer watches the engine's?)");
  }
  for (const KernelRecord& r : records) {
    if (r.end_ns < r.start_ns) {
      return invalid_argument(fmt::format("kernel trace: kernel {} ends ({} ns) before it starts ({} ns)", r.name,
                                          r.end_ns, r.start_ns));
    }
  }
  const std::vector<Span> launches = graph_launches(records);
  const bool graph = launches.size() >= 3;
  uint64_t w0 = UINT64_MAX, w1 = 0;
  std::vector<Span> steps;  // graph mode: the launches inside the window
  if (graph) {
    steps.assign(launches.begin() + 1, launches.end() - 1);
    w0 = steps.front().start;
    w1 = std::max_element(steps.begin(), steps.end(), [](const Span& a, const Span& b) { return a.end < b.end; })->end;
  } else {
    for (const KernelRecord& r : records) {
      w0 = std::min(w0, r.start_ns);
      w1 = std::max(w1, r.end_ns);
    }
  }
  const double n_steps = graph ? static_cast<double>(steps.size()) : static_cast<double>(std::max<int64_t>(1, opts.engine_steps));

  // The records inside the window, clipped to it.
  struct Clip {
    const KernelRecord* r;
    uint64_t s, e;
  };
  std::vector<Clip> in;
  for (const KernelRecord& r : records) {
    const bool empty = r.end_ns == r.start_ns;
    const bool touches = empty ? r.start_ns >= w0 && r.start_ns < w1 : r.start_ns < w1 && r.end_ns > w0;
    if (touches) in.push_back({&r, std::max(r.start_ns, w0), std::min(r.end_ns, w1)});
  }
  std::sort(in.begin(), in.end(), [](const Clip& a, const Clip& b) { return a.s != b.s ? a.s < b.s : a.e < b.e; });

  // Sweep the event times; each busy segment goes to the oldest running kernel.
  std::vector<uint64_t> times;
  times.reserve(2 * in.size() + 2);
  times.push_back(w0);
  times.push_back(w1);
  for (const Clip& c : in) {
    times.push_back(c.s);
    times.push_back(c.e);
  }
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  std::vector<uint64_t> own(in.size(), 0);
  uint64_t busy = 0;
  std::vector<Span> idle;
  // Min-heap of running kernels by (start, index): the oldest on top.
  using Key = std::pair<uint64_t, size_t>;
  std::priority_queue<Key, std::vector<Key>, std::greater<>> running;
  size_t next = 0;
  for (size_t t = 0; t + 1 < times.size(); ++t) {
    const uint64_t a = times[t], b = times[t + 1];
    while (next < in.size() && in[next].s <= a) {
      running.push({in[next].s, next});
      ++next;
    }
    while (!running.empty() && in[running.top().second].e <= a) running.pop();
    if (!running.empty()) {
      own[running.top().second] += b - a;
      busy += b - a;
    } else if (!idle.empty() && idle.back().end == a) {
      idle.back().end = b;
    } else {
      idle.push_back({a, b});
    }
  }

  // Per kernel (name and grid), per step.
  struct Agg {
    std::string name, grid, block;
    int64_t launches = 0;
    uint64_t own = 0, duration = 0;
    int32_t registers = 0;
  };
  std::unordered_map<std::string, size_t> index;
  std::vector<Agg> aggs;
  uint64_t duration_sum = 0;
  int64_t launches_total = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const KernelRecord& r = *in[i].r;
    const std::string name = short_kernel_name(r.name), grid = dims(r.grid);
    const std::string key = name + " " + grid;
    auto [it, fresh] = index.emplace(key, aggs.size());
    if (fresh) aggs.push_back({name, grid, dims(r.block), 0, 0, 0, r.registers});
    Agg& a = aggs[it->second];
    const bool starts_inside = r.start_ns >= w0 && r.start_ns < w1;
    a.launches += starts_inside ? 1 : 0;
    launches_total += starts_inside ? 1 : 0;
    a.own += own[i];
    a.duration += in[i].e - in[i].s;
    duration_sum += in[i].e - in[i].s;
  }
  std::sort(aggs.begin(), aggs.end(),
            [](const Agg& a, const Agg& b) { return a.own != b.own ? a.own > b.own : a.name < b.name; });
  const double window = static_cast<double>(w1 - w0);
  nlohmann::json kernels = nlohmann::json::array();
  uint64_t other_own = 0;
  for (size_t i = 0; i < aggs.size(); ++i) {
    const Agg& a = aggs[i];
    if (static_cast<int>(i) >= opts.top_kernels) {
      other_own += a.own;
      continue;
    }
    kernels.push_back({{"name", a.name}, {"grid", a.grid}, {"block", a.block}, {"registers", a.registers},
                       {"launches", static_cast<double>(a.launches) / n_steps},
                       {"own_us", us(a.own) / n_steps}, {"duration_us", us(a.duration) / n_steps},
                       {"mean_us", a.launches > 0 ? us(a.duration) / static_cast<double>(a.launches) : 0.0},
                       {"share", window > 0 ? static_cast<double>(a.own) / window : 0.0}});
  }

  // Gaps: inside a step or between steps, and the boundary each sits at.
  std::vector<size_t> by_end(in.size());
  for (size_t i = 0; i < in.size(); ++i) by_end[i] = i;
  std::sort(by_end.begin(), by_end.end(), [&](size_t x, size_t y) { return in[x].e < in[y].e; });
  std::map<std::string, std::pair<uint64_t, int64_t>> boundaries;
  uint64_t gap_inside = 0, gap_between = 0;
  int64_t hist[4] = {0, 0, 0, 0};
  size_t step_i = 0;
  for (const Span& g : idle) {
    const uint64_t len = g.end - g.start;
    bool inside = !graph;
    if (graph) {
      while (step_i < steps.size() && steps[step_i].end <= g.start) ++step_i;
      inside = step_i < steps.size() && steps[step_i].start <= g.start && g.end <= steps[step_i].end;
    }
    (inside ? gap_inside : gap_between) += len;
    const double l = us(len);
    ++hist[l < 1 ? 0 : l < 3 ? 1 : l < 10 ? 2 : 3];
    // The kernel that ended last at or before the gap, and the first that starts at or after it.
    auto after = std::upper_bound(by_end.begin(), by_end.end(), g.start, [&](uint64_t t, size_t x) { return t < in[x].e; });
    auto before = std::lower_bound(in.begin(), in.end(), g.end, [](const Clip& c, uint64_t t) { return c.s < t; });
    const std::string from = after == by_end.begin() ? "(window start)" : short_kernel_name(in[*(after - 1)].r->name);
    const std::string to = before == in.end() ? "(window end)" : short_kernel_name(before->r->name);
    auto& b = boundaries[from + " -> " + to + (inside ? "" : " [between steps]")];
    b.first += len;
    b.second += 1;
  }
  std::vector<std::pair<std::string, std::pair<uint64_t, int64_t>>> bl(boundaries.begin(), boundaries.end());
  std::sort(bl.begin(), bl.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  nlohmann::json gaps = nlohmann::json::array();
  for (size_t i = 0; i < bl.size() && static_cast<int>(i) < opts.top_gaps; ++i) {
    gaps.push_back({{"boundary", bl[i].first}, {"us", us(bl[i].second.first) / n_steps},
                    {"count", static_cast<double>(bl[i].second.second) / n_steps}});
  }

  nlohmann::json j;
  j["mode"] = graph ? "graph" : "eager";
  j["steps"] = n_steps;
  j["graph_launches"] = launches.size();
  j["records"] = records.size();
  j["window_us"] = us(w1 - w0);
  j["step_us"] = us(w1 - w0) / n_steps;
  j["kernel_us"] = us(busy) / n_steps;
  j["gap_inside_us"] = us(gap_inside) / n_steps;
  j["gap_between_us"] = us(gap_between) / n_steps;
  j["overlap_us"] = us(duration_sum - busy) / n_steps;
  j["launches"] = static_cast<double>(launches_total) / n_steps;
  j["kernels"] = kernels;
  j["kernels_other_own_us"] = us(other_own) / n_steps;
  j["gaps"] = gaps;
  j["gap_histogram"] = {{"lt_1us", hist[0] / n_steps}, {"1_3us", hist[1] / n_steps}, {"3_10us", hist[2] / n_steps},
                        {"ge_10us", hist[3] / n_steps}};
  return j;
}

nlohmann::json chrome_trace(std::span<const KernelRecord> records, int max_steps) {
  nlohmann::json events = nlohmann::json::array();
  if (records.empty()) return {{"traceEvents", events}, {"displayTimeUnit", "ns"}};
  const std::vector<Span> launches = graph_launches(records);
  uint64_t w0 = UINT64_MAX, w1 = 0;
  std::vector<Span> shown;
  if (launches.size() >= 3) {
    const size_t n = std::min<size_t>(launches.size() - 2, static_cast<size_t>(std::max(1, max_steps)));
    shown.assign(launches.begin() + 1, launches.begin() + 1 + static_cast<std::ptrdiff_t>(n));
    w0 = shown.front().start;
    for (const Span& s : shown) w1 = std::max(w1, s.end);
  } else {
    for (const KernelRecord& r : records) {
      w0 = std::min(w0, r.start_ns);
      w1 = std::max(w1, r.end_ns);
    }
  }
  const auto rel = [&](uint64_t t) { return static_cast<double>(t - w0) / 1000.0; };
  std::map<uint32_t, bool> streams;
  for (const KernelRecord& r : records) {
    if (r.start_ns < w0 || r.start_ns > w1) continue;
    streams[r.stream] = true;
    events.push_back({{"name", short_kernel_name(r.name)}, {"cat", "kernel"}, {"ph", "X"}, {"ts", rel(r.start_ns)},
                      {"dur", static_cast<double>(r.end_ns - r.start_ns) / 1000.0}, {"pid", 0}, {"tid", r.stream},
                      {"args", {{"grid", dims(r.grid)}, {"block", dims(r.block)}, {"registers", r.registers},
                                {"shared_bytes", r.shared_bytes}, {"correlation", r.correlation}, {"graph", r.graph_id},
                                {"full_name", r.name}}}});
  }
  for (size_t i = 0; i < shown.size(); ++i) {
    events.push_back({{"name", fmt::format("step {}", i + 1)}, {"cat", "step"}, {"ph", "X"}, {"ts", rel(shown[i].start)},
                      {"dur", static_cast<double>(shown[i].end - shown[i].start) / 1000.0}, {"pid", 0}, {"tid", 0}});
  }
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", 0}, {"args", {{"name", "graph launches"}}}});
  for (const auto& [s, unused] : streams) {
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", s},
                      {"args", {{"name", fmt::format("stream {}", s)}}}});
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ns"}};
}

std::string kernel_trace_svg(const std::string& title, std::span<const KernelRecord> records, const nlohmann::json& a) {
  static const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                  "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};
  constexpr int kTopRows = 10;
  constexpr double kW = 1000, kLeft = 20, kBarW = kW - 2 * kLeft;
  const double step = a["step_us"].get<double>();
  // Bar segments: the top kernels, the rest, the two kinds of gap.
  struct Seg {
    std::string label, color;
    double us;
  };
  std::vector<Seg> segs;
  std::map<std::string, std::string> color_of;  // "name grid" -> colour (the timeline's)
  double other = a["kernels_other_own_us"].get<double>();
  int i = 0;
  for (const auto& k : a["kernels"]) {
    const std::string key = k["name"].get<std::string>() + " " + k["grid"].get<std::string>();
    if (i < kTopRows) {
      segs.push_back({key, kColors[i], k["own_us"].get<double>()});
      color_of[key] = kColors[i];
    } else {
      other += k["own_us"].get<double>();
    }
    ++i;
  }
  segs.push_back({"other kernels", "#c7c7c7", other});
  segs.push_back({"gaps inside a step", "#f4a6a6", a["gap_inside_us"].get<double>()});
  segs.push_back({"gaps between steps (traced: CUPTI's cost included)", "#fde0a0", a["gap_between_us"].get<double>()});

  // The timeline's span: the median graph replay of the window up to the next replay's start.
  const std::vector<Span> launches = graph_launches(records);
  uint64_t t0 = UINT64_MAX, t1 = 0;
  if (launches.size() >= 3) {
    std::vector<size_t> idx;
    for (size_t j = 1; j + 1 < launches.size(); ++j) idx.push_back(j);
    std::sort(idx.begin(), idx.end(), [&](size_t x, size_t y) {
      return launches[x].end - launches[x].start < launches[y].end - launches[y].start;
    });
    const size_t m = idx[idx.size() / 2];
    t0 = launches[m].start;
    t1 = m + 1 < launches.size() ? launches[m + 1].start : launches[m].end;
  } else {
    for (const KernelRecord& r : records) {
      t0 = std::min(t0, r.start_ns);
      t1 = std::max(t1, r.end_ns);
    }
  }
  if (t1 <= t0) t1 = t0 + 1;
  std::map<uint32_t, int> lanes;
  for (const KernelRecord& r : records)
    if (r.end_ns > t0 && r.start_ns < t1) lanes.emplace(r.stream, 0);
  int lane = 0;
  for (auto& [s, l] : lanes) l = lane++;

  const double bar_y = 50, bar_h = 34, legend_y = bar_y + bar_h + 24, row_h = 17;
  const double tl_y = legend_y + row_h * static_cast<double>(segs.size()) + 40, lane_h = 28;
  const double height = tl_y + lane_h * std::max(1, lane) + 50;
  std::ostringstream o;
  o << fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{:.0f}\" viewBox=\"0 0 {} {:.0f}\" "
                   "font-family=\"sans-serif\" font-size=\"12\">\n",
                   kW, height, kW, height);
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << fmt::format("<text x=\"{}\" y=\"22\" font-size=\"15\">{}</text>\n", kLeft,
                   svg_escape(fmt::format("{}: a step of {:.1f} us, {:.1f} launches", title, step, a["launches"].get<double>())));
  double x = kLeft;
  for (const Seg& g : segs) {
    const double w = step > 0 ? g.us / step * kBarW : 0;
    o << fmt::format("<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\">"
                     "<title>{}: {:.1f} us</title></rect>\n",
                     x, bar_y, w, bar_h, g.color, svg_escape(g.label), g.us);
    x += w;
  }
  for (size_t j = 0; j < segs.size(); ++j) {
    const double y = legend_y + row_h * static_cast<double>(j);
    o << fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"12\" height=\"12\" fill=\"{}\"/>\n", kLeft, y - 10, segs[j].color);
    o << fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.1f} us</text>\n", kLeft + 90, y, segs[j].us);
    o << fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.1f}%</text>\n", kLeft + 140, y,
                     step > 0 ? 100 * segs[j].us / step : 0.0);
    o << fmt::format("<text x=\"{}\" y=\"{:.1f}\">{}</text>\n", kLeft + 152, y, svg_escape(segs[j].label));
  }
  // Timeline of one step.
  const double span_us = static_cast<double>(t1 - t0) / 1000.0;
  const std::string tl_title = launches.size() >= 3
                                   ? fmt::format("one step (the median replay and the gap after it), {:.1f} us", span_us)
                                   : fmt::format("the traced window, {:.1f} us", span_us);
  o << fmt::format("<text x=\"{}\" y=\"{:.1f}\">{}</text>\n", kLeft, tl_y - 12, svg_escape(tl_title));
  const auto px = [&](uint64_t t) {
    const uint64_t c = std::clamp(t, t0, t1);
    return kLeft + static_cast<double>(c - t0) / static_cast<double>(t1 - t0) * kBarW;
  };
  for (const auto& [s, l] : lanes) {
    const double y = tl_y + lane_h * l;
    o << fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"{}\" height=\"{}\" fill=\"#fbeaea\"/>\n", kLeft, y, kBarW, lane_h - 6);
  }
  for (const KernelRecord& r : records) {
    if (r.end_ns <= t0 || r.start_ns >= t1) continue;
    const std::string key = short_kernel_name(r.name) + " " + dims(r.grid);
    auto c = color_of.find(key);
    const double y = tl_y + lane_h * lanes[r.stream];
    o << fmt::format("<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\" fill-opacity=\"0.85\">"
                     "<title>{}: {:.2f} us</title></rect>\n",
                     px(r.start_ns), y, std::max(0.5, px(r.end_ns) - px(r.start_ns)), lane_h - 6,
                     c == color_of.end() ? "#c7c7c7" : c->second, svg_escape(key), us(r.end_ns - r.start_ns));
  }
  const double axis_y = tl_y + lane_h * std::max(1, lane);
  for (double v : svg_ticks(0, span_us)) {
    const double X = kLeft + v / span_us * kBarW;
    o << fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#999\"/>\n", X, axis_y - 4, X,
                     axis_y);
    o << fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{:g}</text>\n", X, axis_y + 14, v);
  }
  o << fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">us</text>\n", kLeft + kBarW / 2, axis_y + 32);
  o << "</svg>\n";
  return o.str();
}

std::string format_kernel_trace(const std::string& title, const nlohmann::json& a, int rows) {
  std::ostringstream os;
  const double step = a["step_us"].get<double>();
  const auto pct = [&](double x) { return step > 0 ? 100.0 * x / step : 0.0; };
  const std::string mode = a["mode"] == "graph"
                               ? fmt::format("{:.0f} graph replays (the first and last of {} left out)",
                                             a["steps"].get<double>(), a["graph_launches"].get<int64_t>())
                               : fmt::format("{:.0f} engine step(s), eager launches", a["steps"].get<double>());
  os << fmt::format("kernel trace, {}: {}\n", title, mode);
  const double k = a["kernel_us"].get<double>(), gi = a["gap_inside_us"].get<double>(), gb = a["gap_between_us"].get<double>();
  os << fmt::format("  step {:.1f} us = kernels {:.1f} ({:.1f}%) + gaps inside the step {:.1f} ({:.1f}%) + between steps "
                    "{:.1f} ({:.1f}%); {:.1f} launches, PDL overlap {:.1f} us\n",
                    step, k, pct(k), gi, pct(gi), gb, pct(gb), a["launches"].get<double>(), a["overlap_us"].get<double>());
  if (a.contains("timed_step_us"))
    os << fmt::format("  timed step {:.1f} us - kernels {:.1f} = {:.1f} us outside the kernels untraced (host work between "
                      "steps); the traced gap between steps also holds CUPTI's own cost\n",
                      a["timed_step_us"].get<double>(), k, a["timed_outside_kernels_us"].get<double>());
  const auto& h = a["gap_histogram"];
  os << fmt::format("  gaps a step: {:.1f} under 1 us, {:.1f} of 1-3 us, {:.1f} of 3-10 us, {:.1f} of 10 us or more\n",
                    h["lt_1us"].get<double>(), h["1_3us"].get<double>(), h["3_10us"].get<double>(), h["ge_10us"].get<double>());
  os << fmt::format("  {:<72} {:>9} {:>9} {:>6} {:>8}\n", "kernel grid", "launches", "own us", "%", "mean us");
  int n = 0;
  for (const auto& r : a["kernels"]) {
    if (n++ >= rows) break;
    std::string name = r["name"].get<std::string>() + " " + r["grid"].get<std::string>();
    if (name.size() > 72) name = name.substr(0, 69) + "...";
    os << fmt::format("  {:<72} {:>9.1f} {:>9.1f} {:>6.1f} {:>8.2f}\n", name, r["launches"].get<double>(),
                      r["own_us"].get<double>(), 100.0 * r["share"].get<double>(), r["mean_us"].get<double>());
  }
  os << fmt::format("  {:<72} {:>9} {:>9} {:>6}\n", "largest gaps (after -> before)", "count", "us", "%");
  n = 0;
  for (const auto& g : a["gaps"]) {
    if (n++ >= rows) break;
    std::string name = g["boundary"].get<std::string>();
    if (name.size() > 72) name = name.substr(0, 69) + "...";
    os << fmt::format("  {:<72} {:>9.1f} {:>9.1f} {:>6.1f}\n", name, g["count"].get<double>(), g["us"].get<double>(),
                      pct(g["us"].get<double>()));
  }
  return os.str();
}

}  // namespace frugal::bench
