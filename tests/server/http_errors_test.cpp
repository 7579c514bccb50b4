// Raw HTTP error cases against the server library (fake engine in-process): each returns the
// status and OpenAI error object the API reference specifies, and the server keeps serving.
#include <random>
#include <thread>

#include <boost/asio.hpp>

#include <gtest/gtest.h>

#include "http_client.h"

namespace frugal::server::testing {
namespace {
using nlohmann::json;

json chat_body() {
  return {{"model", "fake-model"}, {"max_tokens", 4}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
}

void expect_error(const HttpResult& r, int status, const std::string& type = "") {
  EXPECT_EQ(r.status, status) << r.body;
  json j = r.json();
  ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
  const json& e = j["error"];
  EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty());
  EXPECT_TRUE(e.contains("type") && e.contains("param") && e.contains("code")) << r.body;
  if (!type.empty()) {
    EXPECT_EQ(e["type"], type);
  }
}

TEST(HttpErrors, MalformedJsonWrongTypesOutOfRange) {
  InProcessServer srv;
  expect_error(http_request(srv.port(), "POST", "/v1/chat/completions", "{\"model\": \"fake-model\", "), 400, "invalid_request_error");
  auto b = chat_body();
  b["temperature"] = "warm";
  auto r = post_json(srv.port(), "/v1/chat/completions", b);
  expect_error(r, 400);
  EXPECT_EQ(r.json()["error"]["param"], "temperature");
  b = chat_body();
  b["top_p"] = 1.5;
  r = post_json(srv.port(), "/v1/chat/completions", b);
  expect_error(r, 400);
  EXPECT_EQ(r.json()["error"]["param"], "top_p");
  r = post_json(srv.port(), "/v1/completions", {{"model", "fake-model"}, {"prompt", "x"}, {"n", 99}});
  expect_error(r, 400);
  EXPECT_EQ(r.json()["error"]["param"], "n");
}

TEST(HttpErrors, PromptLongerThanContext) {
  TestServerOptions o;
  o.engine.max_model_len = 64;
  InProcessServer srv(o);
  auto r = post_json(srv.port(), "/v1/completions", {{"model", "fake-model"}, {"prompt", std::string(100, 'a')}});
  expect_error(r, 400);
  EXPECT_EQ(r.json()["error"]["code"], "context_length_exceeded");
  r = post_json(srv.port(), "/v1/completions", {{"model", "fake-model"}, {"prompt", "short"}, {"max_tokens", 100}});
  expect_error(r, 400);
  EXPECT_EQ(r.json()["error"]["code"], "context_length_exceeded");
}

TEST(HttpErrors, ApiKey) {
  TestServerOptions o;
  o.api.api_key = "sekret";
  InProcessServer srv(o);
  auto r = post_json(srv.port(), "/v1/chat/completions", chat_body());
  expect_error(r, 401);
  EXPECT_EQ(r.json()["error"]["code"], "invalid_api_key");
  expect_error(post_json(srv.port(), "/v1/chat/completions", chat_body(), {{"Authorization", "Bearer wrong"}}), 401);
  expect_error(post_json(srv.port(), "/v1/chat/completions", chat_body(), {{"Authorization", "sekret"}}), 401);
  expect_error(http_request(srv.port(), "GET", "/v1/models"), 401);
  EXPECT_EQ(post_json(srv.port(), "/v1/chat/completions", chat_body(), {{"Authorization", "Bearer sekret"}}).status, 200);
  EXPECT_EQ(http_request(srv.port(), "GET", "/health").status, 200);  // health stays open
}

TEST(HttpErrors, UnknownRouteModelAndMethod) {
  InProcessServer srv;
  expect_error(http_request(srv.port(), "GET", "/v1/nothing"), 404);
  expect_error(http_request(srv.port(), "POST", "/v2/chat/completions", chat_body().dump()), 404);
  auto b = chat_body();
  b["model"] = "gpt-17";
  auto r = post_json(srv.port(), "/v1/chat/completions", b);
  expect_error(r, 404);
  EXPECT_EQ(r.json()["error"]["code"], "model_not_found");
  r = http_request(srv.port(), "GET", "/v1/chat/completions");
  expect_error(r, 405);
  EXPECT_EQ(r.headers["Allow"], "POST");
  expect_error(http_request(srv.port(), "DELETE", "/v1/models"), 405);
}

TEST(HttpErrors, BodyTooLarge) {
  InProcessServer srv;  // default limit: 4 MiB
  std::string big = "{\"model\":\"fake-model\",\"prompt\":\"" + std::string((4u << 20) + 10, 'a') + "\"}";
  expect_error(http_request(srv.port(), "POST", "/v1/completions", big), 413);
  EXPECT_EQ(http_request(srv.port(), "GET", "/health").status, 200);
}

TEST(HttpErrors, HeadersTooLarge) {
  InProcessServer srv;  // default header limit: 16 KiB
  auto r = http_request(srv.port(), "GET", "/health", "", {{"X-Big", std::string(32 << 10, 'h')}});
  expect_error(r, 431);
  EXPECT_EQ(http_request(srv.port(), "GET", "/health").status, 200);
}

TEST(HttpErrors, IdleConnectionIsClosed) {
  TestServerOptions o;
  o.api.http.idle_timeout = std::chrono::milliseconds(300);
  InProcessServer srv(o);
  auto t0 = std::chrono::steady_clock::now();
  RawResult r = raw_exchange(srv.port(), "", std::chrono::milliseconds(5000));
  auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_TRUE(r.closed_by_server);
  EXPECT_LT(waited, std::chrono::milliseconds(3000));
  // A slow request (headers never finished) is closed too.
  r = raw_exchange(srv.port(), "GET /health HTTP/1.1\r\nHost: x\r\n", std::chrono::milliseconds(5000));
  EXPECT_TRUE(r.closed_by_server);
}

TEST(HttpErrors, TooManyConnectionsIs503) {
  TestServerOptions o;
  o.api.http.max_connections = 2;
  InProcessServer srv(o);
  boost::asio::io_context ioc;
  std::vector<boost::asio::ip::tcp::socket> held;
  for (int i = 0; i < 2; ++i) {
    held.emplace_back(ioc);
    held.back().connect({boost::asio::ip::make_address("127.0.0.1"), srv.port()});
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // its session has started
  }
  RawResult r = raw_exchange(srv.port(), "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", std::chrono::milliseconds(3000));
  EXPECT_NE(r.data.find("HTTP/1.1 503"), std::string::npos) << r.data;
  EXPECT_NE(r.data.find("too_many_connections"), std::string::npos);
  held.clear();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(http_request(srv.port(), "GET", "/health").status, 200);
}

TEST(HttpErrors, QueueFullIs429) {
  TestServerOptions o;
  o.engine.max_queue = 0;  // every submit is refused
  InProcessServer srv(o);
  auto r = post_json(srv.port(), "/v1/chat/completions", chat_body());
  expect_error(r, 429);
}

TEST(HttpErrors, LoadingIs503) {
  ApiServerConfig cfg;
  cfg.http.port = 0;
  auto s = ApiServer::start(cfg);
  ASSERT_TRUE(s.is_ok());
  expect_error(http_request((*s)->port(), "GET", "/health"), 503);
  expect_error(post_json((*s)->port(), "/v1/chat/completions", chat_body()), 503);
  (*s)->stop();
}

TEST(HttpErrors, KeepAliveServesSeveralRequests) {
  InProcessServer srv;
  std::string req = "GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  RawResult r = raw_exchange(srv.port(), req, std::chrono::milliseconds(3000));
  size_t first = r.data.find("HTTP/1.1 200");
  ASSERT_NE(first, std::string::npos) << r.data;
  EXPECT_NE(r.data.find("HTTP/1.1 200", first + 1), std::string::npos) << r.data;
  EXPECT_NE(r.data.find("\"object\":\"list\""), std::string::npos);
}

TEST(HttpErrors, ExpectContinueIsAnswered) {
  InProcessServer srv;
  std::string body = "{\"model\":\"fake-model\",\"prompt\":\"SCRIPT:ok\"}";
  std::string head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n"
                     "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
  RawResult r = raw_exchange(srv.port(), head, std::chrono::milliseconds(500));  // no body sent
  EXPECT_NE(r.data.find("HTTP/1.1 100 Continue"), std::string::npos) << r.data;
}

// Random and mutated bodies, bounded in count and time: never a crash, never a 5xx, always an
// error object for a non-200, and /health answers afterwards.
TEST(HttpErrors, FuzzBodies) {
  InProcessServer srv;
  std::mt19937 rng(1234);
  const std::vector<std::string> seeds = {
      chat_body().dump(),
      json({{"model", "fake-model"}, {"prompt", json::array({1, 2, 3})}, {"max_tokens", 3}, {"logprobs", 2}}).dump(),
      json({{"model", "fake-model"}, {"max_tokens", 2}, {"stream", true}, {"stop", json::array({"a", "b"})},
            {"messages", json::array({{{"role", "system"}, {"content", json::array({{{"type", "text"}, {"text", "s"}}})}}})}}).dump()};
  const std::string alphabet = "{}[]\":,0123456789.-eE truefalsnl\\u\x01\xff";
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int n = 0;
  for (; n < 400 && std::chrono::steady_clock::now() < deadline; ++n) {
    std::string body = seeds[rng() % seeds.size()];
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits && !body.empty(); ++k) {
      size_t pos = rng() % body.size();
      switch (rng() % 3) {
        case 0: body[pos] = alphabet[rng() % alphabet.size()]; break;
        case 1: body.erase(pos, 1 + rng() % 8); break;
        default: body.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
      }
    }
    const char* path = (rng() % 2) ? "/v1/chat/completions" : "/v1/completions";
    HttpResult r = http_request(srv.port(), "POST", path, body);
    ASSERT_NE(r.status, 0) << "no response for body: " << body;
    ASSERT_LT(r.status, 500) << body << "\n" << r.body;
    if (r.status != 200) {
      json j = r.json();
      ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
    }
  }
  EXPECT_GE(n, 50);
  EXPECT_EQ(http_request(srv.port(), "GET", "/health").status, 200);
}

}  // namespace
}  // namespace frugal::server::testing
