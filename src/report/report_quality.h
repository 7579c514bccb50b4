// The quality columns of one report row (frugal eval): PPL on the bf16 row, KLD / same-top-1 /
// ΔPPL of every other row against the bf16 row's saved log-probs.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "report/report.h"

namespace frugal::report {

struct QualityOptions {
  std::string model_dir;  // the row's checkpoint
  std::string tokenizer_dir;  // the bf16 model's (quantized checkpoints may ship none)
  std::string text_file;  // empty: not measured (the row says why)
  std::string out_dir;    // bf16.logits goes here
  std::string device = "cpu";
  int32_t threads = 0;
  int32_t ctx = 512;
  int64_t max_chunks = 16;
  std::string mc_dir;     // MMLU (Hendrycks CSV: dev/, test/); empty: not measured
  int32_t mc_shots = 5;
  int64_t mc_limit = 0;   // > 0: test questions per subject
};

// Fills row.ppl, delta_ppl, kld_mean, kld_p99, same_top1 and quality_why; an error is the
// row's quality failure (the caller records it without failing the row's speed figures).
Status measure_quality(const QualityOptions& q, PrecisionRow& row);
// Fills row.mmlu, mmlu_stderr (micro accuracy over every question, binomial se) and mmlu_why.
Status measure_mmlu(const QualityOptions& q, PrecisionRow& row);

}  // namespace frugal::report
