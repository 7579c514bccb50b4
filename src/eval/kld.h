// KL-divergence of a model's next-token distributions against a saved reference
// (frugal eval kld; llama.cpp's perplexity --kl-divergence scoreboard).
//
// The reference keeps, per scored position, its top-k tokens' log-probabilities and the log of
// the remaining mass r_P = 1 - sum(top-k p). KL is computed over the k + 1 buckets "each top-k
// token" and "everything else":
//   KL = sum_i p_i (log p_i - log q_i) + r_P (log r_P - log r_Q),  r_Q = 1 - sum_i q_i
// (q over the same k ids). This is the exact KL when k covers the vocabulary and otherwise a
// lower bound of it (merging outcomes never increases KL); llama.cpp keeps the full
// distribution, so small k understates KLD slightly for long-tailed rows.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "eval/eval_stats.h"

namespace frugal::eval {

// One scored position of a reference: what --save-logits stores.
struct TopK {
  int32_t next = 0;            // the actual next token
  float next_logprob = 0;      // log P(next)
  std::vector<int32_t> ids;    // top-k ids, by decreasing probability
  std::vector<float> logprobs; // their log-probabilities
  float log_rest = 0;          // log(1 - sum of the top-k probabilities); -inf when nothing is left
};

// log-softmax of raw logits (double accumulation).
void log_softmax(std::span<const float> logits, std::vector<float>& out);

// Top-k of a full log-probability row (ties: lower id first).
TopK compress_topk(std::span<const float> logprobs, int32_t next, int32_t k);

// log(1 - exp(lse)) for lse <= 0 of the summed probabilities, -inf when it rounds to nothing.
double log1m_exp(double log_sum);

// KL(P_ref || Q) over the top-k + rest buckets; q_logprobs is Q's full row.
double kld_topk(const TopK& ref, std::span<const float> q_logprobs);

// Per-position values collected over a run.
struct KldSample {
  double kld = 0;
  double nll_ref = 0;  // -log P(next)
  double nll_q = 0;    // -log Q(next)
  double dp = 0;       // Q(next) - P(next)
  bool same_top1 = false;
};
KldSample kld_sample(const TopK& ref, std::span<const float> q_logprobs);

struct KldReport {
  int64_t n = 0;
  MeanSe kld;            // mean KLD and its standard error
  Interval kld_ci95;     // mean +- 1.96 se
  double kld_median = 0, kld_p99 = 0, kld_max = 0;
  Proportion same_top1;
  double rms_dp = 0, rms_dp_se = 0;  // sqrt(mean dp^2) and its delta-method error
  double ppl_q = 0, ppl_q_se = 0, ppl_ref = 0, ppl_ref_se = 0;
  double delta_ppl = 0, delta_ppl_se = 0;   // PPL(Q) - PPL(ref), paired
  double ppl_ratio = 0, ppl_ratio_se = 0;   // PPL(Q) / PPL(ref) = exp(mean(nll_q - nll_ref))
  double ln_ppl_correlation = 0;            // Pearson correlation of nll_q and nll_ref
};
KldReport summarize_kld(std::span<const KldSample> xs);

}  // namespace frugal::eval
