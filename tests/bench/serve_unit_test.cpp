// Pieces of `frugal bench serve` that need no server: SSE parsing, URLs, arrivals, datasets,
// cost and soak arithmetic, telemetry summaries (expected values computed by hand here).
#include <cmath>
#include <cstdlib>
#include <thread>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "bench/serve_bench.h"
#include "bench/serve_http.h"
#include "bench/serve_report.h"
#include "bench/serve_request.h"
#include "bench/serve_runner.h"
#include "bench/serve_svg.h"
#include "bench/telemetry.h"
#include "test_paths.h"

namespace frugal::bench {
namespace {

using json = nlohmann::json;

std::vector<std::string> parse_all(const std::vector<std::string>& pieces, int64_t* comments = nullptr) {
  SseParser p;
  std::vector<std::string> events;
  for (const auto& s : pieces) p.feed(s, [&](const std::string& d) { events.push_back(d); });
  p.finish();
  if (comments) *comments = p.comments();
  return events;
}

TEST(BenchServeSse, EventsCommentsAndBlankLines) {
  int64_t comments = 0;
  auto ev = parse_all({": ping\n\ndata: {\"a\":1}\n\n\n\n: keep-alive\ndata: [DONE]\n\n"}, &comments);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0], "{\"a\":1}");
  EXPECT_EQ(ev[1], "[DONE]");
  EXPECT_EQ(comments, 2);
}

TEST(BenchServeSse, SplitAnywhereGivesTheSameEvents) {
  const std::string stream = "data: {\"x\": \"one\"}\r\n\r\ndata:two\r\ndata: lines\r\n\r\nevent: y\ndata: three\n\n";
  const std::vector<std::string> expected = {"{\"x\": \"one\"}", "two\nlines", "three"};
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    EXPECT_EQ(parse_all({stream.substr(0, cut), stream.substr(cut)}), expected) << "cut at " << cut;
  }
  std::vector<std::string> bytes;
  for (char c : stream) bytes.emplace_back(1, c);
  EXPECT_EQ(parse_all(bytes), expected);
}

TEST(BenchServeSse, LoneCarriageReturnsEndLines) {
  EXPECT_EQ(parse_all({"data: a\r\rdata: b\r", "\r"}), (std::vector<std::string>{"a", "b"}));
}

TEST(BenchServeSse, EventCutByTheEndOfTheStreamIsDiscarded) {
  EXPECT_EQ(parse_all({"data: a\n\ndata: [DO"}), (std::vector<std::string>{"a"}));
  EXPECT_EQ(parse_all({"data: a\n\ndata: b\n"}), (std::vector<std::string>{"a"}));
}

TEST(BenchServeUrl, ParsesAndJoins) {
  auto u = parse_url("http://localhost:8000/v1/");
  ASSERT_TRUE(u.is_ok());
  EXPECT_EQ(u->host, "localhost");
  EXPECT_EQ(u->port, "8000");
  EXPECT_EQ(u->path, "/v1");
  EXPECT_EQ(join_target(u->path, "/v1/completions"), "/v1/completions");
  EXPECT_EQ(join_target("", "/v1/chat/completions"), "/v1/chat/completions");
  EXPECT_EQ(join_target("/proxy", "/v1/models"), "/proxy/v1/models");
  auto v6 = parse_url("http://[::1]:9000");
  ASSERT_TRUE(v6.is_ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(parse_url("http://h")->port, "80");
  for (const char* bad : {"localhost:8000", "https://x", "http://", "http://h:0", "http://h:99999", "http://h:abc"}) {
    auto r = parse_url(bad);
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.status().message().find("--url"), std::string::npos);
  }
}

TEST(BenchServeArgs, RatesAndConcurrency) {
  auto r = parse_rates("2, 0.5,inf");
  ASSERT_TRUE(r.is_ok());
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0], 2.0);
  EXPECT_EQ((*r)[1], 0.5);
  EXPECT_TRUE(std::isinf((*r)[2]));
  for (const char* bad : {"-1", "0", "abc", "2,", "1e999"}) {
    auto b = parse_rates(bad);
    ASSERT_FALSE(b.is_ok()) << bad;
    EXPECT_NE(b.status().message().find("--request-rate"), std::string::npos);
  }
  auto c = parse_concurrency("1,8,32,64");
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(*c, (std::vector<int32_t>{1, 8, 32, 64}));
  EXPECT_FALSE(parse_concurrency("-4").is_ok());
  EXPECT_FALSE(parse_concurrency("2.5").is_ok());
}

TEST(BenchServeArrivals, PoissonGapsHaveTheRateAndAreSeeded) {
  auto g = poisson_gaps(4.0, 20000, 7);
  double sum = 0, sq = 0;
  for (double x : g) {
    sum += x;
    sq += x * x;
  }
  double m = sum / static_cast<double>(g.size());
  double var = sq / static_cast<double>(g.size()) - m * m;
  EXPECT_NEAR(m, 0.25, 0.25 * 0.03);      // exponential: mean 1/rate
  EXPECT_NEAR(var, 0.0625, 0.0625 * 0.08);  // and variance 1/rate^2
  EXPECT_EQ(poisson_gaps(4.0, 5, 7), poisson_gaps(4.0, 5, 7));
  EXPECT_NE(poisson_gaps(4.0, 5, 7), poisson_gaps(4.0, 5, 8));
}

TEST(BenchServeDataset, RandomWithoutTokenizerSendsTokenIds) {
  RandomDatasetOptions o{.num_prompts = 5, .input_len = 10, .output_len = 7, .fallback_vocab = 50, .seed = 3};
  auto ps = random_dataset(o, nullptr, Endpoint::kCompletions);
  ASSERT_TRUE(ps.is_ok());
  ASSERT_EQ(ps->size(), 5u);
  for (const auto& p : *ps) {
    ASSERT_EQ(p.token_ids.size(), 10u);
    EXPECT_EQ(p.prompt_tokens, 10);
    EXPECT_EQ(p.output_len, 7);
    for (int32_t t : p.token_ids) EXPECT_TRUE(t >= 3 && t < 50);
  }
  json b = request_body((*ps)[0], {.model = "m"});
  EXPECT_TRUE(b["prompt"].is_array());
  EXPECT_EQ(b["max_tokens"], 7);
  EXPECT_EQ(b["stream"], true);
  EXPECT_EQ(b["ignore_eos"], true);
  EXPECT_EQ(b["stream_options"]["include_usage"], true);
  EXPECT_FALSE(random_dataset(o, nullptr, Endpoint::kChat).is_ok());
}

TEST(BenchServeDataset, RandomWithTokenizerIsTextOfTheRightLength) {
  auto tok = Tokenizer::load(frugal::testing::source_root() + "/models/stories260K");
  ASSERT_TRUE(tok.is_ok());
  RandomDatasetOptions o{.num_prompts = 20, .input_len = 32, .output_len = 8, .seed = 1};
  auto ps = random_dataset(o, tok->get(), Endpoint::kChat);
  ASSERT_TRUE(ps.is_ok());
  double total = 0;
  for (const auto& p : *ps) {
    EXPECT_FALSE(p.text.empty());
    EXPECT_EQ(p.messages[0]["content"], p.text);
    EXPECT_EQ(p.prompt_tokens, static_cast<int64_t>((*tok)->encode(p.text).size()));
    total += static_cast<double>(p.prompt_tokens);
  }
  // Re-encoding the decoded text may merge or split a token or two at the edges.
  EXPECT_NEAR(total / 20, 32, 2);
}

class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    path_ = std::filesystem::temp_directory_path() / ("frugal_bench_" + std::to_string(::getpid()) + "_" +
                                                      std::to_string(counter_++) + ".jsonl");
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

TEST(BenchServeDataset, JsonlPromptsAndChats) {
  auto gsm = jsonl_dataset(frugal::testing::shared_data_dir() + "/eval/gsm8k/test-first8.jsonl", "", 64, 5, nullptr,
                           Endpoint::kCompletions);
  ASSERT_TRUE(gsm.is_ok()) << gsm.status().to_string();
  ASSERT_EQ(gsm->size(), 5u);
  EXPECT_EQ((*gsm)[0].text.rfind("Janet", 0), 0u);
  EXPECT_EQ((*gsm)[0].output_len, 64);
  TempFile chats("{\"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, {\"role\": \"user\", \"content\": \"hi\"}]}\n\n"
                 "{\"prompt\": \"plain\"}\n");
  auto c = jsonl_dataset(chats.path(), "", 16, 0, nullptr, Endpoint::kChat);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  ASSERT_EQ(c->size(), 2u);
  EXPECT_EQ((*c)[0].messages.size(), 2u);
  EXPECT_EQ(request_body((*c)[0], {.endpoint = Endpoint::kChat})["messages"][1]["content"], "hi");
  EXPECT_EQ(request_body((*c)[1], {.endpoint = Endpoint::kChat})["messages"][0]["content"], "plain");
  EXPECT_FALSE(jsonl_dataset(chats.path(), "", 16, 0, nullptr, Endpoint::kCompletions).is_ok());
}

TEST(BenchServeDataset, JsonlErrorsNameFileAndLine) {
  TempFile bad("{\"prompt\": \"ok\"}\n{\"prompt\": \"broken\"\n");
  auto r = jsonl_dataset(bad.path(), "", 16, 0, nullptr, Endpoint::kCompletions);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find(bad.path() + ":2"), std::string::npos) << r.status().message();
  TempFile nofield("{\"foo\": \"bar\"}\n");
  auto n = jsonl_dataset(nofield.path(), "", 16, 0, nullptr, Endpoint::kCompletions);
  ASSERT_FALSE(n.is_ok());
  EXPECT_NE(n.status().message().find("--prompt-field"), std::string::npos);
  EXPECT_FALSE(jsonl_dataset("/nonexistent/x.jsonl", "", 16, 0, nullptr, Endpoint::kCompletions).is_ok());
}

TEST(BenchServeCost, PerMillionTokensFromThroughputAndPrice) {
  CostSpec c{.usd_per_hour = 7.2, .gpus = 2};
  json telemetry = {{"available", true}, {"energy_j", 3600.0}};
  json j = cost_json(c, /*out tok/s*/ 500, /*total tok/s*/ 1500, /*out*/ 12000, /*total*/ 36000, telemetry);
  // $7.2/h = $0.002/s; 500 tok/s -> 1e6 tokens take 2000 s -> $4.
  EXPECT_NEAR(j["usd_per_1m_output_tokens"].get<double>(), 4.0, 1e-9);
  EXPECT_NEAR(j["usd_per_1m_total_tokens"].get<double>(), 4.0 / 3, 1e-9);
  EXPECT_NEAR(j["output_tokens_per_s_per_usd_per_hour"].get<double>(), 500 / 7.2, 1e-9);
  // 3600 J for 12000 tokens: 3e5 J per 1M = 1/12 kWh.
  EXPECT_NEAR(j["joules_per_1m_output_tokens"].get<double>(), 3e5, 1e-6);
  EXPECT_NEAR(j["kwh_per_1m_output_tokens"].get<double>(), 1.0 / 12, 1e-12);
  EXPECT_NEAR(j["joules_per_1m_total_tokens"].get<double>(), 1e5, 1e-6);
  EXPECT_TRUE(cost_json({}, 500, 1500, 1, 1, telemetry).is_null());
  json no_tel = cost_json(c, 500, 1500, 12000, 36000, {{"available", false}});
  EXPECT_TRUE(no_tel["kwh_per_1m_output_tokens"].is_null());
}

TEST(BenchServeSoak, SlopeOfALine) {
  EXPECT_NEAR(slope({0, 1, 2, 3}, {5, 7, 9, 11}), 2.0, 1e-12);
  EXPECT_NEAR(slope({0, 1, 2}, {1, 0, 2}), 0.5, 1e-12);  // by hand: sxy = 1, sxx = 2
  EXPECT_EQ(slope({1}, {1}), 0);
}

TEST(BenchServeSoak, WindowsDriftAndSlope) {
  // 10 s at one request per second finishing at t = k + 0.5; tokens grow 10, 20, ... per request.
  LoadResult load;
  for (int k = 0; k < 10; ++k) {
    RequestRecord r{.index = k, .start_s = k + 0.1, .end_s = k + 0.5, .ok = true, .ttft_ms = 10.0 + k, .e2e_ms = 100,
                    .tpot_ms = 5, .output_tokens = 10 * (k + 1), .n_choices = 1};
    load.records.push_back(r);
  }
  load.records.push_back({.index = 10, .start_s = 9.9, .end_s = 10.4, .ok = true, .output_tokens = 5, .n_choices = 1});
  load.wall_s = 10.4;
  LoadOptions o{.request_rate = 1, .duration_s = 10};
  json j = run_report(load, o, {.window_s = 2}, json{{"available", false}});
  const json& s = j["soak"];
  ASSERT_EQ(s["windows"].size(), 5u);
  // Window 0 holds requests 0 and 1: 30 tokens in 2 s.
  EXPECT_NEAR(s["windows"][0]["output_tokens_per_s"].get<double>(), 15, 1e-9);
  EXPECT_NEAR(s["windows"][4]["output_tokens_per_s"].get<double>(), 95, 1e-9);
  EXPECT_NEAR(s["drift_last_vs_first"]["output_tokens_per_s"].get<double>(), (95.0 - 15) / 15, 1e-9);
  // 20 tok/s more every window of 2 s: 600 tok/s per minute.
  EXPECT_NEAR(s["slope_per_minute"]["output_tokens_per_s"].get<double>(), 600, 1e-6);
  EXPECT_EQ(s["drained_after_duration"], 1);
  EXPECT_NEAR(s["windows"][0]["ttft_ms_median"].get<double>(), 10.5, 1e-9);
}

TEST(BenchServeReport, FiguresFromRecords) {
  LoadResult load;
  load.wall_s = 4;
  for (int k = 0; k < 4; ++k) {
    load.records.push_back({.index = k, .ok = true, .ttft_ms = 100.0 * (k + 1), .e2e_ms = 1000, .tpot_ms = 10,
                            .itl_ms = {10, 10}, .prompt_tokens = 20, .output_tokens = 50, .token_count_source = "usage",
                            .n_choices = 1});
  }
  load.records.push_back({.index = 4, .ok = false, .error_kind = "http_503", .error_message = "busy"});
  LoadOptions o{.request_rate = 0, .max_concurrency = 4, .num_prompts = 5};
  json j = run_report(load, o, {.slo = {.ttft_ms = 250}}, json{{"available", false}});
  EXPECT_EQ(j["requests"]["sent"], 5);
  EXPECT_EQ(j["requests"]["completed"], 4);
  EXPECT_EQ(j["errors"]["by_kind"]["http_503"], 1);
  EXPECT_EQ(j["errors"]["list"][0]["message"], "busy");
  EXPECT_NEAR(j["throughput"]["requests_per_s"].get<double>(), 1.0, 1e-12);
  EXPECT_NEAR(j["throughput"]["output_tokens_per_s"].get<double>(), 50.0, 1e-12);
  EXPECT_NEAR(j["throughput"]["total_tokens_per_s"].get<double>(), 70.0, 1e-12);
  // TTFT 100, 200, 300, 400: NumPy-linear median 250, P90 370.
  EXPECT_NEAR(j["latency_ms"]["ttft"]["median"]["value"].get<double>(), 250, 1e-9);
  EXPECT_NEAR(j["latency_ms"]["ttft"]["p90"]["value"].get<double>(), 370, 1e-9);
  EXPECT_EQ(j["latency_ms"]["itl"]["n"], 8);
  EXPECT_EQ(j["goodput"]["requests_meeting_slo"], 2);
  EXPECT_NEAR(j["goodput"]["fraction"].get<double>(), 2.0 / 5, 1e-12);
  EXPECT_EQ(j["request_rate"], "inf");
  EXPECT_EQ(j["cdf_ms"]["ttft"].size(), 101u);
  json rep = {{"config", {{"url", "http://x"}}}, {"runs", {j}}};
  std::string csv = format_serve_csv(rep);
  EXPECT_NE(csv.find("throughput.output_tokens_per_s"), std::string::npos);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 2);
  EXPECT_NE(format_serve_markdown(rep).find("| rate=inf concurrency=4 |"), std::string::npos);
  EXPECT_NE(format_serve_table(rep).find("http_503 x1"), std::string::npos);
}

class ScriptedSource : public TelemetrySource {
 public:
  int device_count() const override { return 1; }
  std::string device_name(int) const override { return "Scripted GPU"; }
  GpuSample sample(int) override { return {.temperature_c = 50, .power_w = 100, .sm_clock_mhz = 1500}; }
};

TEST(BenchTelemetry, EnergyIsThePowerIntegral) {
  std::vector<GpuSample> ss = {{.t_s = 0, .power_w = 100}, {.t_s = 1, .power_w = 200}, {.t_s = 3, .power_w = 200}};
  json d = summarize_device("x", ss);
  EXPECT_NEAR(d["energy_j"].get<double>(), 150 + 400, 1e-9);  // trapezoids: 1 s at mean 150 W, 2 s at 200 W
  EXPECT_EQ(d["energy_source"], "power integral");
  EXPECT_NEAR(d["power_w"]["mean"].get<double>(), 500.0 / 3, 1e-9);
  EXPECT_TRUE(d["temperature_c"].is_null());
  ss[0].energy_counter_j = 1000;
  ss[2].energy_counter_j = 1700;
  EXPECT_NEAR(summarize_device("x", ss)["energy_j"].get<double>(), 700, 1e-9);
}

TEST(BenchTelemetry, SamplerWithAScriptedSourceAndWithout) {
  TelemetrySampler s(std::make_unique<ScriptedSource>(), "", std::chrono::milliseconds(10));
  s.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  s.stop();
  json j = s.summary();
  EXPECT_TRUE(j["available"].get<bool>());
  EXPECT_GE(j["n_samples"].get<int>(), 5);
  EXPECT_EQ(j["devices"][0]["name"], "Scripted GPU");
  // Constant 100 W over the span from the first sample to the last.
  const double span = j["devices"][0]["span_s"].get<double>();
  EXPECT_GT(span, 0.05);
  EXPECT_LE(span, j["duration_s"].get<double>());
  EXPECT_NEAR(j["energy_j"].get<double>(), 100 * span, 1e-9);
  TelemetrySampler none(nullptr, "no NVML here", std::chrono::milliseconds(10));
  none.start();
  none.stop();
  EXPECT_EQ(none.summary(), (json{{"available", false}, {"reason", "no NVML here"}}));
}

TEST(BenchTelemetry, NvmlThroughDlopenOfAStandIn) {
  ::setenv("FRUGAL_NVML_LIBRARY", FRUGAL_FAKE_NVML, 1);
  auto s = TelemetrySampler::with_nvml(std::chrono::milliseconds(20));
  ::unsetenv("FRUGAL_NVML_LIBRARY");
  ASSERT_TRUE(s->available()) << s->summary().dump();
  EXPECT_EQ(s->device_names(), (std::vector<std::string>{"Fake GPU 0", "Fake GPU 1"}));
  s->start();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  s->stop();
  json j = s->summary();
  ASSERT_EQ(j["devices"].size(), 2u);
  double energy = 0;
  for (int i = 0; i < 2; ++i) {
    const json& d = j["devices"][i];
    EXPECT_EQ(d["temperature_c"]["max"], 60 + i);
    EXPECT_EQ(d["power_w"]["mean"], 250.0 + 50 * i);  // the stand-in reports mW
    EXPECT_EQ(d["sm_clock_mhz"]["min"], 1980);
    EXPECT_EQ(d["mem_clock_mhz"]["max"], 2619);
    EXPECT_EQ(d["memory_used_gib"]["mean"], 10.0);
    EXPECT_EQ(d["gpu_util_pct"]["mean"], 97);
    // The counter advances 1 J per read: n samples span n - 1 J.
    EXPECT_EQ(d["energy_source"], "energy counter");
    EXPECT_EQ(d["energy_j"], d["n_samples"].get<double>() - 1);
    energy += d["energy_j"].get<double>();
    EXPECT_GE(d["n_samples"].get<int>(), 3);
  }
  EXPECT_EQ(j["energy_j"], energy);
  EXPECT_EQ(j["power_w_mean"], 550.0);
}

TEST(BenchTelemetry, MissingNvmlIsReportedNotFatal) {
  ::setenv("FRUGAL_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  auto s = TelemetrySampler::with_nvml(std::chrono::milliseconds(20));
  ::unsetenv("FRUGAL_NVML_LIBRARY");
  s->start();
  s->stop();
  json j = s->summary();
  EXPECT_FALSE(j["available"].get<bool>());
  EXPECT_NE(j["reason"].get<std::string>().find("/nonexistent/libnvidia-ml.so.1"), std::string::npos);
}

TEST(BenchTelemetry, NvmlAbsentOrPresentNeverFails) {
  auto s = TelemetrySampler::with_nvml(std::chrono::milliseconds(50));
  s->start();
  s->stop();
  json j = s->summary();
  ASSERT_TRUE(j.contains("available"));
  if (!j["available"].get<bool>()) {
    EXPECT_FALSE(j["reason"].get<std::string>().empty());
  }
}

TEST(BenchServeSvg, ChartHasOnePathPerSeries) {
  std::string svg = svg_line_chart({.title = "t <1>", .x_label = "x", .y_label = "y", .log_x = true},
                                   {{.name = "a", .points = {{1, 10}, {8, 40}, {64, 60}}}, {.name = "b", .points = {{1, 5}}}});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("t &lt;1&gt;"), std::string::npos);
  size_t paths = 0;
  for (size_t p = svg.find("<path"); p != std::string::npos; p = svg.find("<path", p + 1)) ++paths;
  EXPECT_EQ(paths, 2u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

}  // namespace
}  // namespace frugal::bench
