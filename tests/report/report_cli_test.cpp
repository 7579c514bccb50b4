// Runs the real `frugal report` binary: a quick bf16 + int8 report on the default model quantizes
// the int8 row (frugal quantize RTN, into OUT/checkpoints), prints where report.html is and exits
// 0; a second run reuses the checkpoint; bad flags exit 2 naming the flag.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "test_paths.h"

namespace {

struct CliRun {
  int code = -1;
  std::string out;
};

CliRun run_report(const std::string& args) {
  const std::string cmd = frugal::testing::frugal_binary() + " report " + args + " 2>&1";
  CliRun r;
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(f);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return nlohmann::json::parse(ss.str());
}

TEST(ReportCliTest, QuickReportPrintsWhereThePageIs) {
  const std::string dir = frugal::testing::binary_dir() + "/tests/report/artifacts/cli";
  std::filesystem::remove_all(dir);
  CliRun r = run_report("--quick --threads 2 --precisions bf16,int8 --price-per-hour 0.2 --out " + dir);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("report: " + dir + "/report.html"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("int8: ok"), std::string::npos) << r.out;
  auto j = read_json(dir + "/report.json");
  EXPECT_EQ(j["rows"][0]["status"], "ok");
  ASSERT_EQ(j["rows"][1]["status"], "ok") << j["rows"][1].dump();
  EXPECT_EQ(j["rows"][1]["quantization"]["method"], "int8 RTN per channel (compressed-tensors int8 (W8A16))");
  EXPECT_FALSE(j["rows"][1]["quantization"]["reused"].get<bool>());
  const std::string ck = j["rows"][1]["quantization"]["checkpoint"].get<std::string>();
  EXPECT_EQ(ck.rfind(dir + "/checkpoints/int8-", 0), 0u) << ck;
  EXPECT_EQ(j["price_per_gpu_hour"], 0.2);
  EXPECT_EQ(j["ownership"]["available"], false);  // no --gpu and no --purchase-usd
  // Again into the same directory: the int8 checkpoint is reused, not made again.
  r = run_report("--quick --threads 2 --precisions int8 --out " + dir);
  ASSERT_EQ(r.code, 0) << r.out;
  j = read_json(dir + "/report.json");
  ASSERT_EQ(j["rows"][0]["status"], "ok") << j["rows"][0].dump();
  EXPECT_TRUE(j["rows"][0]["quantization"]["reused"].get<bool>());
  EXPECT_EQ(j["rows"][0]["quantization"]["checkpoint"], ck);
}

// Reuse: a row runs on the checkpoint given for it; one the engine cannot load fails with the
// engine's reason while the other rows stand. (The fixture is a quantized checkpoint of a
// different tiny model: only the plumbing is checked here.)
TEST(ReportCliTest, ReusedCheckpointRowRunsOrFailsWithTheEnginesReason) {
  const std::string dir = frugal::testing::binary_dir() + "/tests/report/artifacts/reuse";
  std::filesystem::remove_all(dir);
  const std::string fixture = frugal::testing::source_root() + "/tests/data/quant/int8_channel";
  const CliRun r = run_report("--quick --threads 2 --precisions bf16,int8 --checkpoint int8=" + fixture + " --out " + dir);
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream f(dir + "/report.json");
  std::stringstream ss;
  ss << f.rdbuf();
  const auto j = nlohmann::json::parse(ss.str());
  EXPECT_EQ(j["rows"][0]["status"], "ok");
  const auto& row = j["rows"][1];
  if (row["status"] == "failed") {
    // Until the engine loads quantized checkpoints: the loader names the file and tensor.
    EXPECT_NE(row["why"].get<std::string>().find("int8_channel"), std::string::npos) << row.dump();
  } else {
    EXPECT_EQ(row["status"], "ok") << row.dump();
    EXPECT_NE(row["weights_source"].get<std::string>().find("int8_channel"), std::string::npos);
  }
  const CliRun bad = run_report("--quick --checkpoint int8 --out " + dir);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("PRECISION=DIR"), std::string::npos) << bad.out;
}

TEST(ReportCliTest, BadFlagsExit2NamingThem) {
  CliRun r = run_report("--precisions bf16,int3 --out /tmp/unused");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("'int3'"), std::string::npos) << r.out;
  r = run_report("--gpu h900 --quick --out /tmp/unused");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("h900"), std::string::npos) << r.out;
  r = run_report("--quick --calib /nonexistent/calib.txt --out /tmp/unused");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("/nonexistent/calib.txt"), std::string::npos) << r.out;
  r = run_report("--quick --lm-head int4 --out /tmp/unused");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--lm-head"), std::string::npos) << r.out;
  r = run_report("--quick");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--out"), std::string::npos) << r.out;
}

}  // namespace
