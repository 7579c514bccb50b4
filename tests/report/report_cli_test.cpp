// Runs the real `frugal report` binary: a quick bf16 + int8 report on the default model prints
// where report.html is and exits 0 with the int8 row failed; bad flags exit 2 naming the flag.
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

TEST(ReportCliTest, QuickReportPrintsWhereThePageIs) {
  const std::string dir = frugal::testing::binary_dir() + "/tests/report/artifacts/cli";
  std::filesystem::remove_all(dir);
  const CliRun r = run_report("--quick --threads 2 --precisions bf16,int8 --price-per-hour 0.2 --out " + dir);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("report: " + dir + "/report.html"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("int8: failed"), std::string::npos) << r.out;
  std::ifstream f(dir + "/report.json");
  std::stringstream ss;
  ss << f.rdbuf();
  const auto j = nlohmann::json::parse(ss.str());
  EXPECT_EQ(j["rows"][0]["status"], "ok");
  EXPECT_EQ(j["rows"][1]["status"], "failed");
  EXPECT_EQ(j["price_per_gpu_hour"], 0.2);
  EXPECT_EQ(j["ownership"]["available"], false);  // no --gpu and no --purchase-usd
}

TEST(ReportCliTest, BadFlagsExit2NamingThem) {
  CliRun r = run_report("--precisions bf16,int3 --out /tmp/unused");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("'int3'"), std::string::npos) << r.out;
  r = run_report("--gpu h900 --quick --out /tmp/unused");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("h900"), std::string::npos) << r.out;
  r = run_report("--quick");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--out"), std::string::npos) << r.out;
}

}  // namespace
