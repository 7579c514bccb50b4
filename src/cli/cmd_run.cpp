// `frugal run`: load a model (or a config with --dummy-weights) and generate from a prompt,
// streaming tokens to stdout as they are sampled.
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "model/model.h"
#include "runtime/backends.h"
#include "runtime/generate.h"

namespace frugal::cli {
namespace {

struct RunArgs {
  std::string model_dir;
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
  int32_t threads = 0;
  bool ignore_eos = false;
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

Status run(const RunArgs& a) {
  if (a.device != "cpu" && a.device != "ref")
    return invalid_argument("--device: '" + a.device + "' is not supported by `frugal run` yet (use cpu)");
  if (!a.prompt.empty())
    // TODO(lead): tokenize --prompt with tokenizer/tokenizer.h once it lands.
    return unsupported("--prompt: text prompts need the tokenizer, not wired yet; use --prompt-ids");
  FRUGAL_ASSIGN_OR_RETURN(auto handle, runtime::make_backend(a.device, a.threads));
  ops::Backend* backend = handle.backend.get();
  FRUGAL_ASSIGN_OR_RETURN(auto m, model::Model::load(a.model_dir, backend, {.dummy_weights = a.dummy_weights}));
  std::vector<int32_t> prompt;
  if (a.prompt_ids.empty()) {
    const auto& bos = m->generation_config().bos_token_ids;
    if (bos.empty()) return invalid_argument("no prompt given and the model has no bos_token_id; pass --prompt-ids");
    prompt.push_back(static_cast<int32_t>(bos.front()));
  } else {
    FRUGAL_ASSIGN_OR_RETURN(prompt, parse_ids(a.prompt_ids));
  }
  const auto sampling = sampling_from(a, m->generation_config());
  FRUGAL_ASSIGN_OR_RETURN(auto result, runtime::generate(*m, prompt, sampling, [](int32_t tok) {
    std::printf("%d ", tok);
    std::fflush(stdout);
    return true;
  }));
  std::printf("\n");
  std::fflush(stdout);
  return {};
}

}  // namespace

void register_run(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  args->model_dir = default_model_dir();
  auto* cmd = app.add_subcommand("run", "generate from a prompt, streaming token ids");
  cmd->add_option("--model", args->model_dir, "model directory (or config.json with --dummy-weights)")->capture_default_str();
  cmd->add_option("--prompt-ids", args->prompt_ids, "prompt as space-separated token ids (default: BOS)");
  cmd->add_option("--prompt", args->prompt, "prompt text (needs the tokenizer)");
  cmd->add_option("--max-tokens", args->max_tokens, "tokens to generate")->capture_default_str();
  cmd->add_option("--temperature", args->temperature, "0 = greedy (default: generation_config.json)");
  cmd->add_option("--top-p", args->top_p, "nucleus sampling mass");
  cmd->add_option("--top-k", args->top_k, "keep the k most likely tokens (0 = off)");
  cmd->add_option("--min-p", args->min_p, "drop tokens below min_p * p_max");
  cmd->add_option("--repetition-penalty", args->repetition_penalty, "HF repetition penalty (1 = off)");
  cmd->add_option("--seed", args->seed, "sampling seed (default: random)");
  cmd->add_option("--device", args->device, "cpu or ref (the slow exact oracle); cuda comes with the engine")->capture_default_str();
  cmd->add_flag("--dummy-weights", args->dummy_weights, "random weights of the config's shape (speed work)");
  cmd->add_flag("--ignore-eos", args->ignore_eos, "keep generating past eos");
  cmd->add_option("--threads", args->threads, "CPU threads (0 = all)");
  cmd->callback([args] {
    Status st = run(*args);
    if (!st.is_ok()) {
      std::fprintf(stderr, "frugal run: %s\n", st.to_string().c_str());
      set_exit_code(st.code() == ErrorCode::kInvalidArgument ? 2 : 1);
    }
  });
}

}  // namespace frugal::cli
