// `frugal eval` through the real binary: mc end to end (5-shot MMLU subset, reference model),
// gsm8k --limit 2 and ppl on stories260K, the --json/--csv outputs, and malformed data giving
// clear errors that name the file and line (issue 15, acceptance 5).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "test_paths.h"

namespace {

namespace fs = std::filesystem;

struct RunOut {
  int rc;
  std::string out;
};

RunOut run_eval(const std::string& args) {
  std::string cmd = "cd " + frugal::testing::source_root() + " && " + frugal::testing::frugal_binary() + " eval " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int st = pclose(p);
  return {WEXITSTATUS(st), out};
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class EvalCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("frugal_eval_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const fs::path& rel, const std::string& text) {
    fs::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel, std::ios::binary) << text;
  }
  std::string at(const std::string& rel) const { return (dir_ / rel).string(); }
  fs::path dir_;
};

TEST_F(EvalCli, McEndToEndWritesJsonAndCsv) {
  RunOut r = run_eval("mc --model models/reference-qwen2-20m --data tests/data/eval/oracle-mmlu --format mmlu --shots 5 "
                      "--subjects abstract_algebra,management --threads 2 --json " + at("mc.json") + " --csv " + at("mc.csv"));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("abstract_algebra"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("micro (all questions)"), std::string::npos);
  auto j = nlohmann::json::parse(slurp(dir_ / "mc.json"));
  EXPECT_EQ(j["command"], "mc");
  EXPECT_EQ(j["shots"], 5);
  EXPECT_EQ(j["micro"]["n"], 10);
  ASSERT_EQ(j["subjects"].size(), 2u);
  ASSERT_EQ(j["questions"].size(), 10u);
  for (const auto& q : j["questions"]) {
    ASSERT_EQ(q["loglik"].size(), 4u);
    for (const auto& l : q["loglik"]) EXPECT_LT(l.get<double>(), 0.0);
  }
  // The shared 5-shot prefix came from the prefix cache for all but the first question of a subject.
  EXPECT_GT(j["cached_prompt_tokens"].get<int64_t>(), j["prompt_tokens"].get<int64_t>() / 2);
  const std::string csv = slurp(dir_ / "mc.csv");
  EXPECT_EQ(csv.rfind("subject,n,correct,accuracy,se,ci95_lo,ci95_hi\nabstract_algebra,5,", 0), 0u) << csv;
  EXPECT_NE(csv.find("\nmicro,10,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\nmacro,2,"), std::string::npos) << csv;
}

TEST_F(EvalCli, Gsm8kRunsAndParses) {
  write("gsm.jsonl",
        "{\"question\":\"Tom has 3 apples and buys 4 more. How many apples does he have?\",\"answer\":\"3+4=7\\n#### 7\"}\n"
        "{\"question\":\"A box holds 12 eggs. How many eggs are in 2 boxes?\",\"answer\":\"#### 24\"}\n"
        "{\"question\":\"unused\",\"answer\":\"#### 1\"}\n");
  RunOut r = run_eval("gsm8k --data " + at("gsm.jsonl") + " --limit 2 --max-tokens 24 --threads 2 --json " + at("g.json") +
                      " --csv " + at("g.csv"));
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = nlohmann::json::parse(slurp(dir_ / "g.json"));
  EXPECT_EQ(j["n"], 2);
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][0]["reference"], "7");
  EXPECT_EQ(j["results"][1]["reference"], "24");
  EXPECT_GT(j["results"][0]["generated_tokens"].get<int>(), 0);
  EXPECT_EQ(slurp(dir_ / "g.csv").rfind("command,model,device,data,n,correct,accuracy,", 0), 0u);
}

TEST_F(EvalCli, PplAndKldOfAModelAgainstItself) {
  RunOut p = run_eval("ppl --text tests/data/eval_oracle/story.txt --ctx 128 --threads 2 --save-logits " + at("ref.bin") +
                      " --json " + at("p.json"));
  ASSERT_EQ(p.rc, 0) << p.out;
  auto j = nlohmann::json::parse(slurp(dir_ / "p.json"));
  EXPECT_EQ(j["ctx"], 128);
  EXPECT_EQ(j["tokens_scored"], j["n_chunks"].get<int>() * 63);
  RunOut k = run_eval("kld --reference " + at("ref.bin") + " --text tests/data/eval_oracle/story.txt --threads 2 --json " + at("k.json"));
  ASSERT_EQ(k.rc, 0) << k.out;
  auto kj = nlohmann::json::parse(slurp(dir_ / "k.json"));
  EXPECT_EQ(kj["kld_mean"], 0.0);
  EXPECT_EQ(kj["same_top1"], 1.0);
  EXPECT_NEAR(kj["ppl_ref"].get<double>(), j["ppl"].get<double>(), 1e-9);
  // Another text than the reference's is refused.
  write("other.txt", "A different story about a cat.\n");
  RunOut bad = run_eval("kld --reference " + at("ref.bin") + " --text " + at("other.txt"));
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.out.find("differ from"), std::string::npos) << bad.out;
}

TEST_F(EvalCli, MalformedDataNamesFileAndLine) {
  // Text: empty, shorter than one chunk, invalid UTF-8.
  write("empty.txt", "");
  write("short.txt", "Once upon a time.\n");
  write("bad.txt", "line one\nline \xFF two\n");
  RunOut e = run_eval("ppl --text " + at("empty.txt"));
  EXPECT_EQ(e.rc, 2);
  EXPECT_NE(e.out.find("empty.txt: the file is empty"), std::string::npos) << e.out;
  RunOut s = run_eval("ppl --text " + at("short.txt") + " --ctx 256");
  EXPECT_EQ(s.rc, 2);
  EXPECT_NE(s.out.find("short.txt: the text is"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("shorter than one chunk of --ctx 256"), std::string::npos) << s.out;
  RunOut u = run_eval("ppl --text " + at("bad.txt"));
  EXPECT_NE(u.rc, 0);
  EXPECT_NE(u.out.find("bad.txt:2: invalid UTF-8"), std::string::npos) << u.out;

  // MMLU: a row with a missing column; an answer outside A-D.
  const std::string good = "q,a,b,c,d,A\n";
  write("m1/dev/x_dev.csv", good + good);
  write("m1/test/x_test.csv", good + "q,a,b,c,D\n");
  RunOut m1 = run_eval("mc --data " + at("m1") + " --shots 1");
  EXPECT_NE(m1.rc, 0);
  EXPECT_NE(m1.out.find("x_test.csv:2: expected 6 columns"), std::string::npos) << m1.out;
  write("m2/dev/x_dev.csv", good);
  write("m2/test/x_test.csv", good + good + "q,a,b,c,d,F\n");
  RunOut m2 = run_eval("mc --data " + at("m2") + " --shots 1");
  EXPECT_NE(m2.rc, 0);
  EXPECT_NE(m2.out.find("x_test.csv:3: answer 'F' is not one of A, B, C, D"), std::string::npos) << m2.out;
  // CMMLU without its header.
  write("c/dev/y.csv", ",Question,A,B,C,D,Answer\n0,q,a,b,c,d,A\n");
  write("c/test/y.csv", "0,q,a,b,c,d,A\n");
  RunOut c = run_eval("mc --format cmmlu --data " + at("c") + " --shots 1");
  EXPECT_NE(c.rc, 0);
  EXPECT_NE(c.out.find("y.csv:1: header"), std::string::npos) << c.out;
  // MMLU-Redux and GSM8K: a bad JSON line.
  write("r/test.jsonl", "{\"question\":\"q\",\"choices\":[\"a\",\"b\",\"c\",\"d\"],\"answer\":0,\"subject\":\"s\"}\n{\"question\":\n");
  RunOut rx = run_eval("mc --format mmlu-redux --data " + at("r") + " --shots 0");
  EXPECT_NE(rx.rc, 0);
  EXPECT_NE(rx.out.find("test.jsonl:2: not a JSON value"), std::string::npos) << rx.out;
  write("g.jsonl", "{\"question\":\"q\",\"answer\":\"#### 1\"}\nnot json\n");
  RunOut g = run_eval("gsm8k --data " + at("g.jsonl"));
  EXPECT_NE(g.rc, 0);
  EXPECT_NE(g.out.find("g.jsonl:2: not a JSON value"), std::string::npos) << g.out;
  // Unknown format.
  RunOut f = run_eval("mc --format hellaswag --data " + at("m1"));
  EXPECT_EQ(f.rc, 2);
  EXPECT_NE(f.out.find("'hellaswag' is not one of"), std::string::npos) << f.out;
}

}  // namespace
