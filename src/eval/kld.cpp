#include "eval/kld.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace frugal::eval {

void log_softmax(std::span<const float> logits, std::vector<float>& out) {
  out.resize(logits.size());
  float mx = -INFINITY;
  for (float v : logits) mx = std::max(mx, v);
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - mx);
  const double lse = mx + std::log(sum);
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<float>(logits[i] - lse);
}

double log1m_exp(double log_sum) {
  if (log_sum >= 0) return -std::numeric_limits<double>::infinity();
  return log_sum > -0.6931471805599453 ? std::log(-std::expm1(log_sum)) : std::log1p(-std::exp(log_sum));
}

namespace {

// Sum of exp(lp) over the ids NOT in `ids` (no cancellation: small positive terms only).
double rest_mass(std::span<const float> lp, std::span<const int32_t> ids) {
  double all = 0;
  std::vector<char> in(lp.size(), 0);
  for (int32_t id : ids) in[static_cast<size_t>(id)] = 1;
  for (size_t v = 0; v < lp.size(); ++v)
    if (!in[v]) all += std::exp(static_cast<double>(lp[v]));
  return all;
}

int32_t argmax(std::span<const float> xs) {
  int32_t best = 0;
  for (size_t i = 1; i < xs.size(); ++i)
    if (xs[i] > xs[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  return best;
}

}  // namespace

TopK compress_topk(std::span<const float> logprobs, int32_t next, int32_t k) {
  TopK t;
  t.next = next;
  t.next_logprob = logprobs[static_cast<size_t>(next)];
  const int32_t n = std::min<int32_t>(k, static_cast<int32_t>(logprobs.size()));
  std::vector<int32_t> idx(logprobs.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + n, idx.end(), [&](int32_t a, int32_t b) {
    const float la = logprobs[static_cast<size_t>(a)], lb = logprobs[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  });
  t.ids.assign(idx.begin(), idx.begin() + n);
  for (int32_t id : t.ids) t.logprobs.push_back(logprobs[static_cast<size_t>(id)]);
  const double rest = rest_mass(logprobs, t.ids);
  t.log_rest = rest > 0 ? static_cast<float>(std::log(rest)) : -INFINITY;
  return t;
}

double kld_topk(const TopK& ref, std::span<const float> q) {
  double kl = 0;
  for (size_t i = 0; i < ref.ids.size(); ++i) {
    const double lp = ref.logprobs[i];
    const double lq = q[static_cast<size_t>(ref.ids[i])];
    kl += std::exp(lp) * (lp - lq);
  }
  if (std::isfinite(ref.log_rest)) {
    const double rq = rest_mass(q, ref.ids);
    // Q puts no mass outside P's top-k: the KL is infinite in exact arithmetic; floor r_Q at
    // the smallest normal float so the number stays finite and large.
    // Rounded to float as the stored log_rest is, so that a model against its own reference
    // gives exactly 0.
    const double lrq = static_cast<float>(std::log(std::max(rq, static_cast<double>(std::numeric_limits<float>::min()))));
    kl += std::exp(static_cast<double>(ref.log_rest)) * (ref.log_rest - lrq);
  }
  return kl;
}

KldSample kld_sample(const TopK& ref, std::span<const float> q) {
  KldSample s;
  s.kld = kld_topk(ref, q);
  s.nll_ref = -static_cast<double>(ref.next_logprob);
  s.nll_q = -static_cast<double>(q[static_cast<size_t>(ref.next)]);
  s.dp = std::exp(-s.nll_q) - std::exp(-s.nll_ref);
  s.same_top1 = !ref.ids.empty() && argmax(q) == ref.ids[0];
  return s;
}

KldReport summarize_kld(std::span<const KldSample> xs) {
  KldReport r;
  r.n = static_cast<int64_t>(xs.size());
  if (xs.empty()) return r;
  const size_t n = xs.size();
  std::vector<double> kld(n), dp2(n), nq(n), np(n), d(n);
  int64_t same = 0;
  for (size_t i = 0; i < n; ++i) {
    kld[i] = xs[i].kld;
    dp2[i] = xs[i].dp * xs[i].dp;
    nq[i] = xs[i].nll_q;
    np[i] = xs[i].nll_ref;
    d[i] = nq[i] - np[i];
    same += xs[i].same_top1 ? 1 : 0;
  }
  r.kld = mean_se(kld);
  r.kld_ci95 = {r.kld.mean - kZ95 * r.kld.se, r.kld.mean + kZ95 * r.kld.se};
  r.kld_median = percentile(kld, 50);
  r.kld_p99 = percentile(kld, 99);
  r.kld_max = *std::max_element(kld.begin(), kld.end());
  r.same_top1 = proportion(same, r.n);
  const MeanSe m2 = mean_se(dp2);
  r.rms_dp = std::sqrt(m2.mean);
  r.rms_dp_se = r.rms_dp > 0 ? m2.se / (2 * r.rms_dp) : 0;
  const MeanSe mq = mean_se(nq), mp = mean_se(np), md = mean_se(d);
  r.ppl_q = std::exp(mq.mean);
  r.ppl_q_se = r.ppl_q * mq.se;
  r.ppl_ref = std::exp(mp.mean);
  r.ppl_ref_se = r.ppl_ref * mp.se;
  r.ppl_ratio = std::exp(md.mean);
  r.ppl_ratio_se = r.ppl_ratio * md.se;
  double cov = 0, vq = 0, vp = 0;
  for (size_t i = 0; i < n; ++i) {
    cov += (nq[i] - mq.mean) * (np[i] - mp.mean);
    vq += (nq[i] - mq.mean) * (nq[i] - mq.mean);
    vp += (np[i] - mp.mean) * (np[i] - mp.mean);
  }
  r.ln_ppl_correlation = vq > 0 && vp > 0 ? cov / std::sqrt(vq * vp) : 1.0;
  r.delta_ppl = r.ppl_q - r.ppl_ref;
  if (n > 1) {
    // Delta method for exp(mean_q) - exp(mean_p) with the paired covariance of the means.
    const double cov_mean = cov / static_cast<double>(n - 1) / static_cast<double>(n);
    const double var = r.ppl_q * r.ppl_q * mq.se * mq.se + r.ppl_ref * r.ppl_ref * mp.se * mp.se -
                       2 * r.ppl_q * r.ppl_ref * cov_mean;
    r.delta_ppl_se = std::sqrt(std::max(0.0, var));
  }
  return r;
}

}  // namespace frugal::eval
