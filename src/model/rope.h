// RoPE inverse frequencies on the host, for every rope scaling the Llama family uses. Each
// function matches transformers' modeling_rope_utils `_compute_*_parameters` (computed in
// double, rounded to float once). The backend's rope op takes the result as data.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace frugal::model {

// Rotated dimensions per head (all of head_dim for Llama/Qwen2, qk_rope_head_dim for MLA).
int64_t rotary_dim(const ModelConfig& c);

// The factor the rope op multiplies cos/sin by (RopeParams::attention_factor): 1 except for
// YaRN, where it is rope_parameters' attention_factor, else
// get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim) when both are given, else
// get_mscale(factor) = 0.1 ln(factor) + 1 (transformers' _compute_yarn_parameters).
double rope_attention_factor(const ModelConfig& c);

// YaRN's get_mscale(scale, mscale) = 0.1 mscale ln(scale) + 1 (1 for scale <= 1). DeepSeek
// multiplies its softmax scale by yarn_mscale(factor, mscale_all_dim)^2.
double yarn_mscale(double scale, double mscale);

// inv_freq [rotary_dim / 2] for a forward step whose largest position is max_position.
// Only dynamic NTK scaling depends on it: transformers recomputes inv_freq from
// seq_len = max_position + 1 whenever that exceeds max_position_embeddings (and returns to the
// unscaled frequencies below it), so keys already cached keep the rotation they were written
// with, exactly as in transformers' generate().
std::vector<float> rope_inv_freq(const ModelConfig& c, int64_t max_position);

// Whether rope_inv_freq depends on max_position (dynamic NTK).
bool rope_depends_on_position(const ModelConfig& c);


}  // namespace frugal::model
