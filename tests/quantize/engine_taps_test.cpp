// The calibration forward against frugal's engine: on the trained reference model (bf16) and a
// golden model, the residual stream after each layer's attention block and after each layer
// equals the engine's debug taps ("blk.{i}.attn_out", "blk.{i}.out") on the same tokens.
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "quant_test_util.h"
#include "quantize/host_layer.h"

namespace frugal::quantize {
namespace {

// max_j |a_j - b_j| / max_j |b_j| of one row.
double row_rel(const float* a, const float* b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t j = 0; j < n; ++j) {
    num = std::max(num, std::fabs(static_cast<double>(a[j]) - b[j]));
    den = std::max(den, std::fabs(static_cast<double>(b[j])));
  }
  return den > 0 ? num / den : num;
}

class EngineTaps : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineTaps, HostForwardMatchesTheEngine) {
  const std::string dir = GetParam() == "reference" ? testing::reference_model_dir() : testing::golden_dir(GetParam());
  const int32_t T = 64;
  auto backend = make_cpu_backend();
  auto m = model::Model::load(dir, backend.get(), {.max_batch_tokens = T, .max_logit_rows = 1});
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  const auto& c = (*m)->config();
  std::vector<int32_t> ids(T), pos(T), table;
  for (int32_t i = 0; i < T; ++i) {
    ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919 + 13) % c.vocab_size);
    pos[static_cast<size_t>(i)] = i;
  }
  for (int32_t b = 0; b < (T + 15) / 16; ++b) table.push_back(b);
  auto kv = model::KvStorage::create(backend.get(), c, {.n_blocks = (T + 15) / 16, .block_size = 16});
  ASSERT_TRUE(kv.is_ok());
  const std::vector<int32_t> q_start = {0, T}, ctx = {T}, rows = {T - 1};
  std::vector<float> logits(static_cast<size_t>(c.vocab_size));
  (*m)->set_taps_enabled(true);
  ASSERT_TRUE((*m)->forward({.tokens = ids, .positions = pos, .q_start = q_start, .ctx_len = ctx, .block_tables = table,
                             .max_blocks_per_seq = static_cast<int32_t>(table.size()), .slot_mapping = pos, .logits_rows = rows},
                            **kv, logits.data()).is_ok());

  auto st = model::SafetensorsSet::open_dir(dir);
  ASSERT_TRUE(st.is_ok());
  auto calib = HostCalibration::create(c, **st, ids, T);
  ASSERT_TRUE(calib.is_ok()) << calib.status().to_string();
  const double tol = c.torch_dtype == DType::kF32 ? 1e-4 : 2e-2;  // bf16 activations in the engine
  const int64_t H = c.hidden_size;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    auto layer = read_layer(**st, l);
    ASSERT_TRUE(layer.is_ok());
    std::vector<float> attn_out;
    auto hook = [&](Stage s, const std::vector<float>&, LayerF32&) -> Status {
      if (s == Stage::kGateUp) attn_out = calib->hidden();  // residual after the attention block
      return {};
    };
    ASSERT_TRUE(calib->run_layer(*layer, hook).is_ok());
    const std::vector<float>* ta = (*m)->tap("blk." + std::to_string(l) + ".attn_out");
    const std::vector<float>* to = (*m)->tap("blk." + std::to_string(l) + ".out");
    ASSERT_TRUE(ta && to);
    for (int32_t t = 0; t < T; ++t) {
      EXPECT_LE(row_rel(attn_out.data() + t * H, ta->data() + t * H, H), tol) << "layer " << l << " attn_out row " << t;
      EXPECT_LE(row_rel(calib->hidden().data() + t * H, to->data() + t * H, H), tol) << "layer " << l << " out row " << t;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, EngineTaps, ::testing::Values("reference", "qwen2", "llama_linear_rope"));

}  // namespace
}  // namespace frugal::quantize
