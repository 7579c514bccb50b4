// The OpenAI-compatible API on top of the HTTP transport: routes, authentication, prompt
// building (chat template, BOS handling, context checks), /health, /metrics, /v1/models.
//
// The server can run before the engine exists: /health and generation answer 503 until
// set_engine() is called, so a client can watch a model load.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "runtime/engine.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/text_codec.h"

namespace frugal::server {

enum class ReasoningFormat {
  kAuto,      // split when the chat template mentions <think> (DeepSeek-R1 and its distills)
  kNone,      // raw text in content
  kDeepseek,  // always split
};
Result<ReasoningFormat> parse_reasoning_format(const std::string& name);

struct ApiServerConfig {
  HttpServerConfig http;
  std::string served_model_name = "frugal";
  std::string api_key;  // empty: no authentication
  ReasoningFormat reasoning = ReasoningFormat::kAuto;
};

class ApiServer {
 public:
  // Starts listening (health 503 until an engine is set).
  static Result<std::unique_ptr<ApiServer>> start(ApiServerConfig cfg);
  ~ApiServer();
  // The engine and codec must outlive the server; call stop() before shutting the engine down.
  void set_engine(runtime::Engine* engine, const TextCodec* codec);
  uint16_t port() const { return http_->port(); }
  void stop();

 private:
  explicit ApiServer(ApiServerConfig cfg);
  asio::awaitable<void> handle(HttpRequest& req, HttpConnection& conn);
  asio::awaitable<int> handle_generate(HttpRequest& req, HttpConnection& conn, bool chat);
  HttpResponse models_response(bool keep_alive) const;

  ApiServerConfig cfg_;
  std::string fingerprint_;
  Metrics metrics_;
  std::atomic<runtime::Engine*> engine_{nullptr};
  std::atomic<const TextCodec*> codec_{nullptr};
  bool reasoning_enabled_ = false;
  int64_t created_ = 0;
  std::unique_ptr<HttpServer> http_;
};

}  // namespace frugal::server
