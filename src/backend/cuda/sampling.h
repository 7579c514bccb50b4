// On-device sampling of the next token ids from logits, one row per sequence, so the engine
// copies only n_rows int32 ids to the host per step. Per-row parameters live in device memory,
// so a step captured in a CUDA graph samples with whatever the engine wrote there before replay.
//   greedy      temperature[r] <= 0: argmax (lowest id on ties, as torch.argmax)
//   temperature softmax(logits / T) sampled by the Gumbel-max trick: argmax(z - log(-log u))
//   top-k       keep ids whose z is >= the k-th largest (ties at the boundary kept)
//   top-p       then keep the smallest head of that set holding >= p of its probability mass
// Randomness: u = hash(seeds[r], id); the caller changes seeds[r] every step (e.g. seed + step),
// which makes a request's samples reproducible whatever else is in the batch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace frugal::cuda {

struct SampleParams {
  const void* logits;       // [n_rows, vocab] with row stride ld_logits (elements)
  DType logits_dtype;       // f32, f16 or bf16
  int64_t ld_logits;
  int32_t n_rows;
  int32_t vocab;
  const float* temperature; // [n_rows]
  const int32_t* top_k;     // [n_rows] or nullptr; <= 0 or >= vocab: off
  const float* top_p;       // [n_rows] or nullptr; <= 0 or >= 1: off
  const uint64_t* seeds;    // [n_rows]
  int32_t* out_ids;         // [n_rows]
};

cudaError_t launch_sample(const SampleParams& p, cudaStream_t stream);

}  // namespace frugal::cuda
