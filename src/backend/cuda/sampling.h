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
#include "ops/params.h"

namespace frugal::cuda {

using SampleParams = ops::SampleParams;

cudaError_t launch_sample(const SampleParams& p, cudaStream_t stream);

}  // namespace frugal::cuda
