// Multiple-choice data sets as they are published (docs/eval.md):
//   mmlu:       {dev,test}/<subject>_{dev,test}.csv, Hendrycks CSV without header:
//               question,A,B,C,D,answer letter
//   cmmlu:      {dev,test}/<subject>.csv with header ",Question,A,B,C,D,Answer" and an index column
//   mmlu-redux: test.jsonl, one object per line: question, choices (4 strings), answer (0-3),
//               subject (or the HF export's _hf_subset); the few-shot examples of a subject are
//               its own first `shots` items, which are then not scored.
#pragma once

#include <cstdint>

#include <array>
#include <string>
#include <vector>

#include "core/status.h"

namespace frugal::eval {

enum class McFormat { kMmlu, kCmmlu, kMmluRedux };
Result<McFormat> parse_mc_format(const std::string& name);  // "mmlu" | "cmmlu" | "mmlu-redux"
const char* mc_format_name(McFormat f);

struct McQuestion {
  std::string question;
  std::array<std::string, 4> choices;
  int answer = 0;  // 0..3 (A..D)
  std::string file;
  int64_t line = 0;  // where the record starts
};

struct McSubject {
  std::string name;  // file stem: "high_school_physics"
  std::vector<McQuestion> dev;   // few-shot examples, in file order
  std::vector<McQuestion> test;  // scored questions, in file order
};

struct McLoadOptions {
  int32_t shots = 5;
  std::vector<std::string> subjects;  // empty: all, in alphabetical order
  int64_t limit = 0;                  // > 0: at most this many test questions per subject
};

// Subjects in alphabetical order (or the order of opts.subjects); each has at least `shots`
// dev questions and one test question, else an error naming the file.
Result<std::vector<McSubject>> load_mc(const std::string& dir, McFormat format, const McLoadOptions& opts);

// One file's questions (exposed for tests). `source` names the file in errors.
Result<std::vector<McQuestion>> parse_mmlu_csv(std::string_view text, const std::string& source);
Result<std::vector<McQuestion>> parse_cmmlu_csv(std::string_view text, const std::string& source);
struct ReduxItem {
  std::string subject;
  McQuestion q;
};
Result<std::vector<ReduxItem>> parse_mmlu_redux_jsonl(std::string_view text, const std::string& source);

}  // namespace frugal::eval
