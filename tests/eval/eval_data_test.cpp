// Data readers and the prompt builder: CSV quoting (RFC 4180), the MMLU / CMMLU / MMLU-Redux
// formats and their errors (file and line named), UTF-8 checks, and the prompt against a
// hand-written string.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "eval/csv.h"
#include "eval/mc_data.h"
#include "eval/prompt.h"
#include "eval/text_file.h"
#include "test_paths.h"

namespace frugal::eval {
namespace {

void expect_error(const Status& st, const std::vector<std::string>& parts) {
  ASSERT_FALSE(st.is_ok());
  for (const auto& p : parts) EXPECT_NE(st.message().find(p), std::string::npos) << "'" << p << "' not in: " << st.message();
}

TEST(Csv, QuotingMultilineAndCrlf) {
  auto r = parse_csv("a,\"b,c\",\"he said \"\"hi\"\"\"\r\n\"multi\nline\",,x\n\nlast,\"\",z", "t.csv");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].fields, (std::vector<std::string>{"a", "b,c", "he said \"hi\""}));
  EXPECT_EQ((*r)[0].line, 1);
  EXPECT_EQ((*r)[1].fields, (std::vector<std::string>{"multi\nline", "", "x"}));
  EXPECT_EQ((*r)[1].line, 2);
  EXPECT_EQ((*r)[2].fields, (std::vector<std::string>{"last", "", "z"}));
  EXPECT_EQ((*r)[2].line, 5);  // after the record spanning lines 2-3 and the blank line 4
}

TEST(Csv, QuoteInsideUnquotedFieldIsLiteralAndBomIsDropped) {
  auto r = parse_csv("\xEF\xBB\xBF" "5\" tall,x\n", "t.csv");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ((*r)[0].fields, (std::vector<std::string>{"5\" tall", "x"}));
}

TEST(Csv, ErrorsNameFileAndLine) {
  expect_error(parse_csv("a,b\nc,\"never closed\nmore\n", "bad.csv").status(), {"bad.csv:2", "never closed"});
  expect_error(parse_csv("a,b\n\"x\"y,z\n", "bad.csv").status(), {"bad.csv:2", "after its closing quote"});
}

TEST(Mmlu, ParsesHendrycksRows) {
  auto r = parse_mmlu_csv("\"Q1, with comma\",a,b,c,d,B\nQ2,\"1\n2\",b,c,d,D\n", "x_test.csv");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].question, "Q1, with comma");
  EXPECT_EQ((*r)[0].answer, 1);
  EXPECT_EQ((*r)[1].choices[0], "1\n2");
  EXPECT_EQ((*r)[1].answer, 3);
  EXPECT_EQ((*r)[1].line, 2);
}

TEST(Mmlu, MalformedRowsAreClearErrors) {
  expect_error(parse_mmlu_csv("Q,a,b,c,d,A\nQ,a,b,c,D\n", "m_test.csv").status(), {"m_test.csv:2", "expected 6 columns", "found 5"});
  expect_error(parse_mmlu_csv("Q,a,b,c,d,E\n", "m_test.csv").status(), {"m_test.csv:1", "answer 'E'", "A, B, C, D"});
  expect_error(parse_mmlu_csv("Q,a,b,c,d,\n", "m_test.csv").status(), {"m_test.csv:1", "answer ''"});
  expect_error(parse_mmlu_csv(" ,a,b,c,d,A\n", "m_test.csv").status(), {"m_test.csv:1", "question is empty"});
}

TEST(Cmmlu, HeaderAndIndexColumn) {
  auto r = parse_cmmlu_csv(",Question,A,B,C,D,Answer\n0,肉牛,胸,腹,大腿,小腿,C\n", "agronomy.csv");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].question, "肉牛");
  EXPECT_EQ((*r)[0].choices[3], "小腿");
  EXPECT_EQ((*r)[0].answer, 2);
  EXPECT_EQ((*r)[0].line, 2);
  expect_error(parse_cmmlu_csv("Question,A,B,C,D,Answer\n", "c.csv").status(), {"c.csv:1", "header"});
  expect_error(parse_cmmlu_csv(",Question,A,B,C,D,Answer\n0,q,a,b,c,d\n", "c.csv").status(), {"c.csv:2", "expected 7 columns"});
  expect_error(parse_cmmlu_csv(",Question,A,B,C,D,Answer\n0,q,a,b,c,d,X\n", "c.csv").status(), {"c.csv:2", "'X'"});
}

TEST(MmluRedux, JsonLines) {
  const std::string text =
      "{\"question\":\"q1\",\"choices\":[\"a\",\"b\",\"c\",\"d\"],\"answer\":3,\"_hf_subset\":\"anatomy\"}\n"
      "\n"
      "{\"question\":\"q2\",\"choices\":[\"a\",\"b\",\"c\",\"d\"],\"answer\":0,\"subject\":\"virology\"}\n";
  auto r = parse_mmlu_redux_jsonl(text, "t.jsonl");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].subject, "anatomy");
  EXPECT_EQ((*r)[0].q.answer, 3);
  EXPECT_EQ((*r)[1].subject, "virology");
  EXPECT_EQ((*r)[1].q.line, 3);
  expect_error(parse_mmlu_redux_jsonl("{\"question\": \"q\", \n", "r.jsonl").status(), {"r.jsonl:1", "not a JSON"});
  expect_error(parse_mmlu_redux_jsonl("{\"question\":\"q\",\"choices\":[\"a\"],\"answer\":0,\"subject\":\"s\"}\n", "r.jsonl").status(),
               {"r.jsonl:1", "4 strings"});
  expect_error(parse_mmlu_redux_jsonl("{\"question\":\"q\",\"choices\":[\"a\",\"b\",\"c\",\"d\"],\"answer\":4,\"subject\":\"s\"}\n", "r.jsonl").status(),
               {"r.jsonl:1", "'answer' must be 0-3"});
  expect_error(parse_mmlu_redux_jsonl("{\"question\":\"q\",\"choices\":[\"a\",\"b\",\"c\",\"d\"],\"answer\":1}\n", "r.jsonl").status(),
               {"r.jsonl:1", "subject"});
}

TEST(TextFile, InvalidUtf8AndEmptyFilesAreErrors) {
  const auto dir = std::filesystem::temp_directory_path() / ("frugal_eval_text_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string bad = (dir / "bad.txt").string(), empty = (dir / "empty.txt").string();
  std::ofstream(bad) << "fine line\nsecond \xC3\x28 line\n";
  std::ofstream(empty) << "\n  \n";
  expect_error(read_text_file(bad).status(), {"bad.txt:2", "invalid UTF-8", "byte 8"});
  expect_error(read_text_file(empty).status(), {"empty.txt", "empty"});
  expect_error(read_text_file((dir / "missing.txt").string()).status(), {"missing.txt", "cannot open"});
  EXPECT_EQ(find_invalid_utf8("ok \xE2\x82\xAC"), std::string_view::npos);  // €
  EXPECT_EQ(find_invalid_utf8("\xED\xA0\x80"), 0u);                         // a surrogate
  EXPECT_EQ(find_invalid_utf8("a\xC0\xAF"), 1u);                            // overlong '/'
  std::filesystem::remove_all(dir);
}

TEST(Prompt, MatchesTheDocumentedFormat) {
  McQuestion shot{.question = "1+1?", .choices = {"1", "2", "3", "4"}, .answer = 1, .file = "", .line = 0};
  McQuestion q{.question = "2+2?", .choices = {"4", "5", "6", "7"}, .answer = 0, .file = "", .line = 0};
  const std::vector<McQuestion> shots = {shot, shot};
  const std::string expected =
      "The following are multiple choice questions (with answers) about high school math.\n\n"
      "1+1?\nA. 1\nB. 2\nC. 3\nD. 4\nAnswer: B\n\n"
      "1+1?\nA. 1\nB. 2\nC. 3\nD. 4\nAnswer: B\n\n"
      "2+2?\nA. 4\nB. 5\nC. 6\nD. 7\nAnswer:";
  EXPECT_EQ(mc_context("high_school_math", shots, q), expected);
  EXPECT_EQ(mc_continuation(2), " C");
}

TEST(LoadMc, SubjectsSortedShotsAndLimit) {
  const std::string dir = frugal::testing::source_root() + "/tests/data/eval/oracle-mmlu";
  auto r = load_mc(dir, McFormat::kMmlu, {.shots = 3, .subjects = {}, .limit = 2});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 4u);
  EXPECT_EQ((*r)[0].name, "abstract_algebra");
  EXPECT_EQ((*r)[3].name, "world_religions");
  EXPECT_EQ((*r)[0].dev.size(), 3u);
  EXPECT_EQ((*r)[0].test.size(), 2u);
  auto one = load_mc(dir, McFormat::kMmlu, {.shots = 5, .subjects = {"management"}, .limit = 0});
  ASSERT_TRUE(one.is_ok());
  EXPECT_EQ(one->size(), 1u);
  expect_error(load_mc(dir, McFormat::kMmlu, {.shots = 5, .subjects = {"astrology"}, .limit = 0}).status(),
               {"--subjects", "astrology"});
  expect_error(load_mc(dir, McFormat::kMmlu, {.shots = 6, .subjects = {"management"}, .limit = 0}).status(),
               {"management_dev.csv", "fewer than --shots 6"});
  expect_error(load_mc("/nonexistent", McFormat::kMmlu, {}).status(), {"/nonexistent/test"});
}

TEST(LoadMc, ReduxShotsComeFromTheSubjectsOwnFirstItems) {
  const auto dir = std::filesystem::temp_directory_path() / ("frugal_eval_redux_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream f(dir / "test.jsonl");
    for (int i = 0; i < 4; ++i)
      f << "{\"question\":\"q" << i << "\",\"choices\":[\"a\",\"b\",\"c\",\"d\"],\"answer\":" << i << ",\"_hf_subset\":\"s\"}\n";
  }
  auto r = load_mc(dir.string(), McFormat::kMmluRedux, {.shots = 1, .subjects = {}, .limit = 0});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 1u);
  ASSERT_EQ((*r)[0].dev.size(), 1u);
  EXPECT_EQ((*r)[0].dev[0].question, "q0");
  ASSERT_EQ((*r)[0].test.size(), 3u);
  EXPECT_EQ((*r)[0].test[0].question, "q1");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace frugal::eval
