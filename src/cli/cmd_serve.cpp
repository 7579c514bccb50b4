// `frugal serve`: the OpenAI-compatible HTTP server (docs/server.md).
//
// Listens first (so /health answers 503 while the model loads), then loads the tokenizer and
// the engine, then prints "listening on http://HOST:PORT" on stderr. SIGINT/SIGTERM stop the
// server: no new connections, running requests cancelled, engine shut down.
// --tensor-parallel-size N: N ranks (docs/parallelism.md); rank 0 serves HTTP and sends each
// engine step's new requests and cancels to the others.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>

#include "cli/commands.h"
#include "dist/launch.h"
#include "runtime/engine.h"
#include "server/api_server.h"
#include "server/tokenizer_codec.h"
#include "tokenizer/tokenizer.h"

namespace frugal::cli {
namespace {

struct ServeArgs {
  std::string model_dir;
  std::string host = "127.0.0.1";
  uint16_t port = 8080;
  std::string api_key;
  std::string served_model_name;
  std::string reasoning_format = "auto";
  int32_t http_threads = 4;
  int32_t max_connections = 4096;
  runtime::EngineOptions engine;
  bool no_prefix_caching = false;
  ParallelArgs parallel;
};

std::string default_served_name(const std::string& model_dir) {
  auto p = std::filesystem::path(model_dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  if (p.filename() == "config.json") p = p.parent_path();
  return p.filename().string().empty() ? "frugal" : p.filename().string();
}

Status serve(ServeArgs a) {
  FRUGAL_ASSIGN_OR_RETURN(auto reasoning, server::parse_reasoning_format(a.reasoning_format));
  a.engine.model_dir = a.model_dir;
  a.engine.enable_prefix_caching = !a.no_prefix_caching;
  server::ApiServerConfig cfg{
      .http = {.host = a.host, .port = a.port, .threads = a.http_threads, .max_connections = a.max_connections},
      .served_model_name = a.served_model_name.empty() ? default_served_name(a.model_dir) : a.served_model_name,
      .api_key = a.api_key,
      .reasoning = reasoning};

  // Signals are taken by sigwait below; every thread started from here on inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  a.engine.tensor_parallel_size = a.parallel.tensor_parallel_size;
  if (a.engine.tensor_parallel_size > 1) {
    // Requests reach rank 0's HTTP server only; rank 0's engine sends each step's admissions
    // and cancels to the others. They serve no HTTP and stop when rank 0 does (its SIGINT or
    // SIGTERM; theirs are left blocked so that rank 0 can still send them the stop).
    a.engine.tp_replicate_requests = true;
    if (dist::launched_rank() != 0) {
      auto engine = runtime::create_engine(a.engine);
      if (!engine) return engine.status().with_context("starting the engine for " + a.model_dir);
      (*engine)->shutdown();  // returns when rank 0 stops
      std::fprintf(stderr, "frugal serve: rank %d stopped with rank 0\n", dist::launched_rank());
      return Status::ok();
    }
  }

  FRUGAL_ASSIGN_OR_RETURN(auto api, server::ApiServer::start(cfg));
  std::fprintf(stderr, "frugal serve: loading %s (health answers 503 until ready)\n", a.model_dir.c_str());
  auto tokenizer = Tokenizer::load(a.model_dir);
  if (!tokenizer) return tokenizer.status().with_context("loading the tokenizer of " + a.model_dir);
  FRUGAL_ASSIGN_OR_RETURN(auto codec, server::TokenizerCodec::create(**tokenizer));
  auto engine = runtime::create_engine(a.engine);
  if (!engine) return engine.status().with_context("starting the engine for " + a.model_dir);
  api->set_engine(engine->get(), codec.get());
  std::fprintf(stderr, "frugal serve: model '%s' (context %d tokens) listening on http://%s:%u\n",
               cfg.served_model_name.c_str(), (*engine)->max_model_len(), a.host.c_str(), api->port());
  std::fflush(stderr);

  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "frugal serve: %s, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  api->stop();             // no more io: nothing touches the engine from here
  (*engine)->shutdown();   // running requests end as cancelled
  api.reset();
  return Status::ok();
}

}  // namespace

void register_serve(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  args->model_dir = default_model_dir();
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (/v1/chat/completions, /v1/completions, /metrics)");
  cmd->add_option("--model", args->model_dir, "model directory (or config.json with --dummy-weights)")->capture_default_str();
  cmd->add_option("--host", args->host, "address to bind (127.0.0.1: this machine only)")->capture_default_str();
  cmd->add_option("--port", args->port, "TCP port (0: any free port)")->capture_default_str();
  cmd->add_option("--api-key", args->api_key, "require 'Authorization: Bearer KEY' on /v1/*");
  cmd->add_option("--served-model-name", args->served_model_name, "model id clients use (default: the directory name)");
  cmd->add_option("--reasoning-format", args->reasoning_format,
                  "auto (split <think> when the chat template uses it) | none | deepseek")->capture_default_str();
  cmd->add_option("--http-threads", args->http_threads, "io threads (HTTP, detokenization, JSON)")->capture_default_str();
  cmd->add_option("--max-connections", args->max_connections, "open connections beyond this get 503")->capture_default_str();
  auto& e = args->engine;
  cmd->add_option("--device", e.device, "cpu | cuda | cuda:N")->capture_default_str();
  cmd->add_flag("--dummy-weights", e.dummy_weights, "random weights of the config's shape (speed work)");
  cmd->add_option("--precision", e.weight_precision, "dummy weights' linears: bf16 | int8 | int4 | fp8 | fp8-channel | nf4")
      ->capture_default_str();
  cmd->add_option("--lm-head", e.lm_head_precision, "dummy weights' untied lm_head: bf16 | int8 (per channel)")
      ->capture_default_str();
  cmd->add_option("--threads", e.threads, "CPU compute threads (0 = all)");
  cmd->add_option("--kv-cache-dtype,--kv-dtype", e.kv_cache_dtype,
                  "KV cache dtype: auto (activation dtype), bf16, fp8 (e4m3) or int8")->capture_default_str();
  cmd->add_option("--kv-window", e.kv_window, "attend to the last W positions only (0 = off)");
  cmd->add_option("--kv-sinks", e.kv_sinks, "with --kv-window: also attend to the first S positions");
  cmd->add_option("--max-num-seqs", e.max_num_seqs, "sequences per batch")->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", e.max_num_batched_tokens, "tokens per engine step")->capture_default_str();
  cmd->add_option("--max-model-len", e.max_model_len, "context length (0: the model's)");
  cmd->add_option("--long-prefill-token-threshold", e.long_prefill_token_threshold,
                  "prompts longer than this are prefilled in small chunks while others decode")
      ->capture_default_str();
  cmd->add_option("--long-prefill-chunk-tokens", e.long_prefill_chunk_tokens,
                  "their chunk per step next to decodes (0: off, only the step budget)")
      ->capture_default_str();
  cmd->add_option("--gpu-memory-utilization", e.gpu_memory_utilization, "fraction of GPU memory to use")->capture_default_str();
  cmd->add_option("--num-kv-blocks", e.num_kv_blocks, "KV cache blocks (0: size from memory)");
  cmd->add_flag("--no-prefix-caching", args->no_prefix_caching, "disable prefix caching");
  cmd->add_option("--max-queue", e.max_queue, "waiting requests beyond this get 429")->capture_default_str();
  add_parallel_flags(cmd, args->parallel);
  cmd->callback([args] {
    Result<std::optional<int>> launched = start_ranks(args->parallel, args->engine.device, &args->engine.rank_env);
    if (launched && launched->has_value()) {  // this process started the ranks and waited for them
      set_exit_code(**launched);
      return;
    }
    Status st = launched ? serve(*args) : launched.status();
    if (!st.is_ok()) {
      std::fprintf(stderr, "frugal serve: %s\n", st.to_string().c_str());
      set_exit_code(1);
    }
  });
}

}  // namespace frugal::cli
