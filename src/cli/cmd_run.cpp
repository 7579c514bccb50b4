// `frugal run`: load a model (or a config with --dummy-weights) and generate from a prompt,
// streaming tokens to stdout as they are sampled.
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "dist/launch.h"
#include "model/generation_config.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "tokenizer/jinja/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace frugal::cli {
namespace {

struct RunArgs {
  std::string model_dir;
  std::string kv_cache_dtype = "auto";
  int32_t kv_window = 0;
  int32_t kv_sinks = 0;
  std::string prompt_ids;
  std::string prompt;
  int32_t max_tokens = 64;
  float temperature = -1;  // < 0: generation_config.json's value, else 1 (greedy if do_sample is false)
  float top_p = -1;
  int32_t top_k = -1;
  float min_p = 0;
  float repetition_penalty = -1;
  int64_t seed = -1;
  std::string device = "cpu";
  bool dummy_weights = false;
  std::string precision = "bf16";
  std::string lm_head = "bf16";
  int32_t threads = 0;
  bool ignore_eos = false;
  bool chat = false;
  bool no_tokenizer = false;
  std::string system;
  int32_t max_model_len = 0;
  ParallelArgs parallel;
  dist::RankEnv rank_env;  // filled by start_ranks
};

Result<std::vector<int32_t>> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::istringstream in(s);
  std::string tok;
  while (in >> tok) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(tok, &used);
    } catch (...) {
      used = 0;
    }
    if (used != tok.size() || v < 0 || v > INT32_MAX) return invalid_argument("--prompt-ids: '" + tok + "' is not a token id");
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) return invalid_argument("--prompt-ids: no token ids given");
  return ids;
}

// Explicit flags win; otherwise generation_config.json's defaults (greedy unless it samples).
runtime::SamplingParams sampling_from(const RunArgs& a, const model::GenerationConfig& g) {
  runtime::SamplingParams p;
  const bool sample = g.do_sample;
  p.temperature = a.temperature >= 0 ? a.temperature : sample ? static_cast<float>(g.temperature.value_or(1.0)) : 0.0f;
  p.top_p = a.top_p >= 0 ? a.top_p : sample ? static_cast<float>(g.top_p.value_or(1.0)) : 1.0f;
  p.top_k = a.top_k >= 0 ? a.top_k : sample ? static_cast<int32_t>(g.top_k.value_or(0)) : 0;
  p.min_p = a.min_p;
  p.repetition_penalty = a.repetition_penalty > 0 ? a.repetition_penalty : static_cast<float>(g.repetition_penalty.value_or(1.0));
  if (a.seed >= 0) p.seed = static_cast<uint64_t>(a.seed);
  p.max_tokens = a.max_tokens;
  p.ignore_eos = a.ignore_eos;
  return p;
}

// The prompt's token ids: --prompt-ids, else --prompt text (through the chat template with
// --chat), else BOS alone.
Result<std::vector<int32_t>> prompt_tokens(const RunArgs& a, const Tokenizer* tok, const model::GenerationConfig& g) {
  if (!a.prompt_ids.empty()) return parse_ids(a.prompt_ids);
  if (a.chat) {
    if (!tok) return invalid_argument("--chat: " + a.model_dir + " has no tokenizer.json");
    if (tok->chat_template().empty()) return invalid_argument("--chat: " + a.model_dir + " has no chat_template in tokenizer_config.json");
    nlohmann::json messages = nlohmann::json::array();
    if (!a.system.empty()) messages.push_back({{"role", "system"}, {"content", a.system}});
    messages.push_back({{"role", "user"}, {"content", a.prompt}});
    jinja::ChatTemplateOptions opts;
    if (tok->bos_id() >= 0) opts.bos_token = tok->token_text(tok->bos_id());
    if (tok->eos_id() >= 0) opts.eos_token = tok->token_text(tok->eos_id());
    FRUGAL_ASSIGN_OR_RETURN(std::string text, jinja::render_chat_template(tok->chat_template(), messages, opts));
    // The template writes BOS itself where the model wants one.
    return tok->encode(text, {.add_bos = false, .parse_special = true});
  }
  if (tok) return tok->encode(a.prompt, {.add_bos = tok->add_bos_token(), .parse_special = true});
  if (!a.prompt.empty()) return invalid_argument("--prompt: " + a.model_dir + " has no tokenizer.json; use --prompt-ids");
  if (g.bos_token_ids.empty()) return invalid_argument("no prompt given and the model has no bos_token_id; pass --prompt-ids");
  return std::vector<int32_t>{static_cast<int32_t>(g.bos_token_ids.front())};
}

Status run(const RunArgs& a) {
  const bool dummy_config = a.model_dir.size() > 5 && a.model_dir.substr(a.model_dir.size() - 5) == ".json";
  const std::string dir = dummy_config ? std::filesystem::path(a.model_dir).parent_path().string() : a.model_dir;
  FRUGAL_ASSIGN_OR_RETURN(model::ModelConfig cfg, model::load_model_config(a.model_dir));
  FRUGAL_ASSIGN_OR_RETURN(model::GenerationConfig gen, model::load_generation_config(dir, cfg));
  std::unique_ptr<Tokenizer> tok;
  if (!a.no_tokenizer && std::filesystem::exists(dir + "/tokenizer.json")) {
    FRUGAL_ASSIGN_OR_RETURN(tok, Tokenizer::load(dir));
  }
  FRUGAL_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, prompt_tokens(a, tok.get(), gen));

  runtime::EngineOptions eo{.model_dir = a.model_dir, .dummy_weights = a.dummy_weights,
                            .weight_precision = a.precision, .lm_head_precision = a.lm_head, .device = a.device,
                            .threads = a.threads, .max_num_seqs = 1,
                            .max_num_batched_tokens = std::max<int32_t>(512, static_cast<int32_t>(prompt.size()) + 1)};
  eo.max_model_len = a.max_model_len;
  eo.kv_cache_dtype = a.kv_cache_dtype;
  eo.kv_window = a.kv_window;
  eo.kv_sinks = a.kv_sinks;
  eo.tensor_parallel_size = a.parallel.tensor_parallel_size;
  eo.rank_env = a.rank_env;
  eo.num_kv_blocks = static_cast<int32_t>((std::min<int64_t>(cfg.max_position_embeddings, prompt.size() + a.max_tokens + 16) + 15) / 16 + 1);
  FRUGAL_ASSIGN_OR_RETURN(auto engine, runtime::create_engine(eo));
  runtime::SamplingParams sp = sampling_from(a, gen);
  // Every rank must sample the same tokens: one seed for all (dist/launch.h).
  if (a.parallel.tensor_parallel_size > 1 && a.seed < 0) sp.seed = dist::shared_seed(0);

  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status error;
  std::optional<StreamDecoder> stream;
  if (tok) stream.emplace(*tok);
  // Echo a plain text prompt, so the output reads as one text (as llama.cpp does).
  if (tok && !a.chat && a.prompt_ids.empty() && !a.prompt.empty()) {
    std::fwrite(a.prompt.data(), 1, a.prompt.size(), stdout);
    std::fflush(stdout);
  }
  runtime::GenerateRequest req{.prompt = prompt, .sampling = sp};
  auto id = engine->submit(std::move(req), [&](const runtime::RequestOutput& out) {
    // Runs on the engine thread; printing a few bytes here is cheap enough for a CLI.
    for (const auto& t : out.tokens) {
      if (stream) {
        std::string piece = stream->push(t.token);
        std::fwrite(piece.data(), 1, piece.size(), stdout);
      } else {
        std::printf("%d ", t.token);
      }
    }
    std::fflush(stdout);
    if (out.finish != runtime::FinishReason::kNone) {
      std::lock_guard<std::mutex> lk(mu);
      if (out.finish == runtime::FinishReason::kError) error = out.error;
      done = true;
      cv.notify_all();
    }
  });
  if (!id.is_ok()) return id.status();
  {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return done; });
  }
  if (stream) {
    std::string rest = stream->flush();
    std::fwrite(rest.data(), 1, rest.size(), stdout);
  }
  std::printf("\n");
  std::fflush(stdout);
  engine->shutdown();
  return error;
}

}  // namespace

void register_run(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  args->model_dir = default_model_dir();
  auto* cmd = app.add_subcommand("run", "generate from a prompt, streaming text to stdout");
  cmd->add_option("--model", args->model_dir, "model directory (or config.json with --dummy-weights)")->capture_default_str();
  cmd->add_option("--prompt-ids", args->prompt_ids, "prompt as space-separated token ids (default: BOS)");
  cmd->add_option("--prompt", args->prompt, "prompt text (BOS added when the tokenizer asks for it)");
  cmd->add_flag("--chat", args->chat, "render --prompt as a user message with the model's chat template");
  cmd->add_option("--system", args->system, "system message for --chat");
  cmd->add_flag("--raw-ids", args->no_tokenizer, "print token ids instead of text");
  cmd->add_option("--max-model-len", args->max_model_len, "context length (default: the model's)");
  cmd->add_option("--max-tokens", args->max_tokens, "tokens to generate")->capture_default_str();
  cmd->add_option("--temperature", args->temperature, "0 = greedy (default: generation_config.json)");
  cmd->add_option("--top-p", args->top_p, "nucleus sampling mass");
  cmd->add_option("--top-k", args->top_k, "keep the k most likely tokens (0 = off)");
  cmd->add_option("--min-p", args->min_p, "drop tokens below min_p * p_max");
  cmd->add_option("--repetition-penalty", args->repetition_penalty, "HF repetition penalty (1 = off)");
  cmd->add_option("--seed", args->seed, "sampling seed (default: random)");
  cmd->add_option("--device", args->device, "cpu, cuda, cuda:N, or ref (the slow exact oracle)")->capture_default_str();
  cmd->add_flag("--dummy-weights", args->dummy_weights, "random weights of the config's shape (speed work)");
  cmd->add_option("--precision", args->precision, "dummy weights' linears: bf16 | int8 | int4 | fp8 | fp8-channel | nf4")
      ->capture_default_str();
  cmd->add_option("--lm-head", args->lm_head, "dummy weights' untied lm_head: bf16 | int8 (per channel)")->capture_default_str();
  cmd->add_flag("--ignore-eos", args->ignore_eos, "keep generating past eos");
  cmd->add_option("--threads", args->threads, "CPU threads (0 = all)");
  cmd->add_option("--kv-cache-dtype,--kv-dtype", args->kv_cache_dtype,
                  "KV cache dtype: auto (activation dtype), bf16, fp8 (e4m3) or int8")->capture_default_str();
  cmd->add_option("--kv-window", args->kv_window, "attend to the last W positions only (0 = off)");
  cmd->add_option("--kv-sinks", args->kv_sinks, "with --kv-window: also attend to the first S positions");
  add_parallel_flags(cmd, args->parallel);
  cmd->callback([args] {
    Result<std::optional<int>> launched = start_ranks(args->parallel, args->device, &args->rank_env);
    if (launched && launched->has_value()) {  // this process started the ranks and waited for them
      set_exit_code(**launched);
      return;
    }
    Status st = launched ? run(*args) : launched.status();
    if (!st.is_ok()) {
      std::fprintf(stderr, "frugal run: %s\n", st.to_string().c_str());
      set_exit_code(st.code() == ErrorCode::kInvalidArgument ? 2 : 1);
    }
  });
}

}  // namespace frugal::cli
