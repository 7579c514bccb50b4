// `frugal eval`: what a precision costs in quality, on the serving engine (docs/eval.md).
//   ppl    perplexity by the llama.cpp protocol (--save-logits for kld)
//   kld    KL-divergence, top-1 agreement and ΔPPL against a saved reference
//   mc     MMLU / CMMLU / MMLU-Redux by log-likelihood of the answer letter
//   gsm8k  chain-of-thought generation, exact match of the final answer
//   router MoE router agreement of a model with a reference model on the same tokens
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "eval/gsm8k.h"
#include "eval/mc.h"
#include "eval/mc_data.h"
#include "eval/perplexity.h"
#include "eval/progress.h"
#include "eval/report.h"
#include "eval/router.h"
#include "model/config.h"
#include "eval/text_file.h"
#include "bench/stats.h"
#include "runtime/backends.h"
#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"

namespace frugal::cli {
namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

struct CommonArgs {
  std::string model_dir;
  std::string tokenizer_dir;  // empty: the model directory
  std::string device = "cpu";
  int32_t threads = 0;
  std::string json_path;
  std::string csv_path;
  bool dummy_weights = false;
  int32_t max_model_len = 0;
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 8192;
  std::string kv_cache_dtype = "auto";
  int32_t kv_window = 0;
  int32_t kv_sinks = 0;
};

void add_common(CLI::App* cmd, CommonArgs& a, bool engine) {
  a.model_dir = default_model_dir();
  cmd->add_option("--model", a.model_dir, "model directory")->capture_default_str();
  cmd->add_option("--device", a.device, "cpu, cuda, cuda:N, or ref")->capture_default_str();
  cmd->add_option("--threads", a.threads, "CPU threads (0 = all)");
  cmd->add_option("--json", a.json_path, "write the results as JSON (docs/eval.md)");
  cmd->add_option("--csv", a.csv_path, "write the results as CSV (docs/eval.md)");
  cmd->add_option("--kv-cache-dtype,--kv-dtype", a.kv_cache_dtype,
                  "KV cache dtype: auto (activation dtype), bf16, fp8 (e4m3) or int8")->capture_default_str();
  cmd->add_option("--kv-window", a.kv_window, "attend to the last W positions only (0 = off)");
  cmd->add_option("--kv-sinks", a.kv_sinks, "with --kv-window: also attend to the first S positions");
  if (!engine) return;
  cmd->add_option("--tokenizer", a.tokenizer_dir, "directory with tokenizer.json (default: the model's)");
  cmd->add_flag("--dummy-weights", a.dummy_weights, "random weights of --model's config.json (speed runs)");
  cmd->add_option("--max-model-len", a.max_model_len, "context length (default: the model's)");
  cmd->add_option("--max-num-seqs", a.max_num_seqs, "engine batch size")->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", a.max_num_batched_tokens, "engine tokens per step")->capture_default_str();
}

std::string model_dir_of(const std::string& model) {
  if (model.size() > 5 && model.substr(model.size() - 5) == ".json") return std::filesystem::path(model).parent_path().string();
  return model;
}

Result<std::unique_ptr<Tokenizer>> load_tokenizer(const CommonArgs& a) {
  const std::string dir = a.tokenizer_dir.empty() ? model_dir_of(a.model_dir) : a.tokenizer_dir;
  if (!std::filesystem::exists(dir + "/tokenizer.json"))
    return not_found(dir + ": no tokenizer.json (pass --tokenizer DIR)");
  return Tokenizer::load(dir);
}

Result<std::unique_ptr<runtime::Engine>> make_engine(const CommonArgs& a) {
  runtime::EngineOptions eo{.model_dir = a.model_dir, .dummy_weights = a.dummy_weights, .device = a.device,
                            .threads = a.threads, .max_num_seqs = a.max_num_seqs,
                            .max_num_batched_tokens = a.max_num_batched_tokens};
  eo.max_model_len = a.max_model_len;
  eo.kv_cache_dtype = a.kv_cache_dtype;
  eo.kv_window = a.kv_window;
  eo.kv_sinks = a.kv_sinks;
  eo.enable_prefix_caching = true;
  return runtime::create_engine(eo);
}

Status write_outputs(const CommonArgs& a, const json& j, const std::vector<std::string>& header,
                     const std::vector<json>& rows) {
  if (!a.json_path.empty()) FRUGAL_RETURN_IF_ERROR(eval::write_json_file(a.json_path, j));
  if (!a.csv_path.empty()) FRUGAL_RETURN_IF_ERROR(eval::write_csv_file(a.csv_path, header, rows));
  return Status::ok();
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string hex64(uint64_t h) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// ---- ppl ----

struct PplArgs {
  CommonArgs c;
  std::string text;
  int32_t ctx = 512;
  int32_t stride = 0;
  std::string save_logits;
  int32_t top_k = 32;
};

Status run_ppl(const PplArgs& a) {
  const auto t0 = Clock::now();
  FRUGAL_ASSIGN_OR_RETURN(std::string text, eval::read_text_file(a.text));
  FRUGAL_ASSIGN_OR_RETURN(auto tok, load_tokenizer(a.c));
  const bool bos = tok->add_bos_token() && tok->bos_id() >= 0;
  const std::vector<int32_t> tokens = tok->encode(text, {.add_bos = bos, .parse_special = false});
  FRUGAL_ASSIGN_OR_RETURN(eval::ChunkPlan plan, eval::plan_chunks(static_cast<int64_t>(tokens.size()), a.ctx, a.stride, a.text));
  FRUGAL_ASSIGN_OR_RETURN(eval::ScoringModel m, eval::load_scoring_model(a.c.model_dir, a.c.device, a.c.threads, a.ctx,
                                                                               a.c.kv_cache_dtype, a.c.kv_window, a.c.kv_sinks));
  const auto t_run = Clock::now();
  eval::Progress bar("ppl", plan.n_chunks);
  FRUGAL_ASSIGN_OR_RETURN(eval::PplReport r,
      eval::run_ppl(m, tokens, bos ? tok->bos_id() : -1, plan,
                    {.save_logits = a.save_logits, .top_k = a.top_k, .model_hash = eval::model_hash(a.c.model_dir)},
                    [&](int64_t d, int64_t) { bar.update(d); }));
  bar.finish();
  const double run_s = seconds_since(t_run);
  const int64_t scored = r.nll.n;
  std::printf("frugal eval ppl: %s on %s\n", a.c.model_dir.c_str(), a.c.device.c_str());
  std::printf("  text          %s: %lld tokens%s\n", a.text.c_str(), static_cast<long long>(tokens.size()), bos ? " (BOS first)" : "");
  std::printf("  chunks        %lld of %d tokens, stride %d, scoring logits rows [%d, %d)\n", static_cast<long long>(plan.n_chunks),
              plan.ctx, plan.stride, plan.first, plan.ctx - 1);
  std::printf("  scored        %lld tokens\n", static_cast<long long>(scored));
  std::printf("  mean NLL      %s\n", eval::pm(r.nll.mean, r.nll.se).c_str());
  std::printf("  PPL           %s\n", eval::pm(r.ppl, r.ppl_se).c_str());
  std::printf("  time          %.2f s (%.0f tokens/s evaluated)\n", run_s, static_cast<double>(plan.n_chunks * plan.ctx) / run_s);
  if (!a.save_logits.empty()) std::printf("  saved         %s (top-%d)\n", a.save_logits.c_str(), a.top_k);
  json j = {{"command", "ppl"}, {"model", a.c.model_dir}, {"model_hash", hex64(eval::model_hash(a.c.model_dir))},
            {"device", a.c.device}, {"text", a.text}, {"n_tokens", tokens.size()}, {"bos", bos},
            {"ctx", plan.ctx}, {"stride", plan.stride}, {"first", plan.first}, {"n_chunks", plan.n_chunks},
            {"tokens_scored", scored}, {"mean_nll", r.nll.mean}, {"mean_nll_se", r.nll.se}, {"ppl", r.ppl},
            {"ppl_se", r.ppl_se}, {"seconds", run_s}, {"total_seconds", seconds_since(t0)},
            {"save_logits", a.save_logits}, {"top_k", a.save_logits.empty() ? 0 : a.top_k}};
  json full = j;
  full["chunk_ppl"] = r.chunk_ppl;
  return write_outputs(a.c, full,
                       {"command", "model", "device", "text", "n_tokens", "ctx", "stride", "n_chunks", "tokens_scored",
                        "mean_nll", "mean_nll_se", "ppl", "ppl_se", "seconds"},
                       {j});
}

// ---- kld ----

struct KldArgs {
  CommonArgs c;
  std::string reference;
  std::string text;  // optional: re-tokenize and check the ids equal the reference's
};

Status run_kld(const KldArgs& a) {
  FRUGAL_ASSIGN_OR_RETURN(eval::LogitsFile ref, eval::read_logits_file(a.reference));
  if (!a.text.empty()) {
    FRUGAL_ASSIGN_OR_RETURN(std::string text, eval::read_text_file(a.text));
    FRUGAL_ASSIGN_OR_RETURN(auto tok, load_tokenizer(a.c));
    const std::vector<int32_t> ids = tok->encode(text, {.add_bos = ref.header.bos >= 0, .parse_special = false});
    size_t i = 0;
    while (i < ids.size() && i < ref.tokens.size() && ids[i] == ref.tokens[i]) ++i;
    if (i != ids.size() || i != ref.tokens.size())
      return invalid_argument(a.text + ": tokenizes to " + std::to_string(ids.size()) + " tokens that differ from " +
                              a.reference + "'s " + std::to_string(ref.tokens.size()) + " at token " + std::to_string(i) +
                              ": not the same text or tokenizer");
  }
  FRUGAL_ASSIGN_OR_RETURN(eval::ScoringModel m, eval::load_scoring_model(a.c.model_dir, a.c.device, a.c.threads,
                                                                               ref.header.ctx, a.c.kv_cache_dtype, a.c.kv_window,
                                                                               a.c.kv_sinks));
  const auto t0 = Clock::now();
  eval::Progress bar("kld", ref.header.n_chunks);
  FRUGAL_ASSIGN_OR_RETURN(eval::KldReport r, eval::run_kld(m, ref, a.reference, nullptr, [&](int64_t d, int64_t) { bar.update(d); }));
  bar.finish();
  const double s = seconds_since(t0);
  std::printf("frugal eval kld: %s on %s vs %s (top-%d + rest)\n", a.c.model_dir.c_str(), a.c.device.c_str(),
              a.reference.c_str(), ref.header.top_k);
  std::printf("  positions       %lld (%lld chunks of %d)\n", static_cast<long long>(r.n), static_cast<long long>(ref.header.n_chunks), ref.header.ctx);
  std::printf("  mean KLD        %s  (95%% CI %.6f .. %.6f)\n", eval::pm(r.kld.mean, r.kld.se, 6).c_str(), r.kld_ci95.lo, r.kld_ci95.hi);
  std::printf("  median KLD      %.6f\n  p99 KLD         %.6f\n  max KLD         %.6f\n", r.kld_median, r.kld_p99, r.kld_max);
  std::printf("  same top-1      %.3f%%  (95%% CI %.3f .. %.3f %%)\n", 100 * r.same_top1.p, 100 * r.same_top1.ci95.lo, 100 * r.same_top1.ci95.hi);
  std::printf("  RMS Δp          %s %%\n", eval::pm(100 * r.rms_dp, 100 * r.rms_dp_se, 3).c_str());
  std::printf("  PPL(Q)          %s\n  PPL(ref)        %s\n", eval::pm(r.ppl_q, r.ppl_q_se).c_str(), eval::pm(r.ppl_ref, r.ppl_ref_se).c_str());
  std::printf("  ΔPPL            %s\n  PPL(Q)/PPL(ref) %s\n", eval::pm(r.delta_ppl, r.delta_ppl_se).c_str(),
              eval::pm(r.ppl_ratio, r.ppl_ratio_se, 5).c_str());
  std::printf("  Cor(ln PPL)     %.4f\n  time            %.2f s\n", r.ln_ppl_correlation, s);
  json j = {{"command", "kld"}, {"model", a.c.model_dir}, {"device", a.c.device}, {"reference", a.reference},
            {"top_k", ref.header.top_k}, {"ctx", ref.header.ctx}, {"n", r.n}, {"kld_mean", r.kld.mean},
            {"kld_se", r.kld.se}, {"kld_ci95_lo", r.kld_ci95.lo}, {"kld_ci95_hi", r.kld_ci95.hi},
            {"kld_median", r.kld_median}, {"kld_p99", r.kld_p99}, {"kld_max", r.kld_max},
            {"same_top1", r.same_top1.p}, {"same_top1_ci95_lo", r.same_top1.ci95.lo},
            {"same_top1_ci95_hi", r.same_top1.ci95.hi}, {"rms_dp", r.rms_dp}, {"rms_dp_se", r.rms_dp_se},
            {"ppl_q", r.ppl_q}, {"ppl_q_se", r.ppl_q_se}, {"ppl_ref", r.ppl_ref}, {"ppl_ref_se", r.ppl_ref_se},
            {"delta_ppl", r.delta_ppl}, {"delta_ppl_se", r.delta_ppl_se}, {"ppl_ratio", r.ppl_ratio},
            {"ppl_ratio_se", r.ppl_ratio_se}, {"ln_ppl_correlation", r.ln_ppl_correlation}, {"seconds", s}};
  std::vector<std::string> header;
  for (auto it = j.begin(); it != j.end(); ++it) header.push_back(it.key());
  return write_outputs(a.c, j, header, {j});
}

// ---- mc ----

struct McArgs {
  CommonArgs c;
  std::string data;
  std::string format = "mmlu";
  int32_t shots = 5;
  std::string subjects;
  int64_t limit = 0;
};

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

json proportion_json(const eval::Proportion& p) {
  return {{"n", p.n}, {"correct", p.k}, {"accuracy", p.p}, {"se", p.se}, {"ci95_lo", p.ci95.lo}, {"ci95_hi", p.ci95.hi}};
}

Status run_mc(const McArgs& a) {
  FRUGAL_ASSIGN_OR_RETURN(eval::McFormat fmt, eval::parse_mc_format(a.format));
  FRUGAL_ASSIGN_OR_RETURN(auto subjects, eval::load_mc(a.data, fmt, {.shots = a.shots, .subjects = split_commas(a.subjects), .limit = a.limit}));
  FRUGAL_ASSIGN_OR_RETURN(auto tok, load_tokenizer(a.c));
  FRUGAL_ASSIGN_OR_RETURN(auto engine, make_engine(a.c));
  FRUGAL_ASSIGN_OR_RETURN(auto items, eval::build_mc_items(subjects, *tok, engine->max_model_len()));
  const auto t0 = Clock::now();
  std::unique_ptr<eval::Progress> bar;
  FRUGAL_ASSIGN_OR_RETURN(eval::McReport r, eval::run_mc(*engine, subjects, items, {.max_in_flight = std::max(1, a.c.max_num_seqs)},
      [&](int64_t d, int64_t total) {
        if (!bar) bar = std::make_unique<eval::Progress>("mc", total);
        bar->update(d);
      }));
  if (bar) bar->finish();
  const double s = seconds_since(t0);
  engine->shutdown();
  std::printf("frugal eval mc: %s on %s, %s %d-shot, %zu subjects, %lld questions\n", a.c.model_dir.c_str(),
              a.c.device.c_str(), eval::mc_format_name(fmt), a.shots, subjects.size(), static_cast<long long>(r.micro.n));
  std::printf("  %-40s %6s %8s %8s\n", "subject", "n", "acc %", "± se");
  for (const auto& sr : r.subjects)
    std::printf("  %-40s %6lld %8.2f %8.2f\n", sr.name.c_str(), static_cast<long long>(sr.accuracy.n), 100 * sr.accuracy.p,
                100 * sr.accuracy.se);
  std::printf("  %-40s %6lld %8.2f %8.2f\n", "micro (all questions)", static_cast<long long>(r.micro.n), 100 * r.micro.p, 100 * r.micro.se);
  std::printf("  %-40s %6zu %8.2f %8.2f\n", "macro (mean of subjects)", r.subjects.size(), 100 * r.macro, 100 * r.macro_se);
  std::printf("  %lld requests, %lld prompt tokens, %.1f%% from the prefix cache, %.2f s (%.1f questions/s)\n",
              static_cast<long long>(r.requests), static_cast<long long>(r.prompt_tokens),
              r.prompt_tokens ? 100.0 * static_cast<double>(r.cached_prompt_tokens) / static_cast<double>(r.prompt_tokens) : 0.0, s,
              static_cast<double>(r.micro.n) / s);
  json j = {{"command", "mc"}, {"model", a.c.model_dir}, {"device", a.c.device}, {"format", eval::mc_format_name(fmt)},
            {"data", a.data}, {"shots", a.shots}, {"micro", proportion_json(r.micro)},
            {"macro", {{"n_subjects", r.subjects.size()}, {"accuracy", r.macro}, {"se", r.macro_se}}},
            {"requests", r.requests}, {"prompt_tokens", r.prompt_tokens}, {"cached_prompt_tokens", r.cached_prompt_tokens},
            {"seconds", s}};
  json subj = json::array(), questions = json::array();
  std::vector<json> rows;
  for (size_t si = 0; si < r.subjects.size(); ++si) {
    json p = proportion_json(r.subjects[si].accuracy);
    p["subject"] = r.subjects[si].name;
    subj.push_back(p);
    rows.push_back(p);
    for (size_t qi = 0; qi < r.questions[si].size(); ++qi) {
      const auto& q = r.questions[si][qi];
      const auto& src = subjects[si].test[qi];
      questions.push_back({{"subject", r.subjects[si].name}, {"file", src.file}, {"line", src.line},
                           {"answer", std::string(1, static_cast<char>('A' + src.answer))},
                           {"predicted", std::string(1, static_cast<char>('A' + q.predicted))},
                           {"loglik", q.loglik}});
    }
  }
  j["subjects"] = subj;
  j["questions"] = questions;
  json micro = proportion_json(r.micro);
  micro["subject"] = "micro";
  rows.push_back(micro);
  rows.push_back({{"subject", "macro"}, {"n", r.subjects.size()}, {"accuracy", r.macro}, {"se", r.macro_se}});
  return write_outputs(a.c, j, {"subject", "n", "correct", "accuracy", "se", "ci95_lo", "ci95_hi"}, rows);
}

// ---- gsm8k ----

struct GsmArgs {
  CommonArgs c;
  std::string data;
  int64_t limit = 0;
  int32_t max_tokens = 512;
  float temperature = 0;
  int64_t seed = -1;
};

Status run_gsm8k(const GsmArgs& a) {
  FRUGAL_ASSIGN_OR_RETURN(std::string text, eval::read_text_file(a.data));
  FRUGAL_ASSIGN_OR_RETURN(auto problems, eval::parse_gsm8k_jsonl(text, a.data));
  if (a.limit > 0 && static_cast<int64_t>(problems.size()) > a.limit) problems.resize(static_cast<size_t>(a.limit));
  if (a.max_tokens <= 0) return invalid_argument("--max-tokens must be positive");
  FRUGAL_ASSIGN_OR_RETURN(auto tok, load_tokenizer(a.c));
  FRUGAL_ASSIGN_OR_RETURN(auto engine, make_engine(a.c));
  const auto t0 = Clock::now();
  eval::GsmOptions o{.max_tokens = a.max_tokens, .temperature = a.temperature, .seed = std::nullopt,
                     .max_in_flight = std::max(1, a.c.max_num_seqs)};
  if (a.seed >= 0) o.seed = static_cast<uint64_t>(a.seed);
  eval::Progress bar("gsm8k", static_cast<int64_t>(problems.size()));
  FRUGAL_ASSIGN_OR_RETURN(eval::GsmReport r, eval::run_gsm8k(*engine, *tok, problems, o, [&](int64_t d, int64_t) { bar.update(d); }));
  bar.finish();
  const double s = seconds_since(t0);
  engine->shutdown();
  std::printf("frugal eval gsm8k: %s on %s, %zu problems, %s, max %d tokens\n", a.c.model_dir.c_str(), a.c.device.c_str(),
              problems.size(), a.temperature > 0 ? "sampled" : "greedy", a.max_tokens);
  std::printf("  accuracy   %.2f%% (%lld/%lld), 95%% Wilson CI %.2f .. %.2f %%\n", 100 * r.accuracy.p,
              static_cast<long long>(r.accuracy.k), static_cast<long long>(r.accuracy.n), 100 * r.accuracy.ci95.lo,
              100 * r.accuracy.ci95.hi);
  std::printf("  generated  %lld tokens in %.2f s (%.0f tokens/s)\n", static_cast<long long>(r.generated_tokens), s,
              static_cast<double>(r.generated_tokens) / s);
  json j = {{"command", "gsm8k"}, {"model", a.c.model_dir}, {"device", a.c.device}, {"data", a.data},
            {"n", r.accuracy.n}, {"correct", r.accuracy.k}, {"accuracy", r.accuracy.p}, {"ci95_lo", r.accuracy.ci95.lo},
            {"ci95_hi", r.accuracy.ci95.hi}, {"temperature", a.temperature}, {"max_tokens", a.max_tokens},
            {"generated_tokens", r.generated_tokens}, {"seconds", s}};
  json summary = j;
  json res = json::array();
  for (size_t i = 0; i < r.results.size(); ++i) {
    const auto& g = r.results[i];
    res.push_back({{"line", problems[i].line}, {"reference", problems[i].reference},
                   {"extracted", g.extracted ? json(*g.extracted) : json(nullptr)}, {"correct", g.correct},
                   {"finish", runtime::finish_reason_name(g.finish)}, {"generated_tokens", g.generated_tokens},
                   {"completion", g.completion}});
  }
  j["results"] = res;
  std::vector<std::string> header;
  for (auto it = summary.begin(); it != summary.end(); ++it) header.push_back(it.key());
  return write_outputs(a.c, j, header, {summary});
}

template <typename F>
void set_callback(CLI::App* cmd, const char* name, F f) {
  cmd->callback([name, f] {
    Status st = f();
    if (!st.is_ok()) {
      std::fprintf(stderr, "frugal eval %s: %s\n", name, st.to_string().c_str());
      set_exit_code(st.code() == ErrorCode::kInvalidArgument ? 2 : 1);
    }
  });
}

// ---- router ----

struct RouterArgs {
  CommonArgs c;
  std::string reference;
  std::string text;
  int32_t random_tokens = 0;
  uint64_t seed = 1;
  int32_t ctx = 256;
};

Status run_router(const RouterArgs& a) {
  const auto t0 = Clock::now();
  std::vector<int32_t> tokens;
  std::string source;
  if (!a.text.empty()) {
    FRUGAL_ASSIGN_OR_RETURN(std::string text, eval::read_text_file(a.text));
    FRUGAL_ASSIGN_OR_RETURN(auto tok, load_tokenizer(a.c));
    const bool bos = tok->add_bos_token() && tok->bos_id() >= 0;
    tokens = tok->encode(text, {.add_bos = bos, .parse_special = false});
    source = a.text;
  } else if (a.random_tokens > 0) {
    // Uniform ids below the vocabulary (for models without a tokenizer, e.g. test fixtures).
    FRUGAL_ASSIGN_OR_RETURN(model::ModelConfig cfg, model::load_model_config(a.c.model_dir));
    bench::SplitMix64 rng(a.seed);
    for (int32_t i = 0; i < a.random_tokens; ++i) tokens.push_back(static_cast<int32_t>(rng.next() % static_cast<uint64_t>(cfg.vocab_size)));
    source = std::to_string(a.random_tokens) + " random tokens (seed " + std::to_string(a.seed) + ")";
  } else {
    return invalid_argument("eval router: pass --text FILE or --random-tokens N");
  }
  FRUGAL_ASSIGN_OR_RETURN(runtime::BackendHandle bh, runtime::make_backend(a.c.device, a.c.threads));
  eval::Progress bar("router", (static_cast<int64_t>(tokens.size()) + a.ctx - 1) / std::max(a.ctx, 1));
  FRUGAL_ASSIGN_OR_RETURN(eval::RouterReport r, eval::run_router_agreement(a.c.model_dir, a.reference, bh.backend.get(), tokens,
                                                                          a.ctx, [&](int64_t d, int64_t) { bar.update(d); }));
  bar.finish();
  const double exact = r.decisions ? static_cast<double>(r.exact) / static_cast<double>(r.decisions) : 0;
  std::printf("frugal eval router: %s vs %s on %s\n", a.c.model_dir.c_str(), a.reference.c_str(), a.c.device.c_str());
  std::printf("  tokens        %s: %zu in %lld chunks of <= %d\n", source.c_str(), tokens.size(),
              static_cast<long long>(r.n_chunks), a.ctx);
  std::printf("  same experts  %.4f of %lld (token, layer) routes (top-%lld sets equal)\n", exact,
              static_cast<long long>(r.decisions), static_cast<long long>(r.top_k));
  std::printf("  mean overlap  %.4f (|A and B| / top_k)\n", r.overlap);
  json j = {{"command", "router"}, {"model", a.c.model_dir}, {"reference", a.reference}, {"device", a.c.device},
            {"tokens", source}, {"n_tokens", tokens.size()}, {"ctx", a.ctx}, {"top_k", r.top_k},
            {"decisions", r.decisions}, {"same_experts", exact}, {"mean_overlap", r.overlap},
            {"seconds", seconds_since(t0)}};
  std::vector<json> rows;
  json layers = json::array();
  for (const auto& l : r.layers) {
    const double le = l.decisions ? static_cast<double>(l.exact) / static_cast<double>(l.decisions) : 0;
    std::printf("  layer %-4lld  same %.4f  overlap %.4f\n", static_cast<long long>(l.layer), le, l.overlap);
    json row = {{"layer", l.layer}, {"decisions", l.decisions}, {"same_experts", le}, {"mean_overlap", l.overlap}};
    layers.push_back(row);
    rows.push_back(row);
  }
  json full = j;
  full["layers"] = layers;
  return write_outputs(a.c, full, {"layer", "decisions", "same_experts", "mean_overlap"}, rows);
}

}  // namespace

void register_eval(CLI::App& app) {
  auto* eval = app.add_subcommand("eval", "measure quality: perplexity, KL-divergence, multiple choice, GSM8K");
  eval->require_subcommand(1);

  auto ppl = std::make_shared<PplArgs>();
  auto* p = eval->add_subcommand("ppl", "perplexity (llama.cpp protocol: chunks of --ctx, score the second half)");
  add_common(p, ppl->c, false);
  p->add_option("--text", ppl->text, "UTF-8 text file")->required();
  p->add_option("--ctx", ppl->ctx, "tokens per chunk")->capture_default_str();
  p->add_option("--stride", ppl->stride, "chunk start step (default: --ctx; else at most --ctx/2)");
  p->add_option("--save-logits", ppl->save_logits, "write top-k reference distributions for eval kld");
  p->add_option("--top-k", ppl->top_k, "tokens kept per position by --save-logits")->capture_default_str();
  set_callback(p, "ppl", [ppl] { return run_ppl(*ppl); });

  auto kld = std::make_shared<KldArgs>();
  auto* k = eval->add_subcommand("kld", "KL-divergence vs a --save-logits reference (llama.cpp's scoreboard)");
  add_common(k, kld->c, false);
  k->add_option("--reference", kld->reference, "file written by eval ppl --save-logits")->required();
  k->add_option("--text", kld->text, "optional: the text again, to check it tokenizes to the reference's ids");
  set_callback(k, "kld", [kld] { return run_kld(*kld); });

  auto mc = std::make_shared<McArgs>();
  auto* m = eval->add_subcommand("mc", "multiple choice (MMLU, CMMLU, MMLU-Redux) by answer-letter log-likelihood");
  add_common(m, mc->c, true);
  m->add_option("--data", mc->data, "data directory (e.g. ../shared/data/eval/mmlu)")->required();
  m->add_option("--format", mc->format, "mmlu | cmmlu | mmlu-redux")->capture_default_str();
  m->add_option("--shots", mc->shots, "few-shot examples per question")->capture_default_str();
  m->add_option("--subjects", mc->subjects, "comma-separated subjects (default: all)");
  m->add_option("--limit", mc->limit, "at most N test questions per subject");
  set_callback(m, "mc", [mc] { return run_mc(*mc); });

  auto gsm = std::make_shared<GsmArgs>();
  auto* g = eval->add_subcommand("gsm8k", "GSM8K: chain of thought with the chat template, exact match");
  add_common(g, gsm->c, true);
  g->add_option("--data", gsm->data, "test.jsonl (question, answer with '#### N')")->required();
  g->add_option("--limit", gsm->limit, "first N problems");
  g->add_option("--max-tokens", gsm->max_tokens, "tokens to generate per problem")->capture_default_str();
  g->add_option("--temperature", gsm->temperature, "0 = greedy")->capture_default_str();
  g->add_option("--seed", gsm->seed, "sampling seed");
  set_callback(g, "gsm8k", [gsm] { return run_gsm8k(*gsm); });

  auto router = std::make_shared<RouterArgs>();
  auto* r = eval->add_subcommand("router", "MoE router agreement with a reference model (e.g. quantized vs bf16)");
  add_common(r, router->c, false);
  r->add_option("--reference", router->reference, "reference model directory (e.g. the bf16 original)")->required();
  r->add_option("--text", router->text, "UTF-8 text file, tokenized with --model's tokenizer");
  r->add_option("--random-tokens", router->random_tokens, "instead of --text: N uniform random token ids");
  r->add_option("--seed", router->seed, "seed of --random-tokens")->capture_default_str();
  r->add_option("--ctx", router->ctx, "tokens per chunk (one forward step each)")->capture_default_str();
  set_callback(r, "router", [router] { return run_router(*router); });
}

}  // namespace frugal::cli
