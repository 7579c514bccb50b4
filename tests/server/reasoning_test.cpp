// ReasoningParser: the three R1 output shapes, tags split at every possible byte boundary.
#include <gtest/gtest.h>

#include "server/reasoning.h"

namespace frugal::server {
namespace {

struct Split {
  std::string reasoning, content;
};

// Feeds `text` in pieces of `piece` bytes.
Split run(bool start_in_reasoning, const std::string& text, size_t piece) {
  ReasoningParser p(start_in_reasoning);
  Split s;
  for (size_t i = 0; i < text.size(); i += piece) {
    auto d = p.push(text.substr(i, piece));
    s.reasoning += d.reasoning;
    s.content += d.content;
  }
  auto d = p.finish();
  s.reasoning += d.reasoning;
  s.content += d.content;
  return s;
}

TEST(Reasoning, ModelOpensAndClosesThink) {
  for (size_t piece = 1; piece <= 9; ++piece) {
    Split s = run(false, "<think>I add 2 and 2.</think>The answer is 4.", piece);
    EXPECT_EQ(s.reasoning, "I add 2 and 2.") << piece;
    EXPECT_EQ(s.content, "The answer is 4.") << piece;
  }
}

TEST(Reasoning, LeadingWhitespaceBeforeOpenTag) {
  Split s = run(false, "\n <think>x</think>y", 1);
  EXPECT_EQ(s.reasoning, "x");
  EXPECT_EQ(s.content, "y");
}

TEST(Reasoning, TemplateOpenedThink) {
  for (size_t piece = 1; piece <= 9; ++piece) {
    Split s = run(true, "Let me think.\n</think>\n\nParis.", piece);
    EXPECT_EQ(s.reasoning, "Let me think.\n") << piece;
    EXPECT_EQ(s.content, "\n\nParis.") << piece;
  }
}

TEST(Reasoning, NoTagsIsAllContent) {
  for (size_t piece = 1; piece <= 5; ++piece) {
    Split s = run(false, "Just an answer with < and </ in it.", piece);
    EXPECT_EQ(s.reasoning, "");
    EXPECT_EQ(s.content, "Just an answer with < and </ in it.");
  }
}

TEST(Reasoning, OpenedByTemplateButNeverClosedStaysReasoning) {
  Split s = run(true, "still thinking when cut off </thi", 3);
  EXPECT_EQ(s.reasoning, "still thinking when cut off </thi");
  EXPECT_EQ(s.content, "");
}

TEST(Reasoning, LaterTagsInContentAreText) {
  Split s = run(false, "<think>a</think>b<think>c</think>", 2);
  EXPECT_EQ(s.reasoning, "a");
  EXPECT_EQ(s.content, "b<think>c</think>");
}

TEST(Reasoning, PartialOpenTagThatIsNotATag) {
  Split s = run(false, "<thin air", 1);
  EXPECT_EQ(s.content, "<thin air");
  EXPECT_EQ(s.reasoning, "");
}

TEST(Reasoning, PromptOpensThink) {
  EXPECT_TRUE(prompt_opens_think("<｜Assistant｜><think>\n"));
  EXPECT_TRUE(prompt_opens_think("x<think>"));
  EXPECT_FALSE(prompt_opens_think("<think>a</think>\n"));
  EXPECT_FALSE(prompt_opens_think("<｜Assistant｜>"));
  EXPECT_FALSE(prompt_opens_think(""));
}

}  // namespace
}  // namespace frugal::server
