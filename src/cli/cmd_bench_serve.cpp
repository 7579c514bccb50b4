// `frugal bench serve`: load generator against any OpenAI-compatible server
// (src/bench/serve_bench.h, docs/bench_serve.md).
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>

#include "bench/serve_bench.h"
#include "bench/serve_svg.h"
#include "cli/commands.h"

namespace frugal::cli {
namespace {

struct BenchServeArgs {
  bench::ServeBenchOptions o;
  std::string rates = "inf";
  std::string concurrency = "0";
  std::string json_path, csv_path, markdown_path, svg_dir;
  bool no_progress = false;
  bool no_telemetry = false;
  bool no_usage = false;
};

// The command line as typed (from /proc), with the API key's value left out.
std::string command_line() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::string out;
  bool hide_next = false;
  size_t start = 0;
  while (start < all.size()) {
    size_t end = all.find('\0', start);
    if (end == std::string::npos) end = all.size();
    std::string arg = all.substr(start, end - start);
    start = end + 1;
    if (hide_next) {
      arg = "***";
      hide_next = false;
    } else if (arg == "--api-key") {
      hide_next = true;
    } else if (arg.rfind("--api-key=", 0) == 0) {
      arg = "--api-key=***";
    }
    if (!out.empty()) out += ' ';
    bool quote = arg.find_first_of(" \t\"'$") != std::string::npos;
    out += quote ? "'" + arg + "'" : arg;
  }
  return out;
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  if (!f) {
    std::fprintf(stderr, "frugal bench serve: cannot write %s\n", path.c_str());
    return false;
  }
  return true;
}

int run_bench_serve(BenchServeArgs& a) {
  auto& o = a.o;
  auto rates = bench::parse_rates(a.rates);
  auto conc = bench::parse_concurrency(a.concurrency);
  for (const Status& s : {rates.status(), conc.status()}) {
    if (!s.is_ok()) {
      std::fprintf(stderr, "frugal bench serve: %s\n", s.message().c_str());
      return 2;
    }
  }
  o.request_rates = *rates;
  o.max_concurrency = *conc;
  o.progress = !a.no_progress && isatty(STDERR_FILENO);
  o.telemetry = !a.no_telemetry;
  o.include_usage = !a.no_usage;
  o.command_line = command_line();
  auto r = bench::run_serve_bench(o);
  if (!r.is_ok()) {
    std::fprintf(stderr, "frugal bench serve: %s\n", r.status().message().c_str());
    return 1;
  }
  const nlohmann::json& rep = *r;
  std::fputs(bench::format_serve_table(rep).c_str(), stdout);
  bool ok = true;
  // Server messages quoted in errors may end inside a UTF-8 character: replace, never throw.
  if (!a.json_path.empty()) ok &= write_file(a.json_path, rep.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  if (!a.csv_path.empty()) ok &= write_file(a.csv_path, bench::format_serve_csv(rep));
  if (!a.markdown_path.empty()) ok &= write_file(a.markdown_path, bench::format_serve_markdown(rep));
  if (!a.svg_dir.empty()) {
    auto w = bench::write_serve_svgs(rep, a.svg_dir);
    if (!w.is_ok()) {
      std::fprintf(stderr, "frugal bench serve: %s\n", w.status().message().c_str());
      ok = false;
    }
  }
  int64_t completed = 0;
  for (const auto& run : rep["runs"]) completed += run["requests"]["completed"].get<int64_t>();
  if (completed == 0) {
    std::fprintf(stderr, "frugal bench serve: every request failed (see the errors above)\n");
    return 1;
  }
  return ok ? 0 : 1;
}

}  // namespace

void register_bench_serve(CLI::App& bench) {
  auto a = std::make_shared<BenchServeArgs>();
  auto& o = a->o;
  auto* s = bench.add_subcommand("serve", "Load generator against any OpenAI-compatible server (frugal, vLLM, llama-server)");
  s->add_option("--url", o.url, "server base URL, e.g. http://127.0.0.1:8000 or http://host:8000/v1")->required();
  s->add_option("--model", o.model, "model name sent in requests (default: the first of GET /v1/models)");
  s->add_option("--api-key", o.api_key, "bearer token (default: $OPENAI_API_KEY)")->envname("OPENAI_API_KEY");
  s->add_option("--endpoint", o.endpoint, "/v1/completions | /v1/chat/completions")->capture_default_str();
  s->add_option("--dataset", o.dataset, "random, or a JSONL file of prompts or chats")->capture_default_str();
  s->add_option("--prompt-field", o.prompt_field, "JSONL field with the prompt (default: prompt|question|text|input|messages)");
  s->add_option("--tokenizer", o.tokenizer_dir, "HF model directory: random prompts as text, token counts when the server sends no usage");
  s->add_option("--input-len", o.random.input_len, "random dataset: prompt tokens")->capture_default_str();
  s->add_option("--output-len", o.random.output_len, "max_tokens of every request (ignore_eos keeps it exact)")->capture_default_str();
  s->add_option("--range-ratio", o.random.range_ratio, "random dataset: lengths uniform in len*(1-r)..len*(1+r)")->capture_default_str();
  s->add_option("--random-vocab-size", o.random.fallback_vocab, "random dataset without --tokenizer: token ids in [3, N)")->capture_default_str();
  s->add_option("--num-prompts", o.num_prompts, "requests per run")->capture_default_str();
  s->add_option("--duration", o.duration_s, "soak mode: send for this many seconds (drift report)");
  s->add_option("--window", o.window_s, "soak window in seconds (default: duration / 10)");
  s->add_option("--request-rate", a->rates, "requests/s, Poisson (seeded), or inf; a list sweeps (\"2,8,inf\")")->capture_default_str();
  s->add_option("--max-concurrency", a->concurrency, "requests in flight at most (0 = unlimited); a list sweeps (\"1,8,32,64\")")->capture_default_str();
  s->add_option("--seed", o.seed, "seed of prompts and arrivals")->capture_default_str();
  s->add_option("--timeout", o.timeout_s, "seconds per request")->capture_default_str();
  s->add_option("--temperature", o.temperature)->capture_default_str();
  s->add_option("--n", o.n, "choices per request")->capture_default_str();
  s->add_flag("!--no-ignore-eos", o.ignore_eos, "do not send ignore_eos (servers that reject it)");
  s->add_flag("--no-usage", a->no_usage, "do not ask for stream_options.include_usage");
  s->add_option("--extra-body", o.extra_body, "JSON object merged into every request body");
  s->add_option("--slo-ttft-ms", o.slo.ttft_ms, "goodput SLO on TTFT (ms)");
  s->add_option("--slo-tpot-ms", o.slo.tpot_ms, "goodput SLO on TPOT (ms)");
  s->add_option("--slo-e2e-ms", o.slo.e2e_ms, "goodput SLO on end-to-end latency (ms)");
  s->add_option("--gpu", o.gpu, "GPU catalog name (data/catalog/gpus.json) for the price per GPU-hour");
  s->add_option("--price-per-hour", o.price_per_hour, "USD per GPU-hour (overrides the catalog)");
  s->add_option("--gpus", o.gpus, "GPUs the server uses (price x N)")->capture_default_str();
  s->add_option("--catalog", o.catalog_dir, "catalog directory (default: data/catalog or $FRUGAL_CATALOG)");
  s->add_option("--telemetry-interval-ms", o.telemetry_interval_ms, "NVML sampling interval")->capture_default_str();
  s->add_flag("--no-telemetry", a->no_telemetry, "do not sample GPU telemetry");
  s->add_flag("--no-progress", a->no_progress, "no progress bar");
  s->add_option("--json", a->json_path, "write every figure and the configuration as JSON");
  s->add_option("--csv", a->csv_path, "write one CSV row per run");
  s->add_option("--markdown", a->markdown_path, "write a markdown report");
  s->add_option("--svg-dir", a->svg_dir, "write SVG plots (latency CDFs, throughput vs concurrency)");
  s->callback([a] { set_exit_code(run_bench_serve(*a)); });
}

}  // namespace frugal::cli
