// Request validation: each rejection is a 400 invalid_request_error naming the parameter; the
// accepted shapes come from the OpenAI API reference.
#include <gtest/gtest.h>

#include "server/openai_params.h"

namespace frugal::server {
namespace {
using nlohmann::json;

json chat(json extra = json::object()) {
  json b = {{"model", "m"}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
  b.update(extra);
  return b;
}

std::optional<ApiError> chat_error(const json& body) {
  auto r = parse_completion_request(Endpoint::kChat, body.dump());
  if (auto* e = std::get_if<ApiError>(&r)) return *e;
  return std::nullopt;
}

void expect_rejected(const json& body, const std::string& param) {
  auto e = chat_error(body);
  ASSERT_TRUE(e.has_value()) << body.dump();
  EXPECT_EQ(e->status, 400);
  EXPECT_EQ(e->type, "invalid_request_error");
  ASSERT_TRUE(e->param.has_value()) << body.dump();
  EXPECT_EQ(*e->param, param) << e->message;
}

TEST(OpenAIParams, MalformedJson) {
  auto r = parse_completion_request(Endpoint::kChat, "{\"model\": ");
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
  EXPECT_EQ(std::get<ApiError>(r).status, 400);
  r = parse_completion_request(Endpoint::kChat, "[1,2]");
  ASSERT_TRUE(std::holds_alternative<ApiError>(r));
}

TEST(OpenAIParams, RangesFromTheSpec) {
  expect_rejected(chat({{"temperature", 2.01}}), "temperature");
  expect_rejected(chat({{"temperature", -0.1}}), "temperature");
  expect_rejected(chat({{"top_p", 0}}), "top_p");
  expect_rejected(chat({{"top_p", 1.5}}), "top_p");
  expect_rejected(chat({{"n", 0}}), "n");
  expect_rejected(chat({{"n", 17}}), "n");
  expect_rejected(chat({{"max_tokens", 0}}), "max_tokens");
  expect_rejected(chat({{"max_completion_tokens", -5}}), "max_completion_tokens");
  expect_rejected(chat({{"presence_penalty", 2.5}}), "presence_penalty");
  expect_rejected(chat({{"frequency_penalty", -2.5}}), "frequency_penalty");
  expect_rejected(chat({{"logprobs", true}, {"top_logprobs", 21}}), "top_logprobs");
  expect_rejected(chat({{"top_logprobs", 3}}), "top_logprobs");  // needs logprobs: true
  expect_rejected(chat({{"min_p", 1.5}}), "min_p");
}

TEST(OpenAIParams, WrongTypes) {
  expect_rejected(chat({{"temperature", "hot"}}), "temperature");
  expect_rejected(chat({{"n", 1.5}}), "n");
  expect_rejected(chat({{"stream", "yes"}}), "stream");
  expect_rejected(chat({{"stop", 5}}), "stop");
  expect_rejected(chat({{"stop", json::array({"a", 1})}}), "stop");
  expect_rejected(chat({{"model", 7}}), "model");
  expect_rejected(chat({{"messages", "hi"}}), "messages");
  expect_rejected(chat({{"messages", json::array()}}), "messages");
  expect_rejected(chat({{"messages", json::array({{{"role", "wizard"}, {"content", "x"}}})}}), "messages[0].role");
  expect_rejected(chat({{"messages", json::array({{{"role", "user"}, {"content", 3}}})}}), "messages[0].content");
  expect_rejected(chat({{"stream_options", {{"include_usage", true}}}}), "stream_options");  // needs stream
}

TEST(OpenAIParams, AcceptedValues) {
  json body = chat({{"temperature", 0}, {"top_p", 1}, {"n", 16}, {"max_tokens", 5}, {"stop", "x"},
                    {"seed", 42}, {"stream", true}, {"stream_options", {{"include_usage", true}}},
                    {"logprobs", true}, {"top_logprobs", 20}, {"presence_penalty", -2}, {"frequency_penalty", 2},
                    {"top_k", 40}, {"min_p", 0.05}, {"user", "ignored"}});
  body["messages"].push_back({{"role", "assistant"}, {"content", nullptr}});
  body["messages"].push_back({{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}})}});
  auto r = parse_completion_request(Endpoint::kChat, body.dump());
  ASSERT_TRUE(std::holds_alternative<CompletionParams>(r)) << std::get<ApiError>(r).message;
  const auto& p = std::get<CompletionParams>(r);
  EXPECT_EQ(p.n, 16);
  EXPECT_EQ(*p.max_tokens, 5);
  EXPECT_EQ(p.sampling.temperature, 0.0f);
  EXPECT_EQ(*p.sampling.seed, 42u);
  EXPECT_TRUE(p.stream);
  EXPECT_TRUE(p.include_usage);
  EXPECT_EQ(p.logprobs, 20);
  EXPECT_EQ(p.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(p.sampling.top_k, 40);
  EXPECT_EQ(p.messages[2]["content"], "ab");
}

TEST(OpenAIParams, CompletionPromptShapes) {
  auto parse = [](const json& prompt) {
    json b = {{"model", "m"}, {"prompt", prompt}};
    return parse_completion_request(Endpoint::kCompletions, b.dump());
  };
  auto r = parse("text");
  ASSERT_TRUE(std::holds_alternative<CompletionParams>(r));
  EXPECT_EQ(*std::get<CompletionParams>(r).prompts[0].text, "text");
  r = parse(json::array({"a", "b"}));
  ASSERT_TRUE(std::holds_alternative<CompletionParams>(r));
  EXPECT_EQ(std::get<CompletionParams>(r).prompts.size(), 2u);
  r = parse(json::array({1, 2, 3}));
  ASSERT_TRUE(std::holds_alternative<CompletionParams>(r));
  EXPECT_EQ(std::get<CompletionParams>(r).prompts[0].tokens, (std::vector<int32_t>{1, 2, 3}));
  r = parse(json::array({json::array({1}), json::array({2, 3})}));
  ASSERT_TRUE(std::holds_alternative<CompletionParams>(r));
  EXPECT_EQ(std::get<CompletionParams>(r).prompts[1].tokens, (std::vector<int32_t>{2, 3}));
  for (const json& bad : {json(5), json::array(), json::array({-1}), json::array({json::object()}), json(nullptr)}) {
    auto e = parse(bad);
    ASSERT_TRUE(std::holds_alternative<ApiError>(e)) << bad.dump();
    EXPECT_EQ(*std::get<ApiError>(e).param, "prompt");
  }
  json b = {{"prompt", "x"}, {"logprobs", 21}};
  auto e = parse_completion_request(Endpoint::kCompletions, b.dump());
  ASSERT_TRUE(std::holds_alternative<ApiError>(e));
  EXPECT_EQ(*std::get<ApiError>(e).param, "logprobs");
}

TEST(OpenAIParams, ErrorObjectShape) {
  ApiError e = bad_request("bad", "temperature");
  json j = e.to_json();
  ASSERT_TRUE(j.contains("error"));
  EXPECT_EQ(j["error"]["message"], "bad");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "temperature");
  EXPECT_TRUE(j["error"]["code"].is_null());
}

}  // namespace
}  // namespace frugal::server
