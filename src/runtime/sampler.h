// Host-side token sampling: greedy, temperature, top-k, top-p, min-p, repetition / presence /
// frequency penalties, with an own RNG (xoshiro256** seeded through splitmix64) so a seed gives
// the same tokens on every platform.
//
// Order (as HF generate and vLLM): penalties on the logits, then temperature, top-k, top-p,
// min-p, then a draw from the renormalized distribution. temperature == 0 is greedy (argmax
// after penalties, lowest id on ties).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "runtime/engine.h"

namespace frugal::runtime {

// xoshiro256** (Blackman & Vigna), seeded with splitmix64 as its authors recommend.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next();
  // Uniform in [0, 1) with 53 random bits.
  double uniform();

 private:
  uint64_t s_[4];
};

// Checks ranges; the message names the parameter.
Status validate(const SamplingParams& p);

class Sampler {
 public:
  // p.seed unset: seeded from a non-deterministic source.
  explicit Sampler(const SamplingParams& p);

  // Picks the next token from logits [vocab] (modified in place by penalties). `prompt` and
  // `output` are the sequence's tokens so far: repetition_penalty applies to both (HF, vLLM);
  // presence and frequency penalties to the output only (OpenAI, vLLM).
  int32_t sample(std::span<float> logits, std::span<const int32_t> prompt, std::span<const int32_t> output);

  // The distribution sample() draws from after all filters (for tests): probs [vocab].
  std::vector<double> distribution(std::span<float> logits, std::span<const int32_t> prompt,
                                   std::span<const int32_t> output);

 private:
  void apply_penalties(std::span<float> logits, std::span<const int32_t> prompt, std::span<const int32_t> output);

  SamplingParams p_;
  Rng rng_;
  std::vector<int32_t> counts_;   // scratch: output token counts
  std::vector<int32_t> order_;    // scratch: candidate ids sorted by logit
  std::vector<double> probs_;     // scratch
};

}  // namespace frugal::runtime
