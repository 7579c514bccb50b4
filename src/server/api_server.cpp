#include "server/api_server.h"

#include <chrono>
#include <functional>

#include <fmt/format.h>

#include "core/log.h"
#include "server/generation.h"
#include "server/openai_errors.h"
#include "server/openai_params.h"
#include "server/openai_prompt.h"
#include "server/openai_responses.h"

namespace frugal::server {

namespace {
using nlohmann::json;

HttpResponse error_response(const ApiError& e, bool keep_alive) {
  return make_response(static_cast<http::status>(e.status), e.body(), keep_alive);
}

ApiError unavailable() {
  return ApiError{.status = 503, .message = "The model is still loading; retry shortly.",
                  .type = "server_error", .code = "model_loading"};
}

// Constant-time comparison: the API key should not leak through response timing.
bool same_key(std::string_view given, std::string_view key) {
  if (given.size() != key.size() || key.empty()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < key.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ key[i]);
  return diff == 0;
}

struct Route {
  const char* path;
  http::verb verb;
};
constexpr Route kRoutes[] = {
    {"/health", http::verb::get},           {"/metrics", http::verb::get},
    {"/v1/models", http::verb::get},        {"/v1/chat/completions", http::verb::post},
    {"/v1/completions", http::verb::post},
};
}  // namespace

Result<ReasoningFormat> parse_reasoning_format(const std::string& name) {
  if (name == "auto") return ReasoningFormat::kAuto;
  if (name == "none") return ReasoningFormat::kNone;
  if (name == "deepseek" || name == "deepseek_r1") return ReasoningFormat::kDeepseek;
  return invalid_argument("--reasoning-format must be auto, none or deepseek, got '" + name + "'");
}

ApiServer::ApiServer(ApiServerConfig cfg) : cfg_(std::move(cfg)) {
  created_ = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  fingerprint_ = fmt::format("fp_frugal_{:08x}", static_cast<uint32_t>(std::hash<std::string>{}(cfg_.served_model_name)));
}

ApiServer::~ApiServer() { stop(); }

Result<std::unique_ptr<ApiServer>> ApiServer::start(ApiServerConfig cfg) {
  std::unique_ptr<ApiServer> s(new ApiServer(std::move(cfg)));
  auto* self = s.get();
  FRUGAL_ASSIGN_OR_RETURN(s->http_, HttpServer::start(s->cfg_.http, [self](HttpRequest& req, HttpConnection& conn) {
                            return self->handle(req, conn);
                          }));
  return s;
}

void ApiServer::set_engine(runtime::Engine* engine, const TextCodec* codec) {
  const std::string tmpl = codec->chat_template();
  reasoning_enabled_ = cfg_.reasoning == ReasoningFormat::kDeepseek ||
                       (cfg_.reasoning == ReasoningFormat::kAuto && tmpl.find("<think>") != std::string::npos);
  codec_.store(codec);
  engine_.store(engine);  // last: handlers see a codec whenever they see an engine
}

void ApiServer::stop() {
  if (http_) http_->stop();
}

HttpResponse ApiServer::models_response(bool keep_alive) const {
  json model = {{"id", cfg_.served_model_name}, {"object", "model"}, {"created", created_}, {"owned_by", "frugal"}};
  if (auto* e = engine_.load()) model["max_model_len"] = e->max_model_len();
  json body = {{"object", "list"}, {"data", json::array({model})}};
  return make_response(http::status::ok, dump_json(body), keep_alive);
}

asio::awaitable<void> ApiServer::handle(HttpRequest& req, HttpConnection& conn) {
  std::string_view target = req.target();
  std::string path(target.substr(0, target.find('?')));
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const bool ka = conn.keep_alive();
  const Route* route = nullptr;
  for (const auto& r : kRoutes) {
    if (path == r.path) route = &r;
  }
  if (!route) {
    ApiError e = not_found_error("Unknown route " + std::string(req.method_string()) + " " + path + ".", "unknown_route");
    metrics_.count_request("other", 404);
    {
      HttpResponse res_ = error_response(e, ka);
      co_await conn.write(res_);
    }
    co_return;
  }
  if (req.method() != route->verb) {
    ApiError e{.status = 405, .message = "Method " + std::string(req.method_string()) + " is not allowed on " + path + "; use " +
                                         std::string(http::to_string(route->verb)) + ".",
               .code = "method_not_allowed"};
    auto res = error_response(e, ka);
    res.set(http::field::allow, http::to_string(route->verb));
    metrics_.count_request(path, 405);
    co_await conn.write(res);
    co_return;
  }
  if (path.starts_with("/v1/") && !cfg_.api_key.empty()) {
    std::string_view auth = req[http::field::authorization];
    constexpr std::string_view kBearer = "Bearer ";
    if (!auth.starts_with(kBearer) || !same_key(auth.substr(kBearer.size()), cfg_.api_key)) {
      ApiError e{.status = 401,
                 .message = auth.empty() ? "You didn't provide an API key. Provide it in the Authorization header (Bearer KEY)."
                                         : "Incorrect API key provided.",
                 .code = "invalid_api_key"};
      metrics_.count_request(path, 401);
      {
        HttpResponse res_ = error_response(e, ka);
        co_await conn.write(res_);
      }
      co_return;
    }
  }
  runtime::Engine* engine = engine_.load();
  int status = 200;
  if (path == "/health") {
    status = engine ? 200 : 503;
    {
      HttpResponse res_ = engine ? make_response(http::status::ok, "{\"status\":\"ok\"}", ka) : error_response(unavailable(), ka);
      co_await conn.write(res_);
    }
  } else if (path == "/metrics") {
    std::string text = metrics_.render(engine ? engine->stats() : runtime::EngineStats{});
    {
      HttpResponse res_ = make_response(http::status::ok, std::move(text), ka, "text/plain; version=0.0.4; charset=utf-8");
      co_await conn.write(res_);
    }
  } else if (path == "/v1/models") {
    {
      HttpResponse res_ = models_response(ka);
      co_await conn.write(res_);
    }
  } else {
    status = co_await handle_generate(req, conn, path == "/v1/chat/completions");
  }
  metrics_.count_request(path, status);
}

asio::awaitable<int> ApiServer::handle_generate(HttpRequest& req, HttpConnection& conn, bool chat) {
  const bool ka = conn.keep_alive();
  runtime::Engine* engine = engine_.load();
  if (!engine) {
    {
      HttpResponse res_ = error_response(unavailable(), ka);
      co_await conn.write(res_);
    }
    co_return 503;
  }
  const TextCodec& codec = *codec_.load();
  auto parsed = parse_completion_request(chat ? Endpoint::kChat : Endpoint::kCompletions, req.body());
  ApiError* e = std::get_if<ApiError>(&parsed);
  if (e) {
    {
      HttpResponse res_ = error_response(*e, ka);
      co_await conn.write(res_);
    }
    co_return e->status;
  }
  auto& p = std::get<CompletionParams>(parsed);
  if (p.model && *p.model != cfg_.served_model_name) {
    ApiError unknown = not_found_error("The model `" + *p.model + "` does not exist (this server serves `" +
                                       cfg_.served_model_name + "`).", "model_not_found");
    unknown.param = "model";
    {
      HttpResponse res_ = error_response(unknown, ka);
      co_await conn.write(res_);
    }
    co_return 404;
  }
  auto built = build_prompts(p, codec, engine->max_model_len());
  e = std::get_if<ApiError>(&built);
  if (e) {
    {
      HttpResponse res_ = error_response(*e, ka);
      co_await conn.write(res_);
    }
    co_return e->status;
  }
  auto& prompts = std::get<std::vector<BuiltPrompt>>(built);
  GenerationPlan plan{.endpoint = p.endpoint, .model = cfg_.served_model_name, .system_fingerprint = fingerprint_,
                      .stream = p.stream, .include_usage = p.include_usage, .logprobs = p.logprobs >= 0,
                      .reasoning = chat && reasoning_enabled_, .stop = p.stop};
  for (size_t i = 0; i < prompts.size(); ++i) {
    plan.prompt_tokens.push_back(static_cast<int32_t>(prompts[i].tokens.size()));
    plan.echo_prefix.push_back(p.echo ? prompts[i].text : std::string());
    for (int32_t k = 0; k < p.n; ++k) {
      ChoicePlan c{.prompt_index = static_cast<int32_t>(i), .request = {.prompt = prompts[i].tokens, .sampling = p.sampling},
                   .opens_think = prompts[i].opens_think};
      c.request.sampling.max_tokens = prompts[i].max_tokens;
      c.request.sampling.top_logprobs = p.logprobs;
      // n independent samples: distinct but reproducible seeds.
      if (p.sampling.seed) c.request.sampling.seed = *p.sampling.seed + static_cast<uint64_t>(k);
      plan.choices.push_back(std::move(c));
    }
  }
  GenerationServices svc{*engine, codec, metrics_};
  int status = co_await run_generation(plan, svc, conn);
  co_return status;
}

}  // namespace frugal::server
