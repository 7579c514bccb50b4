// `frugal bench serve` against a scripted fake OpenAI server: it relies on nothing frugal-specific.
// Streams without usage (token counts from the tokenizer or from chunks), SSE comments and
// keep-alive blank lines, several choices interleaved, events split across TCP writes and HTTP
// chunks, errors in mid-stream and as HTTP statuses, cut streams, timing and concurrency limits.
#include <gtest/gtest.h>

#include "bench/serve_bench.h"
#include "fake_openai_server.h"
#include "test_paths.h"

namespace frugal::bench {
namespace {

using json = nlohmann::json;
using testing::FakeOpenAiServer;
using testing::ScriptedResponse;

std::string sse(const json& j) { return "data: " + j.dump() + "\n\n"; }
std::string text_chunk(const std::string& text, int index = 0) {
  return sse({{"object", "text_completion"}, {"choices", {{{"index", index}, {"text", text}, {"finish_reason", nullptr}}}}});
}
const std::string kDone = "data: [DONE]\n\n";

ServeBenchOptions options(const FakeOpenAiServer& server, int n_prompts) {
  ServeBenchOptions o;
  o.url = server.url();
  o.num_prompts = n_prompts;
  o.random.input_len = 8;
  o.random.output_len = 4;
  o.telemetry = false;
  return o;
}

json run_ok(const ServeBenchOptions& o) {
  auto r = run_serve_bench(o);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  if (!r.is_ok()) return json::object();
  EXPECT_EQ(r->at("runs").size(), 1u);
  return (*r)["runs"][0];
}

std::unique_ptr<Tokenizer> stories_tokenizer() {
  auto t = Tokenizer::load(frugal::testing::source_root() + "/models/stories260K");
  EXPECT_TRUE(t.is_ok());
  return std::move(t).value();
}

// Text pieces whose token count (by the model's tokenizer) differs from the number of pieces.
const std::vector<std::string> kPieces = {"Once upon a", " time there was", " a little dog."};

TEST(BenchServeFake, NoUsageCountsTokensWithTheTokenizer) {
  FakeOpenAiServer server([](const std::string&) {
    ScriptedResponse r;
    for (const auto& p : kPieces) r.writes.push_back(text_chunk(p));
    r.writes.push_back(text_chunk("", 0));  // a finish-only chunk carries no token
    r.writes.push_back(kDone);
    return r;
  });
  auto tok = stories_tokenizer();
  const int64_t expected = static_cast<int64_t>(tok->encode("Once upon a time there was a little dog.").size());
  ASSERT_NE(expected, 3);
  auto o = options(server, 3);
  o.tokenizer_dir = frugal::testing::source_root() + "/models/stories260K";
  json run = run_ok(o);
  EXPECT_EQ(run["requests"]["completed"], 3);
  EXPECT_EQ(run["token_count_source"], "tokenizer");
  EXPECT_EQ(run["output_tokens"], 3 * expected);
  for (const auto& r : run["per_request"]) {
    EXPECT_EQ(r["output_tokens"], expected);
    EXPECT_EQ(r["chunks"], 3);
  }
  // Requests asked for what the brief promises, in OpenAI's schema.
  for (const auto& b : server.bodies()) {
    json j = json::parse(b);
    EXPECT_EQ(j["model"], "fake-model");  // from GET /v1/models
    EXPECT_EQ(j["stream"], true);
    EXPECT_EQ(j["max_tokens"], 4);
    EXPECT_TRUE(j["prompt"].is_string());  // text, since a tokenizer was given
  }

  auto plain = options(server, 2);  // no tokenizer: one token per content chunk
  json run2 = run_ok(plain);
  EXPECT_EQ(run2["token_count_source"], "chunks");
  EXPECT_EQ(run2["output_tokens"], 2 * 3);
}

TEST(BenchServeFake, UsageFromTheFinalChunkWins) {
  FakeOpenAiServer server([](const std::string&) {
    ScriptedResponse r;
    r.writes = {text_chunk("a"), text_chunk("b"),
                sse({{"choices", json::array()}, {"usage", {{"prompt_tokens", 11}, {"completion_tokens", 7}, {"total_tokens", 18}}}}),
                kDone};
    return r;
  });
  json run = run_ok(options(server, 2));
  EXPECT_EQ(run["token_count_source"], "usage");
  EXPECT_EQ(run["output_tokens"], 14);
  EXPECT_EQ(run["input_tokens"], 22);
  // TPOT = (e2e - ttft) / (7 - 1) for each request.
  for (const auto& r : run["per_request"]) {
    EXPECT_NEAR(r["tpot_ms"].get<double>(), (r["e2e_ms"].get<double>() - r["ttft_ms"].get<double>()) / 6, 1e-9);
  }
}

TEST(BenchServeFake, CommentsKeepAlivesAndCrlf) {
  FakeOpenAiServer server([](const std::string&) {
    ScriptedResponse r;
    r.writes = {": ping\n\n", "\n\n", "data: {\"choices\":[{\"index\":0,\"text\":\"x\"}]}\r\n\r\n", ": keep-alive\r\n\r\n", "\r\n",
                "data: {\"choices\":[{\"index\":0,\"text\":\"y\"}]}\n\n", ":\n\n", kDone};
    return r;
  });
  json run = run_ok(options(server, 2));
  EXPECT_EQ(run["requests"]["completed"], 2);
  EXPECT_EQ(run["errors"]["total"], 0);
  EXPECT_EQ(run["output_tokens"], 4);  // two content chunks each; comments count for nothing
}

TEST(BenchServeFake, SeveralChoicesInterleaved) {
  FakeOpenAiServer server([](const std::string&) {
    ScriptedResponse r;
    r.writes = {text_chunk("Once", 0), text_chunk("The", 1), text_chunk(" upon", 0), text_chunk(" dog", 1),
                text_chunk(" a time", 0), kDone};
    return r;
  });
  auto tok = stories_tokenizer();
  const int64_t expected = static_cast<int64_t>(tok->encode("Once upon a time").size() + tok->encode("The dog").size());
  auto o = options(server, 2);
  o.n = 2;
  o.tokenizer_dir = frugal::testing::source_root() + "/models/stories260K";
  json run = run_ok(o);
  EXPECT_EQ(run["requests"]["completed"], 2);
  for (const auto& r : run["per_request"]) {
    EXPECT_EQ(r["output_tokens"], expected);
    // Two choices decode side by side: TPOT over the average choice length.
    double per_choice = static_cast<double>(expected) / 2;
    EXPECT_NEAR(r["tpot_ms"].get<double>(), (r["e2e_ms"].get<double>() - r["ttft_ms"].get<double>()) / (per_choice - 1), 1e-9);
  }
  // ITL is per choice: choice 0 has 3 chunks (2 gaps), choice 1 has 2 (1 gap).
  EXPECT_EQ(run["latency_ms"]["itl"]["n"], 2 * 3);
  EXPECT_EQ(json::parse(server.bodies()[0])["n"], 2);
}

TEST(BenchServeFake, EventsSplitAcrossTcpWritesAndHttpChunks) {
  FakeOpenAiServer server([](const std::string&) {
    const std::string a = text_chunk("Hello"), b = text_chunk(" world");
    ScriptedResponse r;
    r.head = testing::kChunkedHead;
    // Cut inside "data:", inside the JSON, between the two newlines, and inside [DONE].
    r.writes = testing::chunked({a.substr(0, 3), a.substr(3, 10), a.substr(13, a.size() - 14), "\n" + b.substr(0, 1),
                                 b.substr(1) + kDone.substr(0, 9), kDone.substr(9)});
    return r;
  });
  json run = run_ok(options(server, 2));
  EXPECT_EQ(run["requests"]["completed"], 2);
  EXPECT_EQ(run["output_tokens"], 4);
  EXPECT_EQ(run["errors"]["total"], 0);
}

TEST(BenchServeFake, ErrorInMidStream) {
  FakeOpenAiServer server([](const std::string&) {
    ScriptedResponse r;
    r.writes = {text_chunk("a"), text_chunk("b"),
                sse({{"error", {{"message", "engine fell over"}, {"type", "server_error"}, {"code", 500}}}}), kDone};
    return r;
  });
  auto r = run_serve_bench(options(server, 3));
  ASSERT_TRUE(r.is_ok());
  const json& run = (*r)["runs"][0];
  EXPECT_EQ(run["requests"]["failed"], 3);
  EXPECT_EQ(run["errors"]["by_kind"]["stream_error"], 3);
  EXPECT_EQ(run["errors"]["list"][0]["message"], "engine fell over");
  EXPECT_EQ(run["output_tokens"], 0);
}

TEST(BenchServeFake, HttpErrorStatusAndMixedOutcomes) {
  std::atomic<int> calls{0};
  FakeOpenAiServer server([&](const std::string&) {
    ScriptedResponse r;
    if (calls++ % 2 == 1) {
      std::string body = R"({"error":{"message":"overloaded, retry later","type":"server_error"}})";
      r.head = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: " +
               std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
      r.writes = {body};
    } else {
      r.writes = {text_chunk("ok"), kDone};
    }
    return r;
  });
  auto o = options(server, 6);
  o.max_concurrency = {1};  // one at a time: alternate outcomes are deterministic
  json run = run_ok(o);
  EXPECT_EQ(run["requests"]["sent"], 6);
  EXPECT_EQ(run["requests"]["completed"], 3);
  EXPECT_EQ(run["errors"]["by_kind"]["http_503"], 3);
  EXPECT_EQ(run["errors"]["list"][0]["message"], "overloaded, retry later");
}

TEST(BenchServeFake, StreamCutBeforeDone) {
  FakeOpenAiServer server([](const std::string&) {
    ScriptedResponse r;
    r.writes = {text_chunk("a"), "data: {\"choices\":[{\"ind"};  // then the server closes
    return r;
  });
  auto r = run_serve_bench(options(server, 2));
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ((*r)["runs"][0]["errors"]["by_kind"]["incomplete_stream"], 2);
}

TEST(BenchServeFake, SlowServerTimesOut) {
  FakeOpenAiServer server([](const std::string&) {
    ScriptedResponse r;
    r.first_pause = std::chrono::milliseconds(700);
    r.writes = {text_chunk("late"), kDone};
    return r;
  });
  auto o = options(server, 2);
  o.timeout_s = 0.15;
  auto r = run_serve_bench(o);
  ASSERT_TRUE(r.is_ok());
  const json& run = (*r)["runs"][0];
  EXPECT_EQ(run["errors"]["by_kind"]["timeout"], 2);
  for (const auto& q : run["per_request"]) EXPECT_LT(q["e2e_ms"].get<double>(), 600);
}

TEST(BenchServeFake, ApiKeyIsSentAsBearer) {
  FakeOpenAiServer server([](const std::string&) {
    ScriptedResponse r;
    r.writes = {text_chunk("a"), kDone};
    return r;
  });
  auto o = options(server, 2);
  o.api_key = "sk-test-123";
  run_ok(o);
  EXPECT_EQ(server.authorizations(), (std::vector<std::string>{"Bearer sk-test-123", "Bearer sk-test-123"}));
}

TEST(BenchServeFake, TimingsFollowTheServersPauses) {
  FakeOpenAiServer server([](const std::string&) {
    ScriptedResponse r;
    r.first_pause = std::chrono::milliseconds(60);
    r.pause = std::chrono::milliseconds(30);
    r.writes = {text_chunk("a"), text_chunk("b"), text_chunk("c"), text_chunk("d"), kDone};
    return r;
  });
  auto o = options(server, 3);
  o.max_concurrency = {1};
  json run = run_ok(o);
  const json& l = run["latency_ms"];
  // Bytes cannot arrive before they are written: lower bounds are exact, upper bounds generous.
  EXPECT_GE(l["ttft"]["min"].get<double>(), 60);
  EXPECT_LT(l["ttft"]["max"].get<double>(), 60 + 1000);
  EXPECT_EQ(l["itl"]["n"], 3 * 3);
  EXPECT_GE(l["itl"]["median"]["value"].get<double>(), 25);
  EXPECT_GE(l["e2e"]["min"].get<double>(), 60 + 4 * 30);
  EXPECT_LE(l["ttft"]["median"]["value"].get<double>(), l["ttft"]["p90"]["value"].get<double>());
  EXPECT_LE(l["ttft"]["p90"]["value"].get<double>(), l["ttft"]["p99"]["value"].get<double>());
  EXPECT_LE(l["e2e"]["median"]["ci95"][0].get<double>(), l["e2e"]["median"]["value"].get<double>());
  EXPECT_GE(l["e2e"]["median"]["ci95"][1].get<double>(), l["e2e"]["median"]["value"].get<double>());
}

TEST(BenchServeFake, MaxConcurrencyIsHonouredAndSwept) {
  FakeOpenAiServer server([](const std::string&) {
    ScriptedResponse r;
    r.first_pause = std::chrono::milliseconds(80);
    r.writes = {text_chunk("a"), kDone};
    return r;
  });
  auto o = options(server, 6);
  o.max_concurrency = {2, 0};
  auto r = run_serve_bench(o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ((*r)["runs"].size(), 2u);
  EXPECT_EQ((*r)["runs"][0]["peak_concurrency"], 2);
  EXPECT_EQ((*r)["runs"][1]["peak_concurrency"], 6);  // unlimited, rate inf: all at once
  EXPECT_EQ(server.max_concurrent(), 6);
  // Three waves of 80 ms with two in flight, one wave with six.
  EXPECT_GE((*r)["runs"][0]["duration_s"].get<double>(), 3 * 0.08);
}

TEST(BenchServeFake, PoissonRateSpacesRequests) {
  FakeOpenAiServer server([](const std::string&) {
    ScriptedResponse r;
    r.writes = {text_chunk("a"), kDone};
    return r;
  });
  auto o = options(server, 40);
  o.request_rates = {200.0};
  json run = run_ok(o);
  std::vector<double> starts;
  for (const auto& q : run["per_request"]) starts.push_back(q["start_s"].get<double>());
  // 39 exponential gaps of mean 5 ms: their sum is ~195 ms (Gamma(39, 5 ms), sd ~31 ms).
  double span = starts.back() - starts.front();
  EXPECT_GT(span, 0.195 - 5 * 0.031);
  EXPECT_LT(span, 0.195 + 5 * 0.031 + 0.3);  // + scheduling slack on a busy machine
}

TEST(BenchServeFake, BadInputsNameWhatIsWrong) {
  FakeOpenAiServer server([](const std::string&) { return ScriptedResponse{}; });
  auto expect_error = [](ServeBenchOptions o, const std::string& needle) {
    auto r = run_serve_bench(o);
    ASSERT_FALSE(r.is_ok()) << needle;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  auto o = options(server, 2);
  auto bad = o;
  bad.request_rates = {-1};
  expect_error(bad, "--request-rate");
  bad = o;
  bad.gpu = "no-such-gpu";
  expect_error(bad, "no-such-gpu");
  bad = o;
  bad.price_per_hour = -3;
  expect_error(bad, "--price-per-hour");
  bad = o;
  bad.dataset = "/nonexistent/prompts.jsonl";
  expect_error(bad, "/nonexistent/prompts.jsonl");
  bad = o;
  bad.duration_s = 5;  // rate inf, unlimited concurrency: would never stop
  expect_error(bad, "--max-concurrency");
  bad = o;
  bad.endpoint = "/v1/embeddings";
  expect_error(bad, "--endpoint");
  bad = o;
  bad.tokenizer_dir = "/nonexistent/model";
  expect_error(bad, "--tokenizer");
  // A port nobody listens on.
  uint16_t dead_port = 0;
  {
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::acceptor a(ioc, {boost::asio::ip::make_address("127.0.0.1"), 0});
    dead_port = a.local_endpoint().port();
  }
  bad = o;
  bad.url = "http://127.0.0.1:" + std::to_string(dead_port);
  expect_error(bad, "--url http://127.0.0.1:" + std::to_string(dead_port));
}

}  // namespace
}  // namespace frugal::bench
