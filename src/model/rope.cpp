#include "model/rope.h"

#include <algorithm>
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

// The interpolation factor is rope_parameters' `factor` (checked against the transformers 5.17
// goldens: deepseek_v2 has factor 4 with max_position_embeddings / original = 16).
double yarn_factor(const ModelConfig& c) { return c.rope_scaling.factor; }

// _compute_yarn_parameters: frequencies that rotate fewer than beta_slow times over the
// original context are interpolated (divided by factor), those rotating more than beta_fast
// times kept, with a linear ramp over the dimensions in between. `f` holds 1 / base^(2i/dim).
void apply_yarn(const ModelConfig& c, int64_t dim, std::vector<double>& f) {
  const RopeScaling& rs = c.rope_scaling;
  const double factor = yarn_factor(c);
  const double base = c.rope_theta;
  const double orig = static_cast<double>(rs.original_max_position_embeddings > 0 ? rs.original_max_position_embeddings
                                                                                  : c.max_position_embeddings);
  auto correction_dim = [&](double rotations) {
    return static_cast<double>(dim) * std::log(orig / (rotations * 2 * std::numbers::pi)) / (2 * std::log(base));
  };
  double low = correction_dim(rs.beta_fast), high = correction_dim(rs.beta_slow);
  if (rs.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // linear_ramp_factor's guard against a zero-width ramp
  for (size_t i = 0; i < f.size(); ++i) {
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double extrapolation = 1 - ramp;  // weight of the unscaled frequency
    f[i] = f[i] / factor * (1 - extrapolation) + f[i] * extrapolation;
  }
}

}  // namespace

int64_t rotary_dim(const ModelConfig& c) { return c.is_mla() ? c.mla.qk_rope_head_dim : c.head_dim; }

double yarn_mscale(double scale, double mscale) {
  return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

double rope_attention_factor(const ModelConfig& c) {
  const RopeScaling& rs = c.rope_scaling;
  if (rs.type != RopeScalingType::kYarn) return 1.0;
  if (rs.attention_factor > 0) return rs.attention_factor;
  const double factor = yarn_factor(c);
  if (rs.mscale != 0 && rs.mscale_all_dim != 0) return yarn_mscale(factor, rs.mscale) / yarn_mscale(factor, rs.mscale_all_dim);
  return yarn_mscale(factor, 1.0);
}

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
      break;
    case RopeScalingType::kYarn:
      apply_yarn(c, dim, f);
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
