// End-to-end generation through the server library with the scripted fake engine: response
// shapes, streaming, stop strings, n, logprobs, usage, the reasoning split for the three R1
// output shapes, and cancellation of clients that go away.
#include <thread>

#include <gtest/gtest.h>

#include "http_client.h"

namespace frugal::server::testing {
namespace {
using nlohmann::json;

json chat(const std::string& content, json extra = json::object()) {
  json b = {{"model", "fake-model"}, {"messages", json::array({{{"role", "user"}, {"content", content}}})}};
  b.update(extra);
  return b;
}

// Concatenates the streamed chat deltas of choice `index`.
struct Streamed {
  std::string content, reasoning, finish_reason;
  int logprob_entries = 0;
  json usage;
  bool done = false;
};
Streamed collect(const std::string& body, int index = 0) {
  Streamed s;
  for (const json& ev : sse_events(body, &s.done)) {
    if (ev.contains("usage") && ev["usage"].is_object()) s.usage = ev["usage"];
    for (const json& ch : ev["choices"]) {
      if (ch["index"] != index) continue;
      const json& d = ch.contains("delta") ? ch["delta"] : ch;
      if (d.contains("content") && d["content"].is_string()) s.content += d["content"].get<std::string>();
      if (d.contains("text")) s.content += d["text"].get<std::string>();
      if (d.contains("reasoning_content") && d["reasoning_content"].is_string()) s.reasoning += d["reasoning_content"].get<std::string>();
      if (ch["finish_reason"].is_string()) s.finish_reason = ch["finish_reason"];
      if (ch["logprobs"].is_object() && ch["logprobs"].contains("content")) s.logprob_entries += static_cast<int>(ch["logprobs"]["content"].size());
    }
  }
  return s;
}

TEST(Generation, ChatNonStreamingShape) {
  InProcessServer srv;
  auto r = post_json(srv.port(), "/v1/chat/completions", chat("SCRIPT:Hello there!"));
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.json();
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["model"], "fake-model");
  EXPECT_TRUE(j["id"].get<std::string>().starts_with("chatcmpl-"));
  EXPECT_TRUE(j["created"].is_number_integer());
  EXPECT_TRUE(j["system_fingerprint"].is_string());
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Hello there!");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  // The prompt is BOS + "user: SCRIPT:Hello there!\nassistant:" in bytes.
  const int prompt = 1 + static_cast<int>(std::string("user: SCRIPT:Hello there!\nassistant:").size());
  EXPECT_EQ(j["usage"]["prompt_tokens"], prompt);
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
  EXPECT_EQ(j["usage"]["total_tokens"], prompt + 12);
}

TEST(Generation, StreamingWithUsageAndMultiByteText) {
  InProcessServer srv;
  auto r = post_json(srv.port(), "/v1/chat/completions",
                     chat("SCRIPT:héllo 日本 🙂", {{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["Content-Type"], "text/event-stream");
  Streamed s = collect(r.body);
  EXPECT_TRUE(s.done);
  EXPECT_EQ(s.content, "héllo 日本 🙂");
  EXPECT_EQ(s.finish_reason, "stop");
  EXPECT_EQ(s.usage["completion_tokens"], static_cast<int>(std::string("héllo 日本 🙂").size()));
  auto events = sse_events(r.body);
  EXPECT_EQ(events.back()["choices"].size(), 0u);  // the usage chunk has no choices
  EXPECT_EQ(events.front()["choices"][0]["delta"]["role"], "assistant");
  for (size_t i = 0; i + 1 < events.size(); ++i) EXPECT_TRUE(events[i]["usage"].is_null());
}

TEST(Generation, LengthStopAndStopStrings) {
  InProcessServer srv;
  auto r = post_json(srv.port(), "/v1/chat/completions", chat("SCRIPT:abcdefghij", {{"max_tokens", 4}}));
  EXPECT_EQ(r.json()["choices"][0]["message"]["content"], "abcd");
  EXPECT_EQ(r.json()["choices"][0]["finish_reason"], "length");
  for (bool stream : {false, true}) {
    r = post_json(srv.port(), "/v1/chat/completions",
                  chat("SCRIPT:one two three four", {{"stop", json::array({"thr", "four"})}, {"stream", stream}}));
    std::string text = stream ? collect(r.body).content : r.json()["choices"][0]["message"]["content"].get<std::string>();
    EXPECT_EQ(text, "one two ") << stream;
    std::string finish = stream ? collect(r.body).finish_reason : r.json()["choices"][0]["finish_reason"].get<std::string>();
    EXPECT_EQ(finish, "stop");
  }
}

TEST(Generation, NChoicesAndSeeds) {
  InProcessServer srv;
  json b = chat("tell me", {{"n", 2}, {"temperature", 1.0}, {"seed", 7}, {"max_tokens", 20}});
  auto a = post_json(srv.port(), "/v1/chat/completions", b).json();
  auto c = post_json(srv.port(), "/v1/chat/completions", b).json();
  ASSERT_EQ(a["choices"].size(), 2u);
  EXPECT_EQ(a["choices"][0]["index"], 0);
  EXPECT_EQ(a["choices"][1]["index"], 1);
  EXPECT_EQ(a["choices"][0]["message"]["content"], c["choices"][0]["message"]["content"]);
  EXPECT_EQ(a["choices"][1]["message"]["content"], c["choices"][1]["message"]["content"]);
  EXPECT_NE(a["choices"][0]["message"]["content"], a["choices"][1]["message"]["content"]);  // seeds 7 and 8
  EXPECT_EQ(a["usage"]["completion_tokens"], 40);
}

TEST(Generation, ChatLogprobs) {
  InProcessServer srv;
  auto j = post_json(srv.port(), "/v1/chat/completions",
                     chat("SCRIPT:ab日", {{"logprobs", true}, {"top_logprobs", 2}})).json();
  const json& content = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 5u);  // a, b, and three bytes of 日
  EXPECT_EQ(content[0]["token"], "a");
  EXPECT_EQ(content[0]["bytes"], json::array({97}));
  EXPECT_EQ(content[0]["top_logprobs"].size(), 2u);
  EXPECT_TRUE(content[0]["logprob"].is_number());
  EXPECT_EQ(content[2]["bytes"], json::array({0xE6}));
}

TEST(Generation, CompletionsShapesEchoAndLogprobs) {
  InProcessServer srv;
  auto j = post_json(srv.port(), "/v1/completions",
                     {{"model", "fake-model"}, {"prompt", json::array({"SCRIPT:xy", "SCRIPT:zw"})}, {"logprobs", 1}}).json();
  EXPECT_EQ(j["object"], "text_completion");
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][0]["text"], "xy");
  EXPECT_EQ(j["choices"][1]["text"], "zw");
  EXPECT_EQ(j["choices"][1]["logprobs"]["tokens"], json::array({"z", "w"}));
  EXPECT_EQ(j["choices"][1]["logprobs"]["text_offset"], json::array({0, 1}));
  EXPECT_EQ(j["usage"]["prompt_tokens"], 2 * 10);  // BOS + 9 bytes each
  j = post_json(srv.port(), "/v1/completions", {{"model", "fake-model"}, {"prompt", "SCRIPT:ok"}, {"echo", true}}).json();
  EXPECT_EQ(j["choices"][0]["text"], "SCRIPT:okok");
  auto r = post_json(srv.port(), "/v1/completions", {{"model", "fake-model"}, {"prompt", "SCRIPT:streamed"}, {"stream", true}});
  EXPECT_EQ(collect(r.body).content, "streamed");
  // Streamed logprobs: text_offset counts from the start of the choice's text across chunks.
  r = post_json(srv.port(), "/v1/completions", {{"model", "fake-model"}, {"prompt", "SCRIPT:abc"}, {"stream", true}, {"logprobs", 0}});
  json offsets = json::array(), tokens = json::array();
  for (const json& ev : sse_events(r.body)) {
    for (const json& ch : ev["choices"]) {
      if (!ch["logprobs"].is_object()) continue;
      for (const auto& o : ch["logprobs"]["text_offset"]) offsets.push_back(o);
      for (const auto& t : ch["logprobs"]["tokens"]) tokens.push_back(t);
    }
  }
  EXPECT_EQ(offsets, json::array({0, 1, 2}));
  EXPECT_EQ(tokens, json::array({"a", "b", "c"}));
}

TEST(Generation, MetricsCountRequestsAndLatencies) {
  InProcessServer srv;
  ASSERT_EQ(post_json(srv.port(), "/v1/chat/completions", chat("SCRIPT:hello")).status, 200);
  ASSERT_EQ(post_json(srv.port(), "/v1/chat/completions", chat("x", {{"n", 0}})).status, 400);
  // A request is counted when its handler returns, just after the last byte of its response was
  // written, so a client that scrapes right after reading the response may be a moment early.
  const std::string ok_line = "frugal_requests_total{endpoint=\"/v1/chat/completions\",status=\"200\"} 1";
  const std::string bad_line = "frugal_requests_total{endpoint=\"/v1/chat/completions\",status=\"400\"} 1";
  auto counted = [&](const std::string& body) {
    return body.find(ok_line) != std::string::npos && body.find(bad_line) != std::string::npos;
  };
  auto r = http_request(srv.port(), "GET", "/metrics");
  for (int i = 0; i < 200 && !counted(r.body); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    r = http_request(srv.port(), "GET", "/metrics");
  }
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.headers["Content-Type"].find("text/plain"), std::string::npos);
  const std::string& m = r.body;
  EXPECT_NE(m.find(ok_line), std::string::npos) << m;
  EXPECT_NE(m.find(bad_line), std::string::npos);
  EXPECT_NE(m.find("frugal_generation_tokens_total 5"), std::string::npos);
  EXPECT_NE(m.find("frugal_time_to_first_token_seconds_count 1"), std::string::npos);
  EXPECT_NE(m.find("frugal_inter_token_latency_seconds_count 4"), std::string::npos);
  EXPECT_NE(m.find("frugal_e2e_request_latency_seconds_count 1"), std::string::npos);
  EXPECT_NE(m.find("frugal_kv_cache_blocks_total 8192"), std::string::npos);
  EXPECT_NE(m.find("frugal_prefix_cache_hit_rate"), std::string::npos);
  EXPECT_NE(m.find("frugal_num_preemptions"), std::string::npos);
}

// The three DeepSeek-R1 output shapes, streamed and not.
struct ReasoningCase {
  const char* chat_template;
  const char* script;
  const char* reasoning;
  const char* content;
};

TEST(Generation, ReasoningSplit) {
  const ReasoningCase cases[] = {
      {"plain-think", "<think>two plus two</think>It is 4.", "two plus two", "It is 4."},
      {"think", "two plus two</think>It is 4.", "two plus two", "It is 4."},
      {"plain-think", "It is 4.", "", "It is 4."},
  };
  for (const auto& c : cases) {
    TestServerOptions o;
    o.codec.chat_template = c.chat_template;
    InProcessServer srv(o);
    auto j = post_json(srv.port(), "/v1/chat/completions", chat(std::string("SCRIPT:") + c.script)).json();
    const json& msg = j["choices"][0]["message"];
    if (*c.reasoning) {
      EXPECT_EQ(msg["reasoning_content"], c.reasoning) << c.script;
    } else {
      EXPECT_TRUE(msg["reasoning_content"].is_null()) << c.script;
    }
    EXPECT_EQ(msg["content"], c.content) << c.script;
    Streamed s = collect(post_json(srv.port(), "/v1/chat/completions",
                                   chat(std::string("SCRIPT:") + c.script, {{"stream", true}})).body);
    EXPECT_EQ(s.reasoning, c.reasoning) << c.script;
    EXPECT_EQ(s.content, c.content) << c.script;
  }
}

TEST(Generation, ReasoningFormatNoneKeepsRawText) {
  TestServerOptions o;
  o.codec.chat_template = "plain-think";
  o.api.reasoning = ReasoningFormat::kNone;
  InProcessServer srv(o);
  auto j = post_json(srv.port(), "/v1/chat/completions", chat("SCRIPT:<think>a</think>b")).json();
  EXPECT_EQ(j["choices"][0]["message"]["content"], "<think>a</think>b");
  EXPECT_FALSE(j["choices"][0]["message"].contains("reasoning_content"));
}

// Clients that vanish mid-stream: every request is cancelled, KV returns to zero, and the
// server keeps serving.
TEST(Generation, DisconnectCancelsAndFreesKv) {
  TestServerOptions o;
  o.engine.step_time = std::chrono::microseconds(2000);
  InProcessServer srv(o);
  std::string req_body = chat("a long story", {{"stream", true}, {"max_tokens", 400}}).dump();
  std::string raw = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                    std::to_string(req_body.size()) + "\r\n\r\n" + req_body;
  std::vector<std::thread> clients;
  for (int i = 0; i < 50; ++i) {
    clients.emplace_back([&] {
      RawResult r = raw_exchange(srv.port(), raw, std::chrono::milliseconds(150));  // read a little, then close
      EXPECT_NE(r.data.find("data: "), std::string::npos);
    });
  }
  for (auto& t : clients) t.join();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  runtime::EngineStats st;
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    st = srv.engine().stats();
  } while ((st.running > 0 || st.kv_blocks_used > 0) && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(st.running, 0);
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_GE(srv.engine().cancels(), 50);
  auto r = post_json(srv.port(), "/v1/chat/completions", chat("SCRIPT:still here"));
  EXPECT_EQ(r.json()["choices"][0]["message"]["content"], "still here");
  std::string metrics = http_request(srv.port(), "GET", "/metrics").body;
  EXPECT_NE(metrics.find("frugal_num_requests_running 0"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("frugal_kv_cache_blocks_used 0"), std::string::npos);
}

}  // namespace
}  // namespace frugal::server::testing
