// Issue 15, acceptance 3: on the trained reference model, `frugal quantize` (RTN) to INT8 and to
// INT4 g128, then `frugal eval kld` of each against the bf16 model's saved distributions, all
// through the real binary on the CPU: finite numbers, and INT8 closer to bf16 than INT4.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "test_paths.h"

namespace {

namespace fs = std::filesystem;

int run(const std::string& args, std::string* out) {
  const std::string cmd = "cd " + frugal::testing::source_root() + " && " + frugal::testing::frugal_binary() + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out->append(buf.data(), n);
  return WEXITSTATUS(pclose(p));
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

TEST(EvalQuantKld, Int8BelowInt4OnTheReferenceModel) {
  const std::string model = "models/reference-qwen2-20m";
  if (!fs::exists(fs::path(frugal::testing::source_root()) / model / "config.json")) GTEST_SKIP() << model << " absent";
  const fs::path dir = fs::path(::testing::TempDir()) / ("eval_quant_kld_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string text = "tests/data/eval_oracle/wikitext-2-test-head.txt";
  std::string log;
  ASSERT_EQ(run("eval ppl --model " + model + " --text " + text + " --ctx 256 --save-logits " + (dir / "ref.logits").string() +
                " --json " + (dir / "ppl.json").string(), &log), 0) << log;
  double kld[2] = {0, 0}, top1[2] = {0, 0};
  const char* formats[2] = {"int8", "int4"};
  for (int i = 0; i < 2; ++i) {
    const fs::path q = dir / formats[i];
    log.clear();
    ASSERT_EQ(run(std::string("quantize --model ") + model + " --format " + formats[i] + " --method rtn" +
                  (i == 1 ? " --group-size 128" : "") + " --out " + q.string(), &log), 0) << log;
    log.clear();
    const fs::path js = dir / (std::string(formats[i]) + ".json");
    ASSERT_EQ(run("eval kld --model " + q.string() + " --reference " + (dir / "ref.logits").string() + " --json " + js.string(), &log), 0) << log;
    const auto j = read_json(js);
    kld[i] = j.at("kld_mean").get<double>();
    top1[i] = j.at("same_top1").get<double>();
    EXPECT_TRUE(std::isfinite(kld[i]) && kld[i] >= 0) << formats[i] << " kld " << kld[i];
    EXPECT_TRUE(std::isfinite(j.at("kld_p99").get<double>()));
    EXPECT_TRUE(std::isfinite(j.at("delta_ppl").get<double>()));
    EXPECT_GT(top1[i], 0.5) << formats[i];
    std::printf("%s RTN: mean KLD %.6f, same top-1 %.4f, delta PPL %.4f\n", formats[i], kld[i], top1[i],
                j.at("delta_ppl").get<double>());
  }
  EXPECT_GT(kld[0], 0.0);           // INT8 is not bit-identical to bf16
  EXPECT_LT(kld[0], kld[1]);        // INT8 closer to bf16 than INT4
  EXPECT_GE(top1[0], top1[1]);
  fs::remove_all(dir);
}

}  // namespace
