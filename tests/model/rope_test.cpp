// RoPE inverse frequencies against closed forms (the golden tests check them end to end
// against transformers).
#include <cmath>
#include <numbers>

#include <gtest/gtest.h>

#include "model/rope.h"

namespace frugal::model {
namespace {

ModelConfig base_config(int64_t head_dim, double theta) {
  ModelConfig c;
  c.head_dim = head_dim;
  c.rope_theta = theta;
  c.max_position_embeddings = 24;
  return c;
}

TEST(Rope, DefaultIsInversePowersOfTheta) {
  const auto f = rope_inv_freq(base_config(8, 10000.0), 0);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_FLOAT_EQ(f[1], 0.1f);    // 10000^(-2/8)
  EXPECT_FLOAT_EQ(f[2], 0.01f);
  EXPECT_FLOAT_EQ(f[3], 0.001f);
}

TEST(Rope, Qwen2ThetaOneMillion) {
  const auto f = rope_inv_freq(base_config(4, 1e6), 0);
  EXPECT_FLOAT_EQ(f[1], 0.001f);  // 1e6^(-2/4)
}

TEST(Rope, LinearDividesByFactor) {
  auto c = base_config(8, 10000.0);
  c.rope_scaling.type = RopeScalingType::kLinear;
  c.rope_scaling.factor = 4.0;
  const auto f = rope_inv_freq(c, 100);
  EXPECT_FLOAT_EQ(f[0], 0.25f);
  EXPECT_FLOAT_EQ(f[1], 0.025f);
}

TEST(Rope, DynamicNtkOnlyPastMaxPositions) {
  auto c = base_config(8, 10000.0);
  c.rope_scaling.type = RopeScalingType::kDynamic;
  c.rope_scaling.factor = 2.0;
  EXPECT_TRUE(rope_depends_on_position(c));
  // seq_len <= max_position_embeddings (24): unscaled.
  EXPECT_FLOAT_EQ(rope_inv_freq(c, 23)[1], 0.1f);
  // position 39 -> seq_len 40: base' = 1e4 * (2 * 40 / 24 - 1)^(8 / 6).
  const double base = 1e4 * std::pow(2.0 * 40 / 24 - 1, 8.0 / 6.0);
  const auto f = rope_inv_freq(c, 39);
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_FLOAT_EQ(f[1], static_cast<float>(1.0 / std::pow(base, 2.0 / 8)));
  EXPECT_FLOAT_EQ(f[3], static_cast<float>(1.0 / std::pow(base, 6.0 / 8)));
}

TEST(Rope, Llama3KeepsHighDividesLowSmoothsMiddle) {
  auto c = base_config(64, 500000.0);
  c.rope_scaling = RopeScaling{.type = RopeScalingType::kLlama3, .factor = 8.0, .low_freq_factor = 1.0,
                               .high_freq_factor = 4.0, .original_max_position_embeddings = 64};
  const auto f = rope_inv_freq(c, 0);
  const auto d = rope_inv_freq(base_config(64, 500000.0), 0);
  ASSERT_EQ(f.size(), 32u);
  for (size_t i = 0; i < f.size(); ++i) {
    const double wavelen = 2 * std::numbers::pi / d[i];
    if (wavelen < 64.0 / 4) {
      EXPECT_FLOAT_EQ(f[i], d[i]) << i;  // high frequency: kept
    } else if (wavelen > 64.0 / 1) {
      EXPECT_FLOAT_EQ(f[i], d[i] / 8) << i;  // low frequency: divided by factor
    } else {
      // Medium: (1 - s) * f / 8 + s * f with s = (64 / wavelen - 1) / (4 - 1).
      const double s = (64.0 / wavelen - 1.0) / 3.0;
      EXPECT_NEAR(f[i], (1 - s) * d[i] / 8 + s * d[i], 1e-7) << i;
      EXPECT_LT(f[i], d[i]);
      EXPECT_GT(f[i], d[i] / 8);
    }
  }
  // i = 4: wavelen = 2 pi * 500000^(8/64) = 32.4, in the medium band.
  EXPECT_NEAR(2 * std::numbers::pi / d[4], 32.4, 0.05);
}

// YaRN, by hand: dim 8, theta 1e4, original context 32 of 128 (factor 4), beta 32 / 1. The
// correction dims are 8 ln(32 / (2 pi beta)) / (2 ln 1e4): -0.80 for beta_fast (floor, clamped
// to 0) and 0.71 for beta_slow (ceil: 1), so the ramp is 0 at i = 0 and 1 from i = 1: the
// first frequency is kept, the others divided by 4.
TEST(Rope, YarnRampsBetweenExtrapolationAndInterpolation) {
  auto c = base_config(8, 10000.0);
  c.max_position_embeddings = 128;
  c.rope_scaling.type = RopeScalingType::kYarn;
  c.rope_scaling.factor = 4.0;
  c.rope_scaling.original_max_position_embeddings = 32;
  const auto f = rope_inv_freq(c, 0);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_FLOAT_EQ(f[1], 0.1f / 4);
  EXPECT_FLOAT_EQ(f[2], 0.01f / 4);
  EXPECT_FLOAT_EQ(f[3], 0.001f / 4);
  // attention_factor: 0.1 ln 4 + 1 without mscale; 1 with mscale == mscale_all_dim;
  // (0.1 * 1 * ln 4 + 1) / (0.1 * 0.5 * ln 4 + 1) with 1 and 0.5; given explicitly, itself.
  EXPECT_NEAR(rope_attention_factor(c), 0.1 * std::log(4.0) + 1, 1e-12);
  c.rope_scaling.mscale = c.rope_scaling.mscale_all_dim = 0.707;
  EXPECT_DOUBLE_EQ(rope_attention_factor(c), 1.0);
  c.rope_scaling.mscale = 1.0;
  c.rope_scaling.mscale_all_dim = 0.5;
  EXPECT_NEAR(rope_attention_factor(c), (0.1 * std::log(4.0) + 1) / (0.05 * std::log(4.0) + 1), 1e-12);
  c.rope_scaling.attention_factor = 0.9;
  EXPECT_DOUBLE_EQ(rope_attention_factor(c), 0.9);
  EXPECT_DOUBLE_EQ(rope_attention_factor(base_config(8, 1e4)), 1.0);
}

}  // namespace
}  // namespace frugal::model
