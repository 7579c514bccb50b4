// A simple single-sequence generation loop (prefill in chunks, then decode one token per step)
// over a Model: what `frugal run` and the model tests use until the engine thread exists.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "core/status.h"
#include "model/model.h"
#include "runtime/engine.h"

namespace frugal::runtime {

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated tokens (a stop token is not included)
  FinishReason finish = FinishReason::kNone;
};

// Called with each generated token as soon as it is sampled; return false to stop.
using TokenCallback = std::function<bool(int32_t token)>;
// Called with each logits row (vocab_size floats, as the model produced them) right before a
// token is sampled from it, including the row a stop token is sampled from.
using LogitsCallback = std::function<void(std::span<const float> logits)>;

// Generates up to sampling.max_tokens tokens after `prompt`. Stops at the model's eos ids
// (unless sampling.ignore_eos), at sampling.stop_token_ids, or when the context is full.
// kv_dtype: the cache's element type (default: the backend's activation dtype; fp8 / int8 as
// --kv-cache-dtype, docs/kv_cache.md).
Result<GenerateResult> generate(model::Model& m, std::span<const int32_t> prompt,
                                const SamplingParams& sampling, const TokenCallback& on_token = {},
                                std::optional<DType> kv_dtype = std::nullopt,
                                const LogitsCallback& on_logits = {});

}  // namespace frugal::runtime
