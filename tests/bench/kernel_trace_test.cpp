// The kernel-trace accounting of `frugal bench offline --kernel-trace` (bench/kernel_trace.h) on
// hand-made traces whose answers are worked out in the comments: step windows from graph launches,
// own time under PDL overlap and across streams, gaps inside and between steps and the boundary
// each is charged to, the eager fallback, the kernel-name shortening and the Chrome trace.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/kernel_trace.h"

namespace frugal::bench {
namespace {

KernelRecord rec(const std::string& name, double start_us, double end_us, uint32_t corr = 0, uint32_t graph = 0,
                 uint32_t stream = 7) {
  KernelRecord r;
  r.name = name;
  r.start_ns = static_cast<uint64_t>(start_us * 1000);
  r.end_ns = static_cast<uint64_t>(end_us * 1000);
  r.correlation = corr;
  r.graph_id = graph;
  r.stream = stream;
  r.grid[0] = 4;
  r.block[0] = 128;
  return r;
}

// Five graph replays, 40 us apart, of three kernels each on one stream:
//   a [0, 10]; b [8, 20] (PDL: launched 2 us before a ends, waits for it); c [23, 30].
// The window is replays 2..4: [40, 150], 110 us over 3 steps.
//   own time a step: a 10, b 10 (20 - 10; its first 2 us overlap a), c 7: 27 us busy;
//   gaps inside a step: b -> c, 3 us; between steps: c -> a, 10 us, twice in the window (20 / 3 a step);
//   overlap: durations 10 + 12 + 7 = 29, minus 27 busy = 2.
std::vector<KernelRecord> five_replays() {
  std::vector<KernelRecord> rs;
  for (int i = 0; i < 5; ++i) {
    const double t = 40.0 * i;
    const uint32_t corr = 100 + i;
    rs.push_back(rec("void frugal::(anonymous namespace)::a_kernel<1, 2>(frugal::ops::MatmulParams)", t, t + 10, corr, 3));
    rs.push_back(rec("void frugal::(anonymous namespace)::b_kernel(float const*, int)", t + 8, t + 20, corr, 3));
    rs.push_back(rec("c_kernel", t + 23, t + 30, corr, 3));
  }
  return rs;
}

TEST(KernelTrace, GraphReplaysAreStepsAndTheTimeAddsUp) {
  const auto rs = five_replays();
  auto a = analyze_kernel_trace(rs, {});
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  const auto& j = *a;
  EXPECT_EQ(j["mode"], "graph");
  EXPECT_EQ(j["graph_launches"].get<int>(), 5);
  EXPECT_DOUBLE_EQ(j["steps"].get<double>(), 3);
  EXPECT_NEAR(j["window_us"].get<double>(), 110, 1e-9);
  EXPECT_NEAR(j["step_us"].get<double>(), 110.0 / 3, 1e-9);
  EXPECT_NEAR(j["kernel_us"].get<double>(), 27, 1e-9);
  EXPECT_NEAR(j["gap_inside_us"].get<double>(), 3, 1e-9);
  EXPECT_NEAR(j["gap_between_us"].get<double>(), 20.0 / 3, 1e-9);
  EXPECT_NEAR(j["overlap_us"].get<double>(), 2, 1e-9);
  EXPECT_NEAR(j["launches"].get<double>(), 3, 1e-9);

  ASSERT_EQ(j["kernels"].size(), 3u);
  // a and b tie at 10 us (by name then), c has 7.
  EXPECT_EQ(j["kernels"][0]["name"], "a_kernel<1, 2>");
  EXPECT_EQ(j["kernels"][1]["name"], "b_kernel");
  EXPECT_EQ(j["kernels"][2]["name"], "c_kernel");
  EXPECT_NEAR(j["kernels"][0]["own_us"].get<double>(), 10, 1e-9);
  EXPECT_NEAR(j["kernels"][1]["own_us"].get<double>(), 10, 1e-9);
  EXPECT_NEAR(j["kernels"][1]["duration_us"].get<double>(), 12, 1e-9);
  EXPECT_NEAR(j["kernels"][1]["mean_us"].get<double>(), 12, 1e-9);
  EXPECT_NEAR(j["kernels"][2]["own_us"].get<double>(), 7, 1e-9);
  EXPECT_NEAR(j["kernels"][2]["share"].get<double>(), 21.0 / 110, 1e-9);
  EXPECT_EQ(j["kernels"][0]["grid"], "(4, 1, 1)");

  ASSERT_EQ(j["gaps"].size(), 2u);
  EXPECT_EQ(j["gaps"][0]["boundary"], "c_kernel -> a_kernel<1, 2> [between steps]");
  EXPECT_NEAR(j["gaps"][0]["us"].get<double>(), 20.0 / 3, 1e-9);
  EXPECT_NEAR(j["gaps"][0]["count"].get<double>(), 2.0 / 3, 1e-9);
  EXPECT_EQ(j["gaps"][1]["boundary"], "b_kernel -> c_kernel");
  EXPECT_NEAR(j["gaps"][1]["us"].get<double>(), 3, 1e-9);
  EXPECT_NEAR(j["gaps"][1]["count"].get<double>(), 1, 1e-9);
  // 3 us gaps fall in [3, 10); 10 us ones in >= 10.
  EXPECT_NEAR(j["gap_histogram"]["3_10us"].get<double>(), 1, 1e-9);
  EXPECT_NEAR(j["gap_histogram"]["ge_10us"].get<double>(), 2.0 / 3, 1e-9);
  EXPECT_NEAR(j["gap_histogram"]["lt_1us"].get<double>(), 0, 1e-9);

  const std::string table = format_kernel_trace("decode b=1", j, 10);
  EXPECT_NE(table.find("kernel trace, decode b=1: 3 graph replays (the first and last of 5 left out)"), std::string::npos)
      << table;
  EXPECT_NE(table.find("step 36.7 us = kernels 27.0 (73.6%) + gaps inside the step 3.0 (8.2%) + between steps 6.7 (18.2%)"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("outside the kernels"), std::string::npos) << "no timed step given: no such line";
  // With the timed (untraced) step of the same point, as `bench offline` adds it: 31.5 us
  // against 27 us of kernels leaves 4.5 us outside them.
  nlohmann::json jt = j;
  jt["timed_step_us"] = 31.5;
  jt["timed_outside_kernels_us"] = 4.5;
  const std::string timed = format_kernel_trace("decode b=1", jt, 10);
  EXPECT_NE(timed.find("timed step 31.5 us - kernels 27.0 = 4.5 us outside the kernels untraced"), std::string::npos)
      << timed;
}

// The records' order does not matter, and a kernel launched outside the graphs between two
// replays is part of the step time (it runs in the window): here d [72, 76].
TEST(KernelTrace, EagerKernelsBetweenReplaysCountAsKernelTime) {
  auto rs = five_replays();
  rs.push_back(rec("d_kernel", 72, 76));  // after replay 2, which is [40, 70]
  std::reverse(rs.begin(), rs.end());
  auto a = analyze_kernel_trace(rs, {});
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  EXPECT_NEAR((*a)["kernel_us"].get<double>(), 27 + 4.0 / 3, 1e-9);
  // The 10 us gap after replay 2 became 2 + 4: c -> d and d -> a.
  EXPECT_NEAR((*a)["gap_between_us"].get<double>(), (10 + 6.0) / 3, 1e-9);
  EXPECT_NEAR((*a)["step_us"].get<double>(), 110.0 / 3, 1e-9);
}

// Without graph launches the window is the whole trace and the steps are the engine's.
//   a [0, 5], b [5, 9], c [12, 20]: 20 us, busy 17, one 3 us gap (b -> c); 2 engine steps.
TEST(KernelTrace, EagerTraceUsesTheEngineSteps) {
  const std::vector<KernelRecord> rs = {rec("a", 0, 5), rec("b", 5, 9), rec("c", 12, 20)};
  KernelTraceOptions o;
  o.engine_steps = 2;
  auto a = analyze_kernel_trace(rs, o);
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  EXPECT_EQ((*a)["mode"], "eager");
  EXPECT_NEAR((*a)["step_us"].get<double>(), 10, 1e-9);
  EXPECT_NEAR((*a)["kernel_us"].get<double>(), 8.5, 1e-9);
  EXPECT_NEAR((*a)["gap_inside_us"].get<double>(), 1.5, 1e-9);
  EXPECT_NEAR((*a)["gap_between_us"].get<double>(), 0, 1e-9);
  EXPECT_EQ((*a)["gaps"][0]["boundary"], "b -> c");
}

// Two streams: each instant goes to the oldest running kernel, so the own times add up to the
// busy time. a [0, 10] and b [20, 30] on stream 1, c [5, 40] on stream 2:
//   [0, 10] a (older than c); [10, 40] c (older than b): a 10, b 0, c 30; busy 40, no gap;
//   overlap 10 + 10 + 35 - 40 = 15.
TEST(KernelTrace, ConcurrentStreamsShareTheBusyTimeOnce) {
  const std::vector<KernelRecord> rs = {rec("a", 0, 10, 0, 0, 1), rec("b", 20, 30, 0, 0, 1), rec("c", 5, 40, 0, 0, 2)};
  auto a = analyze_kernel_trace(rs, {});
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  EXPECT_NEAR((*a)["kernel_us"].get<double>(), 40, 1e-9);
  EXPECT_NEAR((*a)["gap_inside_us"].get<double>(), 0, 1e-9);
  EXPECT_NEAR((*a)["overlap_us"].get<double>(), 15, 1e-9);
  const auto& k = (*a)["kernels"];
  ASSERT_EQ(k.size(), 3u);
  EXPECT_EQ(k[0]["name"], "c");
  EXPECT_NEAR(k[0]["own_us"].get<double>(), 30, 1e-9);
  EXPECT_EQ(k[1]["name"], "a");
  EXPECT_NEAR(k[1]["own_us"].get<double>(), 10, 1e-9);
  EXPECT_EQ(k[2]["name"], "b");
  EXPECT_NEAR(k[2]["own_us"].get<double>(), 0, 1e-9);
  EXPECT_NEAR(k[2]["duration_us"].get<double>(), 10, 1e-9);
}

TEST(KernelTrace, KernelsOfOneNameAndGridAreOneRowAndTheRestIsSummed) {
  std::vector<KernelRecord> rs = {rec("g", 0, 4), rec("g", 4, 8), rec("h", 8, 9), rec("i", 9, 11)};
  rs[1].grid[0] = 8;  // a second row for g
  KernelTraceOptions o;
  o.top_kernels = 2;
  auto a = analyze_kernel_trace(rs, o);
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  ASSERT_EQ((*a)["kernels"].size(), 2u);
  EXPECT_EQ((*a)["kernels"][0]["grid"], "(4, 1, 1)");
  EXPECT_EQ((*a)["kernels"][1]["grid"], "(8, 1, 1)");
  EXPECT_NEAR((*a)["kernels_other_own_us"].get<double>(), 3, 1e-9);  // h 1 + i 2
}

TEST(KernelTrace, BadTracesAreRefused) {
  auto e = analyze_kernel_trace({}, {});
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("no kernels were recorded"), std::string::npos);
  const std::vector<KernelRecord> rs = {rec("backwards_kernel", 10, 5)};
  auto b = analyze_kernel_trace(rs, {});
  ASSERT_FALSE(b.is_ok());
  EXPECT_EQ(b.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("backwards_kernel"), std::string::npos);
}

TEST(KernelTrace, ShortNames) {
  EXPECT_EQ(short_kernel_name("void frugal::(anonymous namespace)::gemv_kernel<1, 1, 4, 0, 1, 0>(frugal::ops::MatmulParams)"),
            "gemv_kernel<1, 1, 4, 0, 1, 0>");
  EXPECT_EQ(short_kernel_name("frugal::(anonymous namespace)::sample_kernel(float const*, int)"), "sample_kernel");
  EXPECT_EQ(short_kernel_name("void frugal::cuda::(anonymous namespace)::quant_gemv_kernel<(frugal::cuda::qmma::QKind)0, 4>"
                              "(frugal::cuda::qmma::QGemvArgs)"),
            "quant_gemv_kernel<(qmma::QKind)0, 4>");
  EXPECT_EQ(short_kernel_name("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"),
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64");
  EXPECT_EQ(short_kernel_name("void cutlass::Kernel2<cutlass_80_tensorop_gemm>(cutlass_80_tensorop_gemm::Params)"),
            "cutlass::Kernel2<cutlass_80_tensorop_gemm>");
}

TEST(KernelTrace, ChromeTraceShowsTheFirstStepsOfTheWindow) {
  const auto rs = five_replays();
  const auto t = chrome_trace(rs, 2);
  int kernels = 0, steps = 0;
  double first = 1e30;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e["cat"] == "kernel") {
      ++kernels;
      first = std::min(first, e["ts"].get<double>());
      EXPECT_EQ(e["tid"].get<int>(), 7);
    }
    if (e["cat"] == "step") ++steps;
  }
  EXPECT_EQ(kernels, 6);  // replays 2 and 3
  EXPECT_EQ(steps, 2);
  EXPECT_DOUBLE_EQ(first, 0.0);
  // The b kernel of replay 2 starts 8 us after it and lasts 12.
  bool found = false;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "X" && e["name"] == "b_kernel" && e["ts"].get<double>() == 8.0) {
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 12.0);
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

// The picture: the bar's segments in the analysis' order with their own times, names escaped, and
// the timeline of the median replay (replay 3 of 2..4, all 30 us long) with the gap after it.
TEST(KernelTrace, SvgShowsTheStepBarAndOneStep) {
  const auto rs = five_replays();
  auto a = analyze_kernel_trace(rs, {});
  ASSERT_TRUE(a.is_ok());
  const std::string svg = kernel_trace_svg("decode_b1", rs, *a);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(svg.find("a_kernel<1"), std::string::npos);  // escaped
  EXPECT_NE(svg.find("<title>a_kernel&lt;1, 2&gt; (4, 1, 1): 10.0 us</title>"), std::string::npos) << svg;
  EXPECT_NE(svg.find("<title>gaps inside a step: 3.0 us</title>"), std::string::npos) << svg;
  EXPECT_NE(svg.find("one step (the median replay and the gap after it), 40.0 us"), std::string::npos) << svg;
  // The timeline: the three kernels of one replay (c of the next replay starts after its span).
  size_t n = 0;
  for (size_t p = 0; (p = svg.find("fill-opacity", p)) != std::string::npos; ++p) ++n;
  EXPECT_EQ(n, 3u);
}

}  // namespace
}  // namespace frugal::bench
