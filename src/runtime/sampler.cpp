#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace frugal::runtime {
namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Rng::Rng(uint64_t seed) {
  for (auto& s : s_) s = splitmix64(seed);
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

Status validate(const SamplingParams& p) {
  if (!(p.temperature >= 0)) return invalid_argument("sampling: temperature must be >= 0");
  if (!(p.top_p > 0 && p.top_p <= 1)) return invalid_argument("sampling: top_p must be in (0, 1]");
  if (p.top_k < 0) return invalid_argument("sampling: top_k must be >= 0 (0 = off)");
  if (!(p.min_p >= 0 && p.min_p <= 1)) return invalid_argument("sampling: min_p must be in [0, 1]");
  if (!(p.repetition_penalty > 0)) return invalid_argument("sampling: repetition_penalty must be > 0");
  if (!std::isfinite(p.presence_penalty) || !std::isfinite(p.frequency_penalty))
    return invalid_argument("sampling: presence_penalty and frequency_penalty must be finite");
  return {};
}

Sampler::Sampler(const SamplingParams& p) : p_(p), rng_(p.seed ? *p.seed : std::random_device{}()) {}

void Sampler::apply_penalties(std::span<float> logits, std::span<const int32_t> prompt,
                              std::span<const int32_t> output) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  auto in_vocab = [&](int32_t t) { return t >= 0 && t < vocab; };
  if (p_.repetition_penalty != 1.0f) {
    // HF RepetitionPenaltyLogitsProcessor: each distinct seen token once.
    std::vector<bool> seen(static_cast<size_t>(vocab), false);
    for (auto span : {prompt, output})
      for (int32_t t : span)
        if (in_vocab(t) && !seen[static_cast<size_t>(t)]) {
          seen[static_cast<size_t>(t)] = true;
          float& l = logits[static_cast<size_t>(t)];
          l = l > 0 ? l / p_.repetition_penalty : l * p_.repetition_penalty;
        }
  }
  if (p_.presence_penalty != 0 || p_.frequency_penalty != 0) {
    counts_.assign(static_cast<size_t>(vocab), 0);
    for (int32_t t : output)
      if (in_vocab(t)) ++counts_[static_cast<size_t>(t)];
    for (int64_t t = 0; t < vocab; ++t) {
      const int32_t c = counts_[static_cast<size_t>(t)];
      if (c > 0) logits[static_cast<size_t>(t)] -= p_.presence_penalty + p_.frequency_penalty * static_cast<float>(c);
    }
  }
}

std::vector<double> Sampler::distribution(std::span<float> logits, std::span<const int32_t> prompt,
                                          std::span<const int32_t> output) {
  apply_penalties(logits, prompt, output);
  const size_t vocab = logits.size();
  std::vector<double> probs(vocab, 0.0);
  if (p_.temperature == 0) {
    size_t best = 0;
    for (size_t i = 1; i < vocab; ++i)
      if (logits[i] > logits[best]) best = i;
    probs[best] = 1.0;
    return probs;
  }
  // Candidates sorted by logit (descending, lower id first on ties): a fixed order so the
  // inverse-CDF draw is reproducible.
  order_.resize(vocab);
  std::iota(order_.begin(), order_.end(), 0);
  std::stable_sort(order_.begin(), order_.end(), [&](int32_t a, int32_t b) { return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)]; });
  size_t keep = vocab;
  if (p_.top_k > 0) keep = std::min(keep, static_cast<size_t>(p_.top_k));
  const double mx = logits[static_cast<size_t>(order_[0])] / static_cast<double>(p_.temperature);
  probs_.resize(keep);
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) {
    probs_[i] = std::exp(logits[static_cast<size_t>(order_[i])] / static_cast<double>(p_.temperature) - mx);
    sum += probs_[i];
  }
  if (p_.top_p < 1.0f) {
    // Smallest prefix whose mass reaches top_p (HF TopPLogitsWarper keeps at least one).
    double cum = 0;
    size_t k = 0;
    while (k < keep) {
      cum += probs_[k] / sum;
      ++k;
      if (cum >= static_cast<double>(p_.top_p)) break;
    }
    keep = k;
  }
  if (p_.min_p > 0) {
    // Keep tokens with p >= min_p * p_max (ratio test, so renormalization does not matter).
    size_t k = 1;
    while (k < keep && probs_[k] >= static_cast<double>(p_.min_p) * probs_[0]) ++k;
    keep = k;
  }
  sum = 0;
  for (size_t i = 0; i < keep; ++i) sum += probs_[i];
  for (size_t i = 0; i < keep; ++i) probs[static_cast<size_t>(order_[i])] = probs_[i] / sum;
  return probs;
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> prompt, std::span<const int32_t> output) {
  std::vector<double> probs = distribution(logits, prompt, output);
  if (p_.temperature == 0)
    return static_cast<int32_t>(std::max_element(probs.begin(), probs.end()) - probs.begin());
  // Inverse CDF over the candidates in the fixed (sorted) order.
  const double u = rng_.uniform();
  double cum = 0;
  int32_t last = order_[0];
  for (int32_t id : order_) {
    const double p = probs[static_cast<size_t>(id)];
    if (p == 0) continue;
    cum += p;
    last = id;
    if (u < cum) return id;
  }
  return last;
}

}  // namespace frugal::runtime
