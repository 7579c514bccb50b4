// GSM8K answer extraction and normalization (docs/eval.md), and the data reader's errors.
#include <gtest/gtest.h>

#include "eval/gsm8k.h"

namespace frugal::eval {
namespace {

TEST(Gsm8kExtract, PrefersBoxedThenHashesThenLastNumber) {
  EXPECT_EQ(extract_answer("so 3 + 4 = 7, the answer is \\boxed{7}. Also 9."), "7");
  EXPECT_EQ(extract_answer("first \\boxed{1} then \\boxed{\\text{2}} wait, \\boxed{3}"), "3");
  EXPECT_EQ(extract_answer("Janet sells 9 eggs.\n#### 18"), "18");
  EXPECT_EQ(extract_answer("She makes 9 * 2 = 18 dollars."), "18");
  EXPECT_EQ(extract_answer("no digits here"), std::nullopt);
  EXPECT_EQ(extract_answer(""), std::nullopt);
}

TEST(Gsm8kExtract, ThinkAware) {
  EXPECT_EQ(extract_answer("<think>maybe \\boxed{5}? no, 6</think>The answer is \\boxed{6}"), "6");
  EXPECT_EQ(extract_answer("<think>1 2 3</think>So it is 42 apples."), "42");
  // Only the reasoning so far (no closing tag): the whole text is used.
  EXPECT_EQ(extract_answer("<think>we get 12"), "12");
}

TEST(Gsm8kExtract, NormalizesCommasUnitsAndTrailingZeros) {
  EXPECT_EQ(extract_answer("\\boxed{1,234}"), "1234");
  EXPECT_EQ(extract_answer("\\boxed{\\$18.00}"), "18");
  EXPECT_EQ(extract_answer("\\boxed{18.0 dollars}"), "18");
  EXPECT_EQ(extract_answer("\\boxed{0.50}"), "0.5");
  EXPECT_EQ(extract_answer("\\boxed{-3}"), "-3");
  EXPECT_EQ(extract_answer("\\boxed{25\\%}"), "25");
  EXPECT_EQ(extract_answer("The total is $1,000."), "1000");
  EXPECT_EQ(normalize_number(" 007 "), "7");
  EXPECT_EQ(normalize_number("-0.0"), "0");
  EXPECT_EQ(normalize_number("abc"), "");
}

TEST(Gsm8kData, ReadsReferencesAndNamesBadLines) {
  auto r = parse_gsm8k_jsonl("{\"question\":\"q\",\"answer\":\"x\\n#### 1,000\"}\n\n{\"question\":\"q2\",\"answer\":\"#### 7\"}\n", "g.jsonl");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].reference, "1000");
  EXPECT_EQ((*r)[1].line, 3);
  auto bad = [](const std::string& text, const std::string& part) {
    auto st = parse_gsm8k_jsonl(text, "g.jsonl").status();
    ASSERT_FALSE(st.is_ok());
    EXPECT_NE(st.message().find(part), std::string::npos) << st.message();
  };
  bad("{\"question\":\"q\",\"answer\":\"#### 1\"}\n{oops\n", "g.jsonl:2: not a JSON");
  bad("{\"question\":\"q\"}\n", "g.jsonl:1: missing string field 'answer'");
  bad("{\"question\":\"q\",\"answer\":\"no final\"}\n", "g.jsonl:1: 'answer' has no '#### N'");
  bad("[1,2]\n", "g.jsonl:1: expected a JSON object");
  bad("\n\n", "no problems");
}

}  // namespace
}  // namespace frugal::eval
