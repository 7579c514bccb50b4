// moe_route on hand-computed cases (the harness compares backends with the reference; these
// check the reference itself against transformers' routing rules worked out by hand).
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "ops/reference.h"

namespace frugal::ops {
namespace {

struct Routed {
  std::vector<int32_t> idx;
  std::vector<float> w, dense;
};

Routed route(std::vector<float> logits, const std::vector<float>* bias, int32_t top_k, int32_t n_group,
             int32_t topk_group, MoeScoring s, MoeTopk m, bool norm, float scale) {
  const int32_t E = static_cast<int32_t>(logits.size());
  Routed r{std::vector<int32_t>(static_cast<size_t>(top_k)), std::vector<float>(static_cast<size_t>(top_k)),
           std::vector<float>(static_cast<size_t>(E))};
  const MoeRouteParams p{.logits = logits.data(), .ld_logits = E, .bias = bias ? bias->data() : nullptr,
                         .bias_dtype = DType::kF32, .n_tokens = 1, .n_experts = E, .top_k = top_k, .n_group = n_group,
                         .topk_group = topk_group, .scoring = s, .method = m, .norm_topk_prob = norm,
                         .routed_scaling_factor = scale, .topk_idx = r.idx.data(), .topk_weight = r.w.data(),
                         .dense_weight = r.dense.data()};
  ref::moe_route(p);
  // The CPU backend agrees exactly (it runs the reference per token range).
  Routed c = r;
  MoeRouteParams q = p;
  q.topk_idx = c.idx.data(), q.topk_weight = c.w.data(), q.dense_weight = c.dense.data();
  EXPECT_TRUE(make_cpu_backend()->moe_route(q).is_ok());
  EXPECT_EQ(c.idx, r.idx);
  EXPECT_EQ(c.w, r.w);
  return r;
}

// softmax([0, ln 2, ln 3, 0]) = [1, 2, 3, 1] / 7: top 2 are experts 2 (3/7) and 1 (2/7).
TEST(MoeRoute, SoftmaxGreedy) {
  const std::vector<float> l = {0.0f, std::log(2.0f), std::log(3.0f), 0.0f};
  Routed r = route(l, nullptr, 2, 1, 1, MoeScoring::kSoftmax, MoeTopk::kGreedy, false, 1.0f);
  EXPECT_EQ(r.idx, (std::vector<int32_t>{2, 1}));
  EXPECT_NEAR(r.w[0], 3.0 / 7, 1e-6);
  EXPECT_NEAR(r.w[1], 2.0 / 7, 1e-6);
  EXPECT_EQ(r.dense[0], 0.0f);
  EXPECT_NEAR(r.dense[2], 3.0 / 7, 1e-6);
  // Normalized and scaled: 3/5 and 2/5, times 16.
  r = route(l, nullptr, 2, 1, 1, MoeScoring::kSoftmax, MoeTopk::kGreedy, true, 16.0f);
  EXPECT_NEAR(r.w[0], 16 * 0.6, 1e-5);
  EXPECT_NEAR(r.w[1], 16 * 0.4, 1e-5);
}

// V3: sigmoid(0) = 0.5 for every expert, so the choices are 0.5 + bias:
//   [0.85, 0.5, 0.8, 0.7, 0.5, 0.55, 0.9, 0.4]; groups of 2 score the sum of their top 2:
//   [1.35, 1.5, 1.05, 1.3] -> groups 1 and 0 are kept -> experts 0 (0.85) and 2 (0.8), not 6 (0.9).
// Weights are the sigmoid scores (0.5, 0.5), normalized (0.5 each), times 2.5.
TEST(MoeRoute, SigmoidNoauxTcGroupLimited) {
  const std::vector<float> l(8, 0.0f), bias = {0.35f, 0.0f, 0.3f, 0.2f, 0.0f, 0.05f, 0.4f, -0.1f};
  Routed r = route(l, &bias, 2, 4, 2, MoeScoring::kSigmoid, MoeTopk::kNoauxTc, true, 2.5f);
  EXPECT_EQ(r.idx, (std::vector<int32_t>{0, 2}));
  EXPECT_NEAR(r.w[0], 1.25, 1e-6);
  EXPECT_NEAR(r.w[1], 1.25, 1e-6);
  // Without groups the best two choices win: 6 (0.9) and 0 (0.85).
  r = route(l, &bias, 2, 1, 1, MoeScoring::kSigmoid, MoeTopk::kGreedy, true, 2.5f);
  EXPECT_EQ(r.idx, (std::vector<int32_t>{6, 0}));
}

// group_limited_greedy (V2): a group scores its best expert. softmax of [ln 4, 0, ln 3, ln 3.5]
// ∝ [4, 1, 3, 3.5]; groups {0, 1} -> 4, {2, 3} -> 3.5; keep 1 group: experts 0 and 1, even though
// experts 3 and 2 beat expert 1. Weights: the softmax scores 4/11.5 and 1/11.5.
TEST(MoeRoute, GroupLimitedGreedy) {
  const std::vector<float> l = {std::log(4.0f), 0.0f, std::log(3.0f), std::log(3.5f)};
  Routed r = route(l, nullptr, 2, 2, 1, MoeScoring::kSoftmax, MoeTopk::kGroupLimitedGreedy, false, 1.0f);
  EXPECT_EQ(r.idx, (std::vector<int32_t>{0, 1}));
  EXPECT_NEAR(r.w[0], 4 / 11.5, 1e-6);
  EXPECT_NEAR(r.w[1], 1 / 11.5, 1e-6);
}

}  // namespace
}  // namespace frugal::ops
