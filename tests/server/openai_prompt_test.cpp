// Prompt building: one BOS whether or not the chat template writes it, <think> detection, and
// the context-length checks.
#include <gtest/gtest.h>

#include "byte_codec.h"
#include "server/openai_prompt.h"

namespace frugal::server {
namespace {
using nlohmann::json;
using testing::ByteCodec;
using testing::ByteCodecConfig;

CompletionParams chat_params(std::string content = "hi") {
  CompletionParams p;
  p.endpoint = Endpoint::kChat;
  p.messages = json::array({{{"role", "user"}, {"content", content}}});
  return p;
}

size_t count(const std::vector<int32_t>& v, int32_t x) { return static_cast<size_t>(std::count(v.begin(), v.end(), x)); }

TEST(OpenAIPrompt, TemplateWritingBosGetsNoSecondBos) {
  ByteCodec codec(ByteCodecConfig{.chat_template = "plain-think", .adds_bos = true});  // renders "<s>user: ..."
  auto r = build_prompts(chat_params(), codec, 512);
  ASSERT_TRUE(std::holds_alternative<std::vector<BuiltPrompt>>(r));
  const auto& b = std::get<std::vector<BuiltPrompt>>(r)[0];
  EXPECT_EQ(b.tokens[0], testing::kBos);
  EXPECT_EQ(count(b.tokens, testing::kBos), 1u);
  EXPECT_FALSE(b.opens_think);
}

TEST(OpenAIPrompt, FallbackWithoutTemplateAddsTheTokenizersBos) {
  ByteCodec codec(ByteCodecConfig{.chat_template = "", .adds_bos = true});
  auto r = build_prompts(chat_params(), codec, 512);
  ASSERT_TRUE(std::holds_alternative<std::vector<BuiltPrompt>>(r));
  const auto& b = std::get<std::vector<BuiltPrompt>>(r)[0];
  EXPECT_EQ(b.text, "user: hi\nassistant:");
  EXPECT_EQ(b.tokens[0], testing::kBos);
  EXPECT_EQ(count(b.tokens, testing::kBos), 1u);
  EXPECT_EQ(b.max_tokens, 512 - static_cast<int32_t>(b.tokens.size()));  // chat default: the rest of the context
}

TEST(OpenAIPrompt, ThinkOpeningTemplateIsDetectedAndSpecialTokensParsed) {
  ByteCodec codec(ByteCodecConfig{.chat_template = "think"});
  auto r = build_prompts(chat_params(), codec, 512);
  ASSERT_TRUE(std::holds_alternative<std::vector<BuiltPrompt>>(r));
  const auto& b = std::get<std::vector<BuiltPrompt>>(r)[0];
  EXPECT_TRUE(b.opens_think);
  EXPECT_EQ(count(b.tokens, testing::kThinkOpen), 1u);
}

TEST(OpenAIPrompt, ContextChecks) {
  ByteCodec codec;
  CompletionParams p;
  p.endpoint = Endpoint::kCompletions;
  p.prompts.push_back({.text = std::string(100, 'x')});  // 101 tokens with BOS
  auto r = build_prompts(p, codec, 101);
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  EXPECT_EQ(std::get<ApiError>(r).code, "context_length_exceeded");
  r = build_prompts(p, codec, 110);
  ASSERT_TRUE(std::holds_alternative<std::vector<BuiltPrompt>>(r));
  EXPECT_EQ(std::get<std::vector<BuiltPrompt>>(r)[0].max_tokens, 9);  // min(16, room)
  p.max_tokens = 10;
  r = build_prompts(p, codec, 110);
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));  // 101 + 10 > 110
  EXPECT_EQ(std::get<ApiError>(r).status, 400);
  p.prompts = {{.tokens = {1, 300}}};  // 300 >= vocab 261
  r = build_prompts(p, codec, 110);
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  EXPECT_EQ(std::get<ApiError>(r).param, "prompt");
}

}  // namespace
}  // namespace frugal::server
