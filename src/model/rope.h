// RoPE inverse frequencies on the host, for every rope scaling the Llama family uses. Each
// function matches transformers' modeling_rope_utils `_compute_*_parameters` (computed in
// double, rounded to float once). The backend's rope op takes the result as data.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace frugal::model {

// Rotated dimensions per head (all of head_dim for Llama/Qwen2).
int64_t rotary_dim(const ModelConfig& c);

// inv_freq [rotary_dim / 2] for a forward step whose largest position is max_position.
// Only dynamic NTK scaling depends on it: transformers recomputes inv_freq from
// seq_len = max_position + 1 whenever that exceeds max_position_embeddings (and returns to the
// unscaled frequencies below it), so keys already cached keep the rotation they were written
// with, exactly as in transformers' generate().
std::vector<float> rope_inv_freq(const ModelConfig& c, int64_t max_position);

// Whether rope_inv_freq depends on max_position (dynamic NTK).
bool rope_depends_on_position(const ModelConfig& c);


}  // namespace frugal::model
