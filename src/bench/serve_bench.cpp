#include "bench/serve_bench.h"

#include <unistd.h>

#include <cmath>
#include <ctime>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "bench/serve_runner.h"
#include "bench/telemetry.h"
#include "plan/catalog.h"

#ifndef FRUGAL_VERSION
#define FRUGAL_VERSION "unknown"
#endif

namespace frugal::bench {

using json = nlohmann::json;

namespace {
std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    out.push_back(item);
  }
  if (!s.empty() && s.back() == ',') out.emplace_back();  // "2," has an empty last item
  return out;
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string host_name() {
  char buf[256] = {0};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

Result<CostSpec> cost_spec(const ServeBenchOptions& o) {
  CostSpec c;
  if (o.gpus < 1) return invalid_argument("--gpus must be >= 1, got " + std::to_string(o.gpus));
  c.gpus = o.gpus;
  if (o.price_per_hour < 0 && o.price_per_hour != -1) {
    return invalid_argument(fmt::format("--price-per-hour must be >= 0 USD, got {:g}", o.price_per_hour));
  }
  if (!o.gpu.empty()) {
    const std::string dir = o.catalog_dir.empty() ? plan::default_catalog_dir() : o.catalog_dir;
    FRUGAL_ASSIGN_OR_RETURN(auto gpus, plan::load_gpu_catalog(dir));
    auto g = plan::find_gpu(gpus, o.gpu);
    if (!g.is_ok()) return g.status().with_context("--gpu");
    c.gpu = g->name;
    c.usd_per_hour = g->price_usd_per_hour * o.gpus;
    c.price_source = g->price_source + " (" + g->price_date + ")";
  }
  if (o.price_per_hour >= 0) {
    c.usd_per_hour = o.price_per_hour * o.gpus;
    c.price_source = "--price-per-hour";
  }
  return c;
}

struct ServerInfo {
  std::string model;
  std::string server_header;
  json models = nullptr;
};

// GET /v1/models: proves the server is reachable and names the model when none was given.
Result<ServerInfo> probe_server(const Url& url, const std::map<std::string, std::string>& headers,
                                const std::string& model) {
  HttpStreamRequest req{.method = "GET", .target = join_target(url.path, "/v1/models"), .headers = headers,
                        .timeout = std::chrono::milliseconds(30000)};
  HttpSimpleResult r = http_simple(url, req);
  if (r.r.status == 0) return io_error("--url " + url.to_string() + ": " + r.r.error_message);
  ServerInfo info{.model = model, .server_header = r.r.server_header};
  json j = json::parse(r.body, nullptr, false);
  if (r.r.status == 200 && !j.is_discarded()) info.models = j;
  if (r.r.status == 401 || r.r.status == 403) {
    return invalid_argument(fmt::format("--url {}: the server refused GET /v1/models with HTTP {} (check --api-key)",
                                        url.to_string(), r.r.status));
  }
  if (info.model.empty()) {
    if (!j.is_discarded() && j.contains("data") && j["data"].is_array() && !j["data"].empty() && j["data"][0].contains("id")) {
      info.model = j["data"][0]["id"].get<std::string>();
    } else {
      return invalid_argument(fmt::format("--model not given and GET {}/v1/models (HTTP {}) named no model",
                                          url.to_string(), r.r.status));
    }
  }
  return info;
}
Status validate(const ServeBenchOptions& o) {
  for (double r : o.request_rates) {
    if (!(r > 0)) return invalid_argument(fmt::format("--request-rate must be > 0 or inf, got {:g}", r));
  }
  for (int32_t c : o.max_concurrency) {
    if (c < 0) return invalid_argument("--max-concurrency must be >= 1 (0 = unlimited), got " + std::to_string(c));
  }
  if (o.duration_s < 0) return invalid_argument(fmt::format("--duration must be > 0 seconds, got {:g}", o.duration_s));
  for (double r : o.request_rates) {
    for (int32_t c : o.max_concurrency) {
      if (o.duration_s > 0 && std::isinf(r) && c == 0) {
        return invalid_argument("--duration with --request-rate inf needs a --max-concurrency (else requests never stop coming)");
      }
    }
  }
  if (o.duration_s == 0 && o.num_prompts < 1) return invalid_argument("--num-prompts must be >= 1, got " + std::to_string(o.num_prompts));
  if (o.timeout_s <= 0) return invalid_argument(fmt::format("--timeout must be > 0 seconds, got {:g}", o.timeout_s));
  if (o.n < 1) return invalid_argument("--n must be >= 1, got " + std::to_string(o.n));
  if (o.slo.ttft_ms < 0 || o.slo.tpot_ms < 0 || o.slo.e2e_ms < 0) return invalid_argument("SLOs (--slo-*-ms) must be >= 0");
  if (o.telemetry_interval_ms < 10) {
    return invalid_argument("--telemetry-interval-ms must be >= 10, got " + std::to_string(o.telemetry_interval_ms));
  }
  return Status::ok();
}

Result<std::vector<BenchPrompt>> load_prompts(const ServeBenchOptions& o, const Tokenizer* tok, Endpoint ep) {
  const int32_t n_needed = o.duration_s > 0 ? std::max(o.num_prompts, 1000) : o.num_prompts;
  if (o.dataset == "random") {
    RandomDatasetOptions ro = o.random;
    ro.num_prompts = n_needed;
    ro.seed = o.seed;
    return random_dataset(ro, tok, ep);
  }
  return jsonl_dataset(o.dataset, o.prompt_field, o.random.output_len, n_needed, tok, ep);
}

struct RunContext {
  Url url;
  Endpoint endpoint;
  ServerInfo server;
  CostSpec cost;
  json extra_body;
  size_t distinct_prompts = 0;
  std::vector<std::string> devices;
  std::string started_at;
};

// The exact configuration, for the report.
json config_json(const ServeBenchOptions& o, const RunContext& c) {
  json rates = json::array(), concs = json::array();
  for (double r : o.request_rates) rates.push_back(std::isfinite(r) ? json(r) : json("inf"));
  for (int32_t n : o.max_concurrency) concs.push_back(n > 0 ? json(n) : json(nullptr));
  json config = {
      {"schema", "frugal bench serve v1"},
      {"url", c.url.to_string()},
      {"endpoint", endpoint_path(c.endpoint)},
      {"model", c.server.model},
      {"server_header", c.server.server_header},
      {"server_models", c.server.models},
      {"dataset", o.dataset},
      {"prompt_field", o.prompt_field},
      {"tokenizer", o.tokenizer_dir.empty() ? json(nullptr) : json(o.tokenizer_dir)},
      {"random", {{"input_len", o.random.input_len}, {"output_len", o.random.output_len},
                  {"range_ratio", o.random.range_ratio}, {"fallback_vocab", o.random.fallback_vocab}}},
      {"output_len", o.random.output_len},
      {"num_prompts", o.num_prompts},
      {"distinct_prompts", c.distinct_prompts},
      {"duration_s", o.duration_s > 0 ? json(o.duration_s) : json(nullptr)},
      {"request_rates", rates},
      {"max_concurrency", concs},
      {"seed", o.seed},
      {"timeout_s", o.timeout_s},
      {"temperature", o.temperature},
      {"n", o.n},
      {"ignore_eos", o.ignore_eos},
      {"include_usage", o.include_usage},
      {"extra_body", c.extra_body},
      {"slo_ms", {{"ttft", o.slo.ttft_ms}, {"tpot", o.slo.tpot_ms}, {"e2e", o.slo.e2e_ms}}},
      {"gpu", o.gpu.empty() ? json(nullptr) : json(c.cost.gpu)},
      {"gpus", o.gpus},
      {"price_usd_per_hour_total", c.cost.usd_per_hour > 0 ? json(c.cost.usd_per_hour) : json(nullptr)},
      {"devices", c.devices},
      {"host", host_name()},
      {"frugal_version", FRUGAL_VERSION},
      {"command_line", o.command_line},
      {"started_at", c.started_at},
  };
  return config;
}
}  // namespace

Result<std::vector<double>> parse_rates(const std::string& s) {
  std::vector<double> out;
  for (const auto& item : split(s)) {
    if (item == "inf" || item == "Inf" || item == "INF") {
      out.push_back(std::numeric_limits<double>::infinity());
      continue;
    }
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(item, &used);
    } catch (...) {
      used = 0;
    }
    if (used != item.size() || item.empty() || !(v > 0) || !std::isfinite(v)) {
      return invalid_argument("--request-rate '" + item + "': expected a positive number of requests/s or inf");
    }
    out.push_back(v);
  }
  if (out.empty()) return invalid_argument("--request-rate: no rate given");
  return out;
}

Result<std::vector<int32_t>> parse_concurrency(const std::string& s) {
  std::vector<int32_t> out;
  for (const auto& item : split(s)) {
    size_t used = 0;
    long v = 0;
    try {
      v = std::stol(item, &used);
    } catch (...) {
      used = 0;
    }
    if (used != item.size() || item.empty() || v < 0 || v > 1000000) {
      return invalid_argument("--max-concurrency '" + item + "': expected a whole number >= 1 (0 = unlimited)");
    }
    out.push_back(static_cast<int32_t>(v));
  }
  if (out.empty()) return invalid_argument("--max-concurrency: no value given");
  return out;
}

Result<json> run_serve_bench(const ServeBenchOptions& o) {
  const std::string started_at = utc_now();
  FRUGAL_ASSIGN_OR_RETURN(Url url, parse_url(o.url));
  FRUGAL_ASSIGN_OR_RETURN(Endpoint ep, parse_endpoint(o.endpoint));
  FRUGAL_RETURN_IF_ERROR(validate(o));
  FRUGAL_ASSIGN_OR_RETURN(CostSpec cost, cost_spec(o));
  json extra = json::object();
  if (!o.extra_body.empty()) {
    extra = json::parse(o.extra_body, nullptr, false);
    if (extra.is_discarded() || !extra.is_object()) return invalid_argument("--extra-body: expected a JSON object");
  }
  std::unique_ptr<Tokenizer> tok;
  if (!o.tokenizer_dir.empty()) {
    auto t = Tokenizer::load(o.tokenizer_dir);
    if (!t.is_ok()) return t.status().with_context("--tokenizer " + o.tokenizer_dir);
    tok = std::move(t).value();
  }
  FRUGAL_ASSIGN_OR_RETURN(std::vector<BenchPrompt> prompts, load_prompts(o, tok.get(), ep));
  std::map<std::string, std::string> headers;
  if (!o.api_key.empty()) headers["Authorization"] = "Bearer " + o.api_key;
  FRUGAL_ASSIGN_OR_RETURN(ServerInfo server, probe_server(url, headers, o.model));

  RequestOptions rq{.endpoint = ep, .model = server.model, .temperature = o.temperature, .n = o.n,
                    .ignore_eos = o.ignore_eos, .include_usage = o.include_usage, .extra_body = extra};
  ReportOptions rep_opts{.slo = o.slo, .cost = cost, .window_s = o.window_s};
  std::vector<std::string> devices;
  json runs = json::array();
  for (double rate : o.request_rates) {
    for (int32_t conc : o.max_concurrency) {
      LoadOptions lo{.url = url, .target = join_target(url.path, endpoint_path(ep)), .headers = headers, .request = rq,
                     .request_rate = rate, .max_concurrency = conc, .num_prompts = o.num_prompts,
                     .duration_s = o.duration_s, .timeout_s = o.timeout_s, .seed = o.seed, .progress = o.progress};
      lo.label = fmt::format("rate={} conc={}", std::isfinite(rate) ? fmt::format("{:g}", rate) : "inf",
                             conc > 0 ? std::to_string(conc) : "unlimited");
      std::unique_ptr<TelemetrySampler> tel =
          o.telemetry ? TelemetrySampler::with_nvml(std::chrono::milliseconds(o.telemetry_interval_ms))
                      : std::make_unique<TelemetrySampler>(nullptr, "disabled with --no-telemetry", std::chrono::milliseconds(0));
      tel->start();
      auto load = run_load(lo, prompts, tok.get());
      tel->stop();
      if (!load.is_ok()) return load.status();
      devices = tel->device_names();
      runs.push_back(run_report(*load, lo, rep_opts, tel->summary()));
    }
  }

  json config = config_json(o, {.url = url, .endpoint = ep, .server = server, .cost = cost, .extra_body = extra,
                                .distinct_prompts = prompts.size(), .devices = devices, .started_at = started_at});
  return json{{"config", config}, {"runs", runs}};
}

}  // namespace frugal::bench
