// Perplexity by the llama.cpp protocol (docs/eval.md): the whole text tokenized once (BOS when
// the tokenizer adds one), chunks of ctx tokens each evaluated alone from position 0, the
// first token of every chunk replaced by BOS (when there is one), and the logits rows
// j in [first, ctx - 1) scored against token j + 1; first = ctx / 2 for non-overlapping chunks.
// With a stride S < ctx (S <= ctx / 2), chunks start every S tokens and first = ctx - 1 - S, so
// each chunk scores exactly the S tokens the previous one did not.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "eval/eval_stats.h"
#include "eval/kld.h"
#include "eval/logits_file.h"
#include "model/model.h"
#include "runtime/backends.h"

namespace frugal::eval {

struct ChunkPlan {
  int32_t ctx = 0;
  int32_t stride = 0;
  int32_t first = 0;     // first scored logits row of a chunk
  int64_t n_chunks = 0;
  int64_t scored_per_chunk() const { return ctx - 1 - first; }
  int64_t start(int64_t chunk) const { return chunk * stride; }
};

// stride 0 means ctx. Errors name `source` (the text file): ctx < 4, a stride that would score
// tokens twice, a text shorter than one chunk.
Result<ChunkPlan> plan_chunks(int64_t n_tokens, int32_t ctx, int32_t stride, const std::string& source);

// The ids the model sees for `chunk`: tokens[start, start + ctx), the first replaced by bos
// when bos >= 0.
std::vector<int32_t> chunk_input(std::span<const int32_t> tokens, const ChunkPlan& plan, int64_t chunk, int32_t bos);

// A model loaded for scoring whole sequences of up to ctx tokens with every row's logits.
struct ScoringModel {
  runtime::BackendHandle backend;
  std::unique_ptr<model::Model> model;
  std::unique_ptr<model::KvStorage> kv;
  int32_t ctx = 0;
};
Result<ScoringModel> load_scoring_model(const std::string& model_dir, const std::string& device, int32_t threads,
                                        int32_t ctx);

// Runs `tokens` (at most ctx) as one sequence from position 0 and calls on_row(j, logprobs)
// for each logits row j in [first, tokens.size() - 1), logprobs = log_softmax(logits row j).
using RowFn = std::function<Status(int32_t j, std::span<const float> logprobs)>;
Status score_sequence(ScoringModel& m, std::span<const int32_t> tokens, int32_t first, const RowFn& on_row);

using ChunkProgress = std::function<void(int64_t chunks_done, int64_t n_chunks)>;

struct PplOptions {
  std::string save_logits;  // path of the --save-logits file; empty: none
  int32_t top_k = 32;
  uint64_t model_hash = 0;  // written to the file's header
};

struct PplReport {
  ChunkPlan plan;
  int64_t n_tokens = 0;
  int32_t bos = -1;
  MeanSe nll;                    // per scored token
  double ppl = 0, ppl_se = 0;    // exp(mean NLL), ppl * se(NLL)
  std::vector<double> chunk_ppl;  // exp(mean NLL) of each chunk
  std::vector<float> logprobs;   // log-prob of every scored token, chunk by chunk
};

// Scores every chunk of `tokens` (and writes the --save-logits file).
Result<PplReport> run_ppl(ScoringModel& m, std::span<const int32_t> tokens, int32_t bos, const ChunkPlan& plan,
                          const PplOptions& opts, const ChunkProgress& progress = {});

// Re-runs the reference's tokens under its header's plan and compares position by position.
// Errors: a vocabulary that differs from the reference's, a record whose next token is not
// the text's.
Result<KldReport> run_kld(ScoringModel& m, const LogitsFile& ref, const std::string& ref_path,
                          std::vector<KldSample>* samples = nullptr, const ChunkProgress& progress = {});

// FNV-1a 64 of config.json and the names and sizes of the directory's *.safetensors files.
uint64_t model_hash(const std::string& model_dir);

}  // namespace frugal::eval
