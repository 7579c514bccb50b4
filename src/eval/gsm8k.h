// GSM8K (docs/eval.md): chain-of-thought generation with the model's chat template, answer
// extraction and exact match against the reference's "#### N".
#pragma once

#include <cstdint>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "eval/eval_stats.h"
#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"

namespace frugal::eval {

inline constexpr const char* kGsm8kInstruction = "\nPlease reason step by step, and put your final answer within \\boxed{}.";

struct GsmProblem {
  std::string question;
  std::string reference;  // normalized number after "####"
  int64_t line = 0;
};

// JSON lines with string fields question and answer (answer ends with "#### N"); errors name
// the file and line.
Result<std::vector<GsmProblem>> parse_gsm8k_jsonl(std::string_view text, const std::string& source);

// Number normalization for exact match: strips spaces, '$', ',', a trailing '.', '%' and units
// after the number, "+" signs, and trailing zeros of a decimal ("18.0" -> "18", "0.50" -> "0.5").
// Returns the empty string when `s` holds no number.
std::string normalize_number(std::string_view s);

// The answer of a completion: text after the last "</think>" when there is one, then the
// content of the last \boxed{...} (nested braces kept), else the text after the last "####",
// else the last number; normalized. nullopt when nothing is found.
std::optional<std::string> extract_answer(std::string_view completion);

struct GsmResult {
  std::string completion;
  std::optional<std::string> extracted;
  bool correct = false;
  int32_t generated_tokens = 0;
  runtime::FinishReason finish = runtime::FinishReason::kNone;
};

struct GsmReport {
  std::vector<GsmResult> results;
  Proportion accuracy;
  int64_t generated_tokens = 0;
};

struct GsmOptions {
  int32_t max_tokens = 512;
  float temperature = 0;  // 0: greedy
  std::optional<uint64_t> seed;
  int32_t max_in_flight = 256;
};

// The prompt ids for one problem: the chat template with one user message (question +
// kGsm8kInstruction) and the generation prompt; without a chat template, the message itself
// (with BOS when the tokenizer adds one).
Result<std::vector<int32_t>> gsm8k_prompt(const Tokenizer& tok, const std::string& question);

Result<GsmReport> run_gsm8k(runtime::Engine& engine, const Tokenizer& tok, const std::vector<GsmProblem>& problems,
                            const GsmOptions& opts, const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace frugal::eval
