// `frugal run` end to end: greedy ids streamed by the binary equal runtime::generate's, and
// bad flags fail with a message naming the flag.
#include <cstdio>
#include <sstream>

#include <gtest/gtest.h>

#include "model/model.h"
#include "ops/ref_backend.h"
#include "runtime/generate.h"
#include "test_paths.h"

namespace frugal::model {
namespace {

// Runs a shell command; returns (exit status, stdout + stderr).
std::pair<int, std::string> run(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return {-1, ""};
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

TEST(RunCli, GreedyIdsMatchGenerate) {
  const std::string dir = frugal::testing::source_root() + "/models/stories260K";
  auto [rc, out] = run(frugal::testing::frugal_binary() + " run --model " + dir +
                       " --raw-ids --prompt-ids '1 403 407' --max-tokens 24 --temperature 0 --ignore-eos");
  ASSERT_EQ(rc, 0) << out;
  std::vector<int32_t> got;
  std::istringstream in(out);
  for (int32_t v; in >> v;) got.push_back(v);
  auto backend = ops::make_ref_backend();
  auto m = Model::load(dir, backend.get(), {});
  ASSERT_TRUE(m.is_ok());
  const int32_t prompt[] = {1, 403, 407};
  auto want = runtime::generate(**m, prompt, {.temperature = 0, .max_tokens = 24, .ignore_eos = true});
  ASSERT_TRUE(want.is_ok());
  EXPECT_EQ(got, want->tokens);
}

TEST(RunCli, BadFlagsNameTheFlag) {
  const std::string bin = frugal::testing::frugal_binary() + " run ";
  auto [rc1, out1] = run(bin + "--prompt-ids '1 x'");
  EXPECT_NE(rc1, 0);
  EXPECT_NE(out1.find("--prompt-ids"), std::string::npos) << out1;
  auto [rc2, out2] = run(bin + "--device tpu");
  EXPECT_NE(rc2, 0);
  EXPECT_NE(out2.find("--device"), std::string::npos) << out2;
  auto [rc3, out3] = run(bin + "--model /nonexistent/dir");
  EXPECT_NE(rc3, 0);
  EXPECT_NE(out3.find("/nonexistent/dir"), std::string::npos) << out3;
}

}  // namespace
}  // namespace frugal::model
