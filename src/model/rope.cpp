#include "model/rope.h"

#include <cmath>
#include <numbers>

namespace frugal::model {
namespace {

// _compute_default_rope_parameters: 1 / base^(2i / dim).
std::vector<double> default_inv_freq(double base, int64_t dim) {
  std::vector<double> f(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i)
    f[static_cast<size_t>(i)] = 1.0 / std::pow(base, static_cast<double>(2 * i) / static_cast<double>(dim));
  return f;
}

// _compute_llama3_parameters: long wavelengths divided by factor, short ones kept, a smooth
// interpolation in between.
void apply_llama3(const RopeScaling& rs, std::vector<double>& f) {
  const double old_ctx = static_cast<double>(rs.original_max_position_embeddings);
  const double low_freq_wavelen = old_ctx / rs.low_freq_factor;
  const double high_freq_wavelen = old_ctx / rs.high_freq_factor;
  for (double& v : f) {
    const double wavelen = 2 * std::numbers::pi / v;
    const double scaled = wavelen > low_freq_wavelen ? v / rs.factor : v;
    const double smooth = (old_ctx / wavelen - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor);
    const double smoothed = (1 - smooth) * scaled / rs.factor + smooth * scaled;
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    v = medium ? smoothed : scaled;
  }
}

}  // namespace

int64_t rotary_dim(const ModelConfig& c) { return c.head_dim; }

bool rope_depends_on_position(const ModelConfig& c) {
  return c.rope_scaling.type == RopeScalingType::kDynamic;
}

std::vector<float> rope_inv_freq(const ModelConfig& c, int64_t max_position) {
  const int64_t dim = rotary_dim(c);
  const RopeScaling& rs = c.rope_scaling;
  double base = c.rope_theta;
  if (rs.type == RopeScalingType::kDynamic) {
    // _compute_dynamic_ntk_parameters with seq_len = max(max_position + 1, max_pos_emb); at or
    // below max_position_embeddings this is the unscaled base.
    const double max_pos = static_cast<double>(c.max_position_embeddings);
    const double seq_len = std::max(static_cast<double>(max_position + 1), max_pos);
    base *= std::pow(rs.factor * seq_len / max_pos - (rs.factor - 1),
                     static_cast<double>(dim) / static_cast<double>(dim - 2));
  }
  std::vector<double> f = default_inv_freq(base, dim);
  switch (rs.type) {
    case RopeScalingType::kNone:
    case RopeScalingType::kDynamic:
    case RopeScalingType::kYarn:  // DeepSeek-only; rejected before a forward pass exists
      break;
    case RopeScalingType::kLinear:
      for (double& v : f) v /= rs.factor;
      break;
    case RopeScalingType::kLlama3:
      apply_llama3(rs, f);
      break;
  }
  return {f.begin(), f.end()};
}

}  // namespace frugal::model
