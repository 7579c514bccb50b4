// The calibration forward against transformers: on the golden fixtures (fp32 transformers
// hidden states), embedding + layer 0 must give hidden_states.1 and embedding + every layer +
// the final norm hidden_states.2.
#include <cmath>

#include <gtest/gtest.h>

#include "model/config.h"
#include "model/safetensors.h"
#include "quant_test_util.h"
#include "quantize/host_layer.h"

namespace frugal::quantize {
namespace {

std::vector<float> f32_of(const model::TensorEntry& e) {
  std::vector<float> v(static_cast<size_t>(e.shape.numel()));
  convert_to_f32(e.dtype, e.data, v.data(), e.shape.numel());
  return v;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

class HostLayer : public ::testing::TestWithParam<std::string> {};

TEST_P(HostLayer, MatchesTransformersHiddenStates) {
  const std::string dir = testing::golden_dir(GetParam());
  auto cfg = model::load_model_config(dir);
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().to_string();
  auto st = model::SafetensorsSet::open_dir(dir);
  auto ref = model::SafetensorsSet::open_file(dir + "/reference.safetensors");
  ASSERT_TRUE(st.is_ok() && ref.is_ok());
  const model::TensorEntry* ids_e = (*ref)->find("input_ids");
  std::vector<int32_t> ids(static_cast<size_t>(ids_e->shape.numel()));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(reinterpret_cast<const int64_t*>(ids_e->data)[i]);
  auto calib = HostCalibration::create(*cfg, **st, ids, static_cast<int64_t>(ids.size()));
  ASSERT_TRUE(calib.is_ok()) << calib.status().to_string();
  EXPECT_EQ(calib->hidden(), f32_of(*(*ref)->find("hidden_states.0")));
  for (int64_t l = 0; l < cfg->num_hidden_layers; ++l) {
    auto layer = read_layer(**st, l);
    ASSERT_TRUE(layer.is_ok()) << layer.status().to_string();
    ASSERT_TRUE(calib->run_layer(*layer, nullptr).is_ok());
    if (l + 1 < cfg->num_hidden_layers) {
      EXPECT_LT(max_abs_diff(calib->hidden(), f32_of(*(*ref)->find("hidden_states." + std::to_string(l + 1)))), 2e-4) << "layer " << l;
    }
  }
  const auto norm = f32_of(*(*st)->find("model.norm.weight"));
  EXPECT_LT(max_abs_diff(calib->final_norm(norm), f32_of(*(*ref)->find("hidden_states." + std::to_string(cfg->num_hidden_layers)))), 2e-4);
}

INSTANTIATE_TEST_SUITE_P(Golden, HostLayer, ::testing::Values("qwen2", "qwen2_tied", "llama3_rope", "llama_linear_rope"));

TEST(HostLayer, RefusesMoeAndMla) {
  auto cfg = model::load_model_config(testing::golden_dir("deepseek_v2"));
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().to_string();
  auto st = model::SafetensorsSet::open_dir(testing::golden_dir("deepseek_v2"));
  ASSERT_TRUE(st.is_ok());
  auto calib = HostCalibration::create(*cfg, **st, std::vector<int32_t>(64, 1), 64);
  ASSERT_FALSE(calib.is_ok());
  EXPECT_NE(calib.status().message().find("--method rtn only"), std::string::npos) << calib.status().message();
}

}  // namespace
}  // namespace frugal::quantize
