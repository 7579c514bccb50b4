// Multiple choice by log-likelihood of the answer letter (docs/eval.md), through the engine.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "eval/eval_stats.h"
#include "eval/mc_data.h"
#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"

namespace frugal::eval {

// One question's tokenized prompt pieces.
struct McItem {
  size_t subject = 0;  // index into the subjects
  const McQuestion* q = nullptr;
  std::vector<int32_t> context;                      // with BOS when the tokenizer adds one
  std::array<std::vector<int32_t>, 4> continuation;  // " A" .. " D" without special tokens
};

struct McQuestionResult {
  std::array<double, 4> loglik{};  // sum of the continuation tokens' log-probs
  int predicted = 0;               // argmax (the lowest letter on ties)
  bool correct = false;
};

struct McSubjectResult {
  std::string name;
  Proportion accuracy;
};

struct McReport {
  std::vector<McSubjectResult> subjects;
  Proportion micro;          // over all questions
  double macro = 0;          // mean of the subjects' accuracies
  double macro_se = 0;       // sqrt(sum se_s^2) / n_subjects
  int64_t prompt_tokens = 0, cached_prompt_tokens = 0;
  int64_t requests = 0;
  std::vector<std::vector<McQuestionResult>> questions;  // [subject][test question]
};

struct McRunOptions {
  int32_t max_in_flight = 256;
};

// Tokenizes every test question of every subject; errors name the question's file and line
// when its prompt does not fit max_model_len.
Result<std::vector<McItem>> build_mc_items(const std::vector<McSubject>& subjects, const Tokenizer& tok,
                                           int32_t max_model_len);

Result<McReport> run_mc(runtime::Engine& engine, const std::vector<McSubject>& subjects,
                        const std::vector<McItem>& items, const McRunOptions& opts,
                        const std::function<void(int64_t done, int64_t total)>& progress = {});

}  // namespace frugal::eval
