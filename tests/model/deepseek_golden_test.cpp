// DeepSeek golden tests against transformers 5.17 (tests/data/golden/deepseek_v2, deepseek_v3;
// scripts/golden/make_deepseek_golden.py, fp32 compute on bf16-rounded weights). For each, on
// the reference backend, the CPU backend and the CPU backend with device-style placement:
//   - teacher-forced logits of all T tokens: every row within 1e-4 relative error (a row's error
//     is max_j |ours_j - ref_j| / max_j |ref_j|), hidden states likewise;
//   - per MoE layer, each token's routed experts equal transformers' (router.{layer}.topk_idx)
//     and their weights within 1e-4 (router.{layer}.topk_weight; both sorted by expert id);
//   - greedy tokens after the prompt, decoded one token per step through the MLA latent cache.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "model_test_util.h"
#include "moe_routes.h"
#include "ops/forwarding_backend.h"
#include "ops/ref_backend.h"
#include "test_paths.h"

namespace frugal::model {
namespace {

constexpr double kTol = 1e-4;

std::vector<int64_t> i64_of(const TensorEntry* t) {
  std::vector<int64_t> v(static_cast<size_t>(t->shape.numel()));
  std::memcpy(v.data(), t->data, v.size() * sizeof(int64_t));
  return v;
}

std::vector<int32_t> ids_of(const TensorEntry* t) {
  std::vector<int32_t> v;
  for (int64_t x : i64_of(t)) v.push_back(static_cast<int32_t>(x));
  return v;
}

class ArenaCpuBackend final : public ops::ForwardingBackend {
 public:
  ArenaCpuBackend() : ForwardingBackend(make_cpu_backend()) {}
  std::string name() const override { return "cpu-arena"; }
  bool weights_in_host_memory() const override { return false; }
  bool supports_sample() const override { return false; }
};

class DeepseekGolden : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  std::string dir() const {
    return (std::filesystem::path(frugal::testing::source_root()) / "tests/data/golden" / std::get<0>(GetParam())).string();
  }
  std::unique_ptr<ops::Backend> make_backend() const {
    const std::string& b = std::get<1>(GetParam());
    if (b == "cpu") return make_cpu_backend();
    if (b == "cpuarena") return std::make_unique<ArenaCpuBackend>();
    return ops::make_ref_backend();
  }
};

TEST_P(DeepseekGolden, TeacherForcedLogitsAndHiddenStates) {
  auto ref = SafetensorsSet::open_file(dir() + "/reference.safetensors");
  ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
  const auto ids = ids_of((*ref)->find("input_ids"));
  const int32_t T = static_cast<int32_t>(ids.size());
  auto backend = make_backend();
  auto m = Model::load(dir(), backend.get(), {.max_logit_rows = T});
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  const auto& c = (*m)->config();
  auto kv = KvStorage::create(backend.get(), c, {.n_blocks = (T + 15) / 16, .block_size = 16});
  ASSERT_TRUE(kv.is_ok()) << kv.status().to_string();
  std::vector<int32_t> pos(ids.size()), table;
  for (int32_t i = 0; i < T; ++i) pos[static_cast<size_t>(i)] = i;
  for (int32_t b = 0; b < (T + 15) / 16; ++b) table.push_back(b);
  const std::vector<int32_t> q_start = {0, T}, ctx = {T};
  std::vector<float> logits(static_cast<size_t>(T * c.vocab_size));
  (*m)->set_taps_enabled(true);
  ASSERT_TRUE((*m)->forward({.tokens = ids, .positions = pos, .q_start = q_start, .ctx_len = ctx,
                             .block_tables = table, .max_blocks_per_seq = static_cast<int32_t>(table.size()),
                             .slot_mapping = pos, .logits_rows = pos}, **kv, logits.data()).is_ok());
  const float* want = reinterpret_cast<const float*>((*ref)->find("logits")->data);
  for (int32_t t = 0; t < T; ++t)
    EXPECT_LE(frugal::testing::row_rel_error(logits.data() + t * c.vocab_size, want + t * c.vocab_size, c.vocab_size), kTol)
        << "logits row " << t;
  const int64_t L = c.num_hidden_layers, H = c.hidden_size;
  for (int64_t i = 0; i <= L; ++i) {
    const std::string tap = i == 0 ? "embed" : i == L ? "out_norm" : "blk." + std::to_string(i - 1) + ".out";
    const TensorEntry* hs = (*ref)->find("hidden_states." + std::to_string(i));
    ASSERT_NE(hs, nullptr);
    ASSERT_NE((*m)->tap(tap), nullptr) << tap;
    for (int32_t t = 0; t < T; ++t)
      EXPECT_LE(frugal::testing::row_rel_error((*m)->tap(tap)->data() + t * H, reinterpret_cast<const float*>(hs->data) + t * H, H), kTol)
          << tap << " row " << t;
  }
}


// Per MoE layer, each token's routed experts (the nonzero entries of the router weights the
// family taps) equal transformers' and their weights agree to 1e-4. Skipped while the fixture's
// router tensors are not expert choices (make_deepseek_golden.py's first capture under
// transformers 5.17 recorded two float tensors; regenerate with the fixed script).
TEST_P(DeepseekGolden, RouterChoices) {
  auto ref = SafetensorsSet::open_file(dir() + "/reference.safetensors");
  ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
  const auto ids = ids_of((*ref)->find("input_ids"));
  const int32_t T = static_cast<int32_t>(ids.size());
  auto backend = make_backend();
  auto m = Model::load(dir(), backend.get(), {.max_logit_rows = T});
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  const auto& c = (*m)->config();
  const int64_t L = c.num_hidden_layers, E = c.moe.n_routed_experts, K = c.moe.num_experts_per_tok;
  for (int64_t layer = c.moe.first_k_dense_replace; layer < L; ++layer) {
    const TensorEntry* want_idx = (*ref)->find("router." + std::to_string(layer) + ".topk_idx");
    ASSERT_NE(want_idx, nullptr) << "layer " << layer;
    const auto widx = i64_of(want_idx);
    for (int32_t t = 0; t < T; ++t)
      for (int64_t j = 1; j < K; ++j)
        if (widx[static_cast<size_t>(t * K + j)] <= widx[static_cast<size_t>(t * K + j - 1)])
          GTEST_SKIP() << "fixture router." << layer << ".topk_idx row " << t
                       << " is not K distinct sorted expert ids: regenerate the fixture";
  }
  auto kv = KvStorage::create(backend.get(), c, {.n_blocks = (T + 15) / 16, .block_size = 16});
  ASSERT_TRUE(kv.is_ok()) << kv.status().to_string();
  std::vector<int32_t> pos(ids.size()), table;
  for (int32_t i = 0; i < T; ++i) pos[static_cast<size_t>(i)] = i;
  for (int32_t b = 0; b < (T + 15) / 16; ++b) table.push_back(b);
  const std::vector<int32_t> q_start = {0, T}, ctx = {T};
  std::vector<float> logits(static_cast<size_t>(T * c.vocab_size));
  (*m)->set_taps_enabled(true);
  ASSERT_TRUE((*m)->forward({.tokens = ids, .positions = pos, .q_start = q_start, .ctx_len = ctx,
                             .block_tables = table, .max_blocks_per_seq = static_cast<int32_t>(table.size()),
                             .slot_mapping = pos, .logits_rows = pos}, **kv, logits.data()).is_ok());
  for (int64_t layer = c.moe.first_k_dense_replace; layer < L; ++layer) {
    const auto widx = i64_of((*ref)->find("router." + std::to_string(layer) + ".topk_idx"));
    const float* ww = reinterpret_cast<const float*>((*ref)->find("router." + std::to_string(layer) + ".topk_weight")->data);
    const auto* dense = (*m)->tap("blk." + std::to_string(layer) + ".router");
    ASSERT_NE(dense, nullptr);
    for (int32_t t = 0; t < T; ++t) {
      std::vector<int64_t> got;  // chosen experts in id order
      std::vector<float> got_w;
      for (int64_t e = 0; e < E; ++e)
        if ((*dense)[static_cast<size_t>(t * E + e)] != 0.0f) {
          got.push_back(e);
          got_w.push_back((*dense)[static_cast<size_t>(t * E + e)]);
        }
      const std::vector<int64_t> want_t(widx.begin() + t * K, widx.begin() + (t + 1) * K);
      ASSERT_EQ(got, want_t) << "layer " << layer << " token " << t;
      for (int64_t j = 0; j < K; ++j)
        EXPECT_NEAR(got_w[static_cast<size_t>(j)], ww[t * K + j], 1e-4 * std::max(1.0f, std::fabs(ww[t * K + j])))
            << "layer " << layer << " token " << t;
    }
  }
}

TEST_P(DeepseekGolden, GreedyContinuation) {
  auto ref = SafetensorsSet::open_file(dir() + "/reference.safetensors");
  ASSERT_TRUE(ref.is_ok());
  const auto prompt = ids_of((*ref)->find("greedy_input_ids"));
  const auto want = ids_of((*ref)->find("greedy_output_ids"));
  auto backend = make_backend();
  auto m = Model::load(dir(), backend.get(), {.max_logit_rows = 1});
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  const auto& c = (*m)->config();
  const int32_t total = static_cast<int32_t>(want.size()), bs = 4;
  auto kv = KvStorage::create(backend.get(), c, {.n_blocks = (total + bs - 1) / bs, .block_size = bs});
  ASSERT_TRUE(kv.is_ok());
  std::vector<int32_t> table;  // blocks in reverse order, to exercise the block table
  for (int32_t b = (total + bs - 1) / bs - 1; b >= 0; --b) table.push_back(b);
  std::vector<int32_t> seq = prompt;
  std::vector<float> logits(static_cast<size_t>(c.vocab_size));
  int32_t done = 0;
  while (seq.size() < want.size()) {
    const int32_t n = static_cast<int32_t>(seq.size()) - done;
    std::vector<int32_t> tokens(seq.begin() + done, seq.end()), pos, slots;
    for (int32_t i = done; i < done + n; ++i) {
      pos.push_back(i);
      slots.push_back(table[static_cast<size_t>(i / bs)] * bs + i % bs);
    }
    const std::vector<int32_t> q_start = {0, n}, ctx = {done + n}, rows = {n - 1};
    ASSERT_TRUE((*m)->forward({.tokens = tokens, .positions = pos, .q_start = q_start, .ctx_len = ctx,
                               .block_tables = table, .max_blocks_per_seq = static_cast<int32_t>(table.size()),
                               .slot_mapping = slots, .logits_rows = rows}, **kv, logits.data()).is_ok());
    done += n;
    for (int64_t e : (*m)->generation_config().eos_token_ids) logits[static_cast<size_t>(e)] = -INFINITY;
    seq.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
  }
  EXPECT_EQ(seq, want);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DeepseekGolden,
                         ::testing::Combine(::testing::Values("deepseek_v2", "deepseek_v3"),
                                            ::testing::Values("ref", "cpu", "cpuarena")),
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

}  // namespace
}  // namespace frugal::model

namespace frugal::model {
namespace {

// Issue 19, acceptance 1 (bf16): why the V3 fixture misses 2e-2 on some rows in bf16. The
// reference backend with bf16 activations (exact arithmetic, bf16 storage between ops) against
// the fp32 reference: every route that differs from the fp32 oracle's (which equals
// transformers') is a near tie that the bf16 rounding of the router's input explains (gap <= 4x
// the score shift, moe_routes.h), each route equals what the run's own f32 logits choose, and
// every row of a token without a flipped route is within 2e-2. The flips are printed.
TEST(DeepseekBf16, RouteFlipsOnlyAtNearTies) {
  for (const char* name : {"deepseek_v2", "deepseek_v3"}) {
    SCOPED_TRACE(name);
    const std::string dir = (std::filesystem::path(frugal::testing::source_root()) / "tests/data/golden" / name).string();
    auto ref = SafetensorsSet::open_file(dir + "/reference.safetensors");
    ASSERT_TRUE(ref.is_ok());
    const auto ids = ids_of((*ref)->find("input_ids"));
    const int32_t T = static_cast<int32_t>(ids.size());
    frugal::testing::TapsRun f32, bf16;
    auto b32 = ops::make_ref_backend(DType::kF32), b16 = ops::make_ref_backend(DType::kBF16);
    ASSERT_TRUE(frugal::testing::teacher_forced_run(dir, b32.get(), ids, f32).is_ok());
    ASSERT_TRUE(frugal::testing::teacher_forced_run(dir, b16.get(), ids, bf16).is_ok());
    const auto& c = f32.config;
    const int64_t K = c.moe.num_experts_per_tok;
    // The margin helper's fp32 decisions are transformers' choices.
    for (const auto& [l, lg] : f32.router_logits) {
      const auto widx = i64_of((*ref)->find("router." + std::to_string(l) + ".topk_idx"));
      const auto bias = frugal::testing::router_bias(dir, l);
      for (int32_t t = 0; t < T; ++t) {
        const auto d = frugal::testing::route_decision(c.moe, lg.data() + t * c.moe.n_routed_experts,
                                                       bias.empty() ? nullptr : bias.data(), static_cast<int>(c.moe.n_routed_experts));
        ASSERT_EQ(std::vector<int64_t>(d.experts.begin(), d.experts.end()),
                  std::vector<int64_t>(widx.begin() + t * K, widx.begin() + (t + 1) * K)) << "layer " << l << " token " << t;
      }
    }
    const auto cmp = frugal::testing::compare_routes(dir, f32, bf16, T);
    std::printf("%s, bf16 reference: %d of %d routes differ from fp32\n%s", name, cmp.flips, cmp.decisions, cmp.report.c_str());
    EXPECT_EQ(cmp.unexplained, 0);
    EXPECT_EQ(cmp.own_mismatch, 0);
    const float* want = reinterpret_cast<const float*>((*ref)->find("logits")->data);
    for (int32_t t = 0; t < T; ++t) {
      const double err = frugal::testing::row_rel_error(bf16.logits.data() + t * c.vocab_size, want + t * c.vocab_size, c.vocab_size);
      if (cmp.flipped[static_cast<size_t>(t)]) std::printf("  row %d (flipped route): error %.3g\n", t, err);
      else EXPECT_LE(err, 2e-2) << "logits row " << t;
    }
  }
}

}  // namespace
}  // namespace frugal::model
