// `frugal bench serve` (the CLI) against `frugal serve` on the embedded model (stories260K, CPU):
// a bounded sweep and a short soak; the JSON must hold every figure, counts must match what was
// asked, percentiles must be ordered and cost must follow from throughput and price. Bad inputs
// exit non-zero with a message naming them.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server_process.h"
#include "test_paths.h"

namespace frugal::bench {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using frugal::server::testing::CommandResult;
using frugal::server::testing::run_command;
using frugal::server::testing::ServerProcess;
using frugal::testing::frugal_binary;
using frugal::testing::source_root;

class BenchServeE2e : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServerProcess({frugal_binary(), "serve", "--model", source_root() + "/models/stories260K",
                                 "--served-model-name", "stories260K", "--device", "cpu", "--threads", "1"},
                                std::chrono::seconds(120));
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(server_->ok()) << server_->error();
    dir_ = fs::temp_directory_path() / ("frugal_bench_serve_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }
  CommandResult bench(const std::string& args) { return bench_env("", args); }
  CommandResult bench_env(const std::string& env, const std::string& args) {
    // A stalled stream shows up as a timeout error in the report, well before the command limit.
    return run_command(env + " " + frugal_binary() + " bench serve --timeout 30 --url " + url() + " " + args,
                       std::chrono::seconds(120));
  }
  static json read_json(const fs::path& p) {
    std::ifstream f(p);
    return json::parse(f, nullptr, false);
  }
  static ServerProcess* server_;
  fs::path dir_;
};
ServerProcess* BenchServeE2e::server_ = nullptr;

void expect_summary(const json& s, const std::string& what) {
  for (const char* k : {"mean", "median", "p90", "p99"}) {
    ASSERT_TRUE(s[k]["value"].is_number()) << what << "." << k;
    ASSERT_EQ(s[k]["ci95"].size(), 2u) << what << "." << k;
    EXPECT_LE(s[k]["ci95"][0].get<double>(), s[k]["value"].get<double>() + 1e-9) << what << "." << k;
    EXPECT_GE(s[k]["ci95"][1].get<double>(), s[k]["value"].get<double>() - 1e-9) << what << "." << k;
  }
  EXPECT_LE(s["median"]["value"].get<double>(), s["p90"]["value"].get<double>()) << what;
  EXPECT_LE(s["p90"]["value"].get<double>(), s["p99"]["value"].get<double>()) << what;
  EXPECT_LE(s["min"].get<double>(), s["median"]["value"].get<double>()) << what;
  EXPECT_LE(s["p99"]["value"].get<double>(), s["max"].get<double>()) << what;
}

TEST_F(BenchServeE2e, SweepAgainstFrugalServe) {
  constexpr int kPrompts = 12, kOut = 16;
  constexpr double kPrice = 2.5;
  constexpr int kGpus = 2;
  const std::string d = dir_.string();
  // GPU telemetry through the NVML stand-in (tests/bench/fake_nvml.c): energy per 1M tokens.
  CommandResult r = bench_env("FRUGAL_NVML_LIBRARY=" + std::string(FRUGAL_FAKE_NVML), "--model stories260K --num-prompts " + std::to_string(kPrompts) + " --input-len 8 --output-len " +
                          std::to_string(kOut) + " --request-rate 50,inf --max-concurrency 1,4 --seed 3" +
                          " --price-per-hour 2.5 --gpus 2 --slo-ttft-ms 60000 --json " + d + "/out.json --csv " + d +
                          "/out.csv --markdown " + d + "/out.md --svg-dir " + d + "/svg");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("TTFT"), std::string::npos) << r.output;
  json j = read_json(dir_ / "out.json");
  ASSERT_FALSE(j.is_discarded());
  const json& c = j["config"];
  EXPECT_EQ(c["model"], "stories260K");
  EXPECT_EQ(c["endpoint"], "/v1/completions");
  EXPECT_EQ(c["server_header"], "frugal");
  EXPECT_NE(c["command_line"].get<std::string>().find("bench serve"), std::string::npos);
  EXPECT_TRUE(c["frugal_version"].is_string());
  EXPECT_TRUE(c.contains("devices"));
  ASSERT_EQ(j["runs"].size(), 4u);  // 2 rates x 2 concurrencies
  for (const json& run : j["runs"]) {
    SCOPED_TRACE(run["label"].get<std::string>());
    EXPECT_EQ(run["requests"]["sent"], kPrompts);
    EXPECT_EQ(run["requests"]["completed"], kPrompts);
    EXPECT_EQ(run["requests"]["failed"], 0);
    EXPECT_EQ(run["per_request"].size(), static_cast<size_t>(kPrompts));
    // ignore_eos + max_tokens: exactly kOut tokens each, counted by the server's usage.
    EXPECT_EQ(run["token_count_source"], "usage");
    EXPECT_EQ(run["output_tokens"], kPrompts * kOut);
    EXPECT_EQ(run["input_tokens"], kPrompts * 8);  // token-id prompts of --input-len 8
    for (const char* m : {"ttft", "tpot", "itl", "e2e"}) expect_summary(run["latency_ms"][m], m);
    EXPECT_EQ(run["latency_ms"]["e2e"]["n"], kPrompts);
    const double wall = run["duration_s"].get<double>();
    const double out_tps = run["throughput"]["output_tokens_per_s"].get<double>();
    const double total_tps = run["throughput"]["total_tokens_per_s"].get<double>();
    EXPECT_NEAR(out_tps, kPrompts * kOut / wall, 1e-6 * out_tps);
    EXPECT_NEAR(run["throughput"]["requests_per_s"].get<double>(), kPrompts / wall, 1e-9 * kPrompts / wall + 1e-12);
    // Cost: $2.5 per GPU-hour x 2 GPUs, over the reported throughput.
    const json& cost = run["cost"];
    EXPECT_NEAR(cost["usd_per_hour"].get<double>(), kPrice * kGpus, 1e-12);
    const double usd_per_s = kPrice * kGpus / 3600.0;
    EXPECT_NEAR(cost["usd_per_1m_output_tokens"].get<double>(), usd_per_s * 1e6 / out_tps, 1e-9 * usd_per_s * 1e6 / out_tps);
    EXPECT_NEAR(cost["usd_per_1m_total_tokens"].get<double>(), usd_per_s * 1e6 / total_tps, 1e-9 * usd_per_s * 1e6 / total_tps);
    EXPECT_NEAR(cost["output_tokens_per_s_per_usd_per_hour"].get<double>(), out_tps / (kPrice * kGpus), 1e-9 * out_tps);
    // Energy: what the telemetry measured over the output tokens counted.
    const json& tel = run["telemetry"];
    ASSERT_TRUE(tel["available"].get<bool>()) << tel.dump();
    EXPECT_EQ(tel["devices"].size(), 2u);
    const double energy = tel["energy_j"].get<double>();
    EXPECT_GT(energy, 0);
    EXPECT_NEAR(cost["joules_per_1m_output_tokens"].get<double>(), energy / (kPrompts * kOut) * 1e6, 1e-9 * energy * 1e6);
    EXPECT_NEAR(cost["kwh_per_1m_output_tokens"].get<double>(), energy / (kPrompts * kOut) * 1e6 / 3.6e6, 1e-9 * energy);
    EXPECT_TRUE(run["goodput"]["requests_meeting_slo"].is_number());
    EXPECT_EQ(run["goodput"]["slo_ms"]["ttft"], 60000.0);
    EXPECT_EQ(run["goodput"]["requests_meeting_slo"], kPrompts);  // a minute is met by every request
    EXPECT_TRUE(run["errors"]["by_kind"].is_object());
    if (run["max_concurrency"] == 1) {
      EXPECT_EQ(run["peak_concurrency"], 1);
    }
  }
  // The other outputs exist and carry the runs.
  std::ifstream csv(dir_ / "out.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_NE(header.find("cost.usd_per_1m_output_tokens"), std::string::npos);
  int rows = 0;
  for (std::string line; std::getline(csv, line);) ++rows;
  EXPECT_EQ(rows, 4);
  std::ifstream md(dir_ / "out.md");
  std::string mdtext((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
  EXPECT_NE(mdtext.find("rate=inf concurrency=4"), std::string::npos);
  for (const char* svg : {"ttft_cdf.svg", "tpot_cdf.svg", "itl_cdf.svg", "e2e_cdf.svg", "throughput_vs_concurrency.svg"}) {
    std::ifstream f(dir_ / "svg" / svg);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text.rfind("<svg", 0), 0u) << svg;
    EXPECT_NE(text.find("</svg>"), std::string::npos) << svg;
  }
}

TEST_F(BenchServeE2e, SoakReportsWindowsAndDrift) {
  CommandResult r = bench("--model stories260K --input-len 8 --output-len 8 --request-rate 20 --duration 2 --window 0.5 "
                          "--json " + (dir_ / "soak.json").string() + " --svg-dir " + (dir_ / "svg").string());
  ASSERT_EQ(r.status, 0) << r.output;
  json j = read_json(dir_ / "soak.json");
  const json& run = j["runs"][0];
  ASSERT_TRUE(run.contains("soak"));
  const json& s = run["soak"];
  EXPECT_EQ(s["windows"].size(), 4u);
  int64_t in_windows = 0;
  for (const json& w : s["windows"]) in_windows += w["completed"].get<int64_t>() + w["errors"].get<int64_t>();
  EXPECT_EQ(in_windows + s["drained_after_duration"].get<int64_t>(), run["requests"]["sent"].get<int64_t>());
  EXPECT_GT(run["requests"]["sent"].get<int64_t>(), 10);  // ~40 expected at 20 req/s for 2 s
  EXPECT_TRUE(s["drift_last_vs_first"].contains("output_tokens_per_s"));
  EXPECT_TRUE(s["slope_per_minute"]["e2e_ms_median"].is_number());
  EXPECT_TRUE(fs::exists(dir_ / "svg" / "soak_throughput.svg"));
}

TEST_F(BenchServeE2e, ChatWithTokenizerAndJsonl) {
  CommandResult r = bench("--endpoint /v1/chat/completions --dataset " + frugal::testing::shared_data_dir() +
                          "/eval/gsm8k/test-first8.jsonl --num-prompts 4 --output-len 8 --tokenizer " + source_root() +
                          "/models/stories260K --json " + (dir_ / "g.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  json j = read_json(dir_ / "g.json");
  EXPECT_EQ(j["runs"][0]["requests"]["completed"], 4);
  EXPECT_EQ(j["runs"][0]["output_tokens"], 4 * 8);
}

TEST_F(BenchServeE2e, WithoutNvmlTelemetrySaysWhy) {
  CommandResult r = bench_env("FRUGAL_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1",
                              "--num-prompts 2 --output-len 4 --price-per-hour 1 --api-key sk-secret-42 --json " +
                                  (dir_ / "n.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  json j = read_json(dir_ / "n.json");
  // The command line is recorded, the key is not.
  const std::string cmd = j["config"]["command_line"].get<std::string>();
  EXPECT_NE(cmd.find("--api-key ***"), std::string::npos) << cmd;
  EXPECT_EQ(cmd.find("sk-secret-42"), std::string::npos) << cmd;
  const json& run = j["runs"][0];
  EXPECT_FALSE(run["telemetry"]["available"].get<bool>());
  EXPECT_FALSE(run["telemetry"]["reason"].get<std::string>().empty());
  EXPECT_TRUE(run["cost"]["kwh_per_1m_output_tokens"].is_null());
  EXPECT_TRUE(run["cost"]["usd_per_1m_output_tokens"].is_number());
}

TEST_F(BenchServeE2e, OfflineBenchRecordsTelemetry) {
  const std::string out = (dir_ / "offline.json").string();
  CommandResult r = run_command("FRUGAL_NVML_LIBRARY=" + std::string(FRUGAL_FAKE_NVML) + " " + frugal_binary() +
                                    " bench offline --device cpu --threads 1 --prefill-lens 8 --batches 1 --decode-prompt-len 4"
                                    " --decode-tokens 4 --reps 1 --warmup 0 --json " + out,
                                std::chrono::seconds(120));
  ASSERT_EQ(r.status, 0) << r.output;
  json j = read_json(out);
  ASSERT_TRUE(j.contains("telemetry"));
  EXPECT_TRUE(j["telemetry"]["available"].get<bool>());
  EXPECT_EQ(j["telemetry"]["devices"][0]["name"], "Fake GPU 0");
}

// --kernel-trace traces GPU kernels: on the CPU it is refused before any work, naming the flag.
TEST_F(BenchServeE2e, OfflineKernelTraceNeedsTheGpu) {
  CommandResult r = run_command(frugal_binary() + " bench offline --device cpu --prefill-lens 8 --batches 0 --reps 1"
                                    " --kernel-trace " + (dir_ / "kt").string(),
                                std::chrono::seconds(60));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--kernel-trace traces GPU kernels: it needs --device cuda"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "kt"));
  r = run_command(frugal_binary() + " bench offline --device cpu --prefill-lens 8 --batches 0 --reps 1"
                      " --tensor-parallel-size 2 --kernel-trace " + (dir_ / "kt").string(),
                  std::chrono::seconds(60));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--kernel-trace traces one process's GPU"), std::string::npos) << r.output;
}

TEST_F(BenchServeE2e, BadInputsExitNonZeroNamingTheProblem) {
  struct Case {
    std::string args, needle;
  };
  fs::path broken = dir_ / "broken.jsonl";
  std::ofstream(broken) << "{\"prompt\": \"a\"}\nnot json\n";
  const std::vector<Case> cases = {
      {"--request-rate -2", "--request-rate"},
      {"--gpu no-such-gpu", "no-such-gpu"},
      {"--dataset " + broken.string(), broken.string() + ":2"},
      {"--max-concurrency 4,x", "--max-concurrency"},
  };
  for (const auto& c : cases) {
    CommandResult r = bench(c.args);
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_NE(r.output.find(c.needle), std::string::npos) << c.args << "\n" << r.output;
  }
  CommandResult r = run_command(frugal_binary() + " bench serve --url http://127.0.0.1:1 --num-prompts 1",
                                std::chrono::seconds(60));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("http://127.0.0.1:1"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace frugal::bench
