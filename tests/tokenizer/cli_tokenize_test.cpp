// `frugal tokenize` end to end: runs the built binary (skips when it has not been built).
#include <cstdio>
#include <fstream>

#include <unistd.h>

#include "tokenizer_test_util.h"

namespace frugal::testing {
namespace {

struct CliResult {
  int status;
  std::string out;
};

CliResult run(const std::string& args, const std::string& stdin_text) {
  const std::string in = binary_dir() + "/cli_tokenize_test." + std::to_string(getpid()) + ".stdin";
  std::ofstream(in, std::ios::binary) << stdin_text;
  const std::string cmd = "'" + frugal_binary() + "' tokenize " + args + " < '" + in + "' 2>&1";
  CliResult r{-1, {}};
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  r.status = pclose(p);
  std::remove(in.c_str());
  return r;
}

#define FRUGAL_REQUIRE_BINARY()                                                                  \
  do {                                                                                           \
    if (!file_exists(frugal_binary())) GTEST_SKIP() << "frugal binary not built: " << frugal_binary(); \
  } while (0)

TEST(CliTokenize, EncodesDecodesAndAddsBos) {
  FRUGAL_REQUIRE_BINARY();
  const std::string model = source_root() + "/models/stories260K";
  auto tok = Tokenizer::load(model);
  ASSERT_TRUE(tok.is_ok());
  const std::string text = "Once upon a time, there was a cat.";
  CliResult enc = run("--model '" + model + "'", text);
  ASSERT_EQ(enc.status, 0) << enc.out;
  EXPECT_EQ(enc.out, ids_to_string((*tok)->encode(text)) + "\n");
  CliResult bos = run("--model '" + model + "' --bos", text);
  EXPECT_EQ(bos.out.rfind("1 ", 0), 0u) << bos.out;
  CliResult dec = run("--model '" + model + "' --decode", enc.out);
  ASSERT_EQ(dec.status, 0) << dec.out;
  EXPECT_EQ(dec.out, text);
  CliResult def = run("", text);  // --model defaults to models/stories260K
  EXPECT_EQ(def.out, enc.out);
}

TEST(CliTokenize, SpecialTokensAndChat) {
  FRUGAL_REQUIRE_BINARY();
  FRUGAL_REQUIRE_ORACLES();
  const std::string model = oracle_package("qwen3");
  const Tokenizer& tok = cached_tokenizer("qwen3");
  const std::string text = "<|im_start|>user\nhi<|im_end|>";
  EXPECT_EQ(run("--model '" + model + "'", text).out, ids_to_string(tok.encode(text)) + "\n");
  EXPECT_EQ(run("--model '" + model + "' --no-special", text).out,
            ids_to_string(tok.encode(text, {.parse_special = false})) + "\n");
  const std::string chat = binary_dir() + "/cli_tokenize_test_chat." + std::to_string(getpid()) + ".json";
  std::ofstream(chat) << R"([{"role":"user","content":"Hello!"}])";
  CliResult r = run("--model '" + model + "' --chat '" + chat + "'", "");
  std::remove(chat.c_str());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n"), std::string::npos) << r.out;
}

TEST(CliTokenize, BadInputsAreClearErrors) {
  FRUGAL_REQUIRE_BINARY();
  CliResult r = run("--model /nonexistent", "x");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("tokenizer.json"), std::string::npos) << r.out;
  CliResult d = run("--decode", "1 2 banana");
  EXPECT_NE(d.status, 0);
  EXPECT_NE(d.out.find("banana"), std::string::npos) << d.out;
}

}  // namespace
}  // namespace frugal::testing
