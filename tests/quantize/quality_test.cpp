// Acceptance 2 (and 1 for the calibrated methods): on golden models and on the trained
// reference model, GPTQ and AWQ have a lower layer-output error than RTN at the same group size
// on the calibration data, and SmoothQuant W8A8 lower than plain W8A8 RTN (per decoder layer,
// the sum of its linears' relative output errors); the written directory reads back to exactly
// the weights (and folded norms) the quantizer computed.
#include <cmath>
#include <filesystem>
#include <map>

#include <gtest/gtest.h>

#include "core/dtype.h"
#include "model/safetensors.h"
#include "quant_test_util.h"
#include "quantize/packing.h"
#include "quantize/quantize.h"
#include "quantize/rtn.h"

namespace frugal::quantize {
namespace {

struct Case {
  std::string model;  // golden name, or "reference"
  QuantizeOptions opts;
  int64_t calib_tokens;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.model << "_" << method_name(c.opts.method); }

std::string model_dir(const Case& c) {
  return c.model == "reference" ? testing::reference_model_dir() : testing::golden_dir(c.model);
}

class MethodQuality : public ::testing::TestWithParam<Case> {};

TEST_P(MethodQuality, BeatsRtnAndRoundTrips) {
  const Case& c = GetParam();
  const std::string work = testing::quant_temp_dir(c.model + "_" + method_name(c.opts.method));
  QuantizeRequest r{.model_dir = model_dir(c), .out_dir = work + "/out", .options = c.opts};
  r.keep_dequantized = true;
  r.calib_tokens = c.calib_tokens;
  r.seq_len = 128;
  r.min_calib_tokens = 64;
  if (c.model == "reference") {
    r.calib_file = testing::source_root() + "/data/calib/war-and-peace-ch1-3.txt";
  } else {
    auto cfg = testing::read_json_file(r.model_dir + "/config.json");
    const int64_t vocab = cfg["vocab_size"];
    for (int64_t i = 0; i < c.calib_tokens; ++i) r.calib_ids.push_back(static_cast<int32_t>((i * 7919 + 13) % vocab));
  }
  auto rep = quantize_model(r);
  ASSERT_TRUE(rep.is_ok()) << rep.status().to_string();
  std::map<std::string, std::pair<double, double>> per_layer;
  for (const auto& l : rep->linears) {
    ASSERT_FALSE(std::isnan(l.err)) << l.name;
    auto& p = per_layer[l.name.substr(0, l.name.find('.', 13))];
    p.first += l.err;
    p.second += l.err_rtn;
  }
  ASSERT_FALSE(per_layer.empty());
  for (const auto& [layer, e] : per_layer) {
    EXPECT_LT(e.first, e.second) << layer << ": " << method_name(c.opts.method) << " " << e.first << " vs rtn " << e.second;
  }
  // Round trip: the directory reads back to the quantizer's weights and folded norms.
  auto st = model::SafetensorsSet::open_dir(r.out_dir);
  ASSERT_TRUE(st.is_ok()) << st.status().to_string();
  auto layout = parse_quantization_config(testing::read_json_file(r.out_dir + "/config.json")["quantization_config"], "out");
  ASSERT_TRUE(layout.is_ok()) << layout.status().to_string();
  for (const auto& [name, want] : rep->dequantized) {
    if (name.ends_with(".weight")) {  // a norm: stored in the output dtype
      const model::TensorEntry* e = (*st)->find(name);
      ASSERT_NE(e, nullptr) << name;
      std::vector<float> got(static_cast<size_t>(e->shape.numel()));
      convert_to_f32(e->dtype, e->data, got.data(), e->shape.numel());
      for (size_t i = 0; i < got.size(); ++i) {
        const float w = e->dtype == DType::kF16 ? round_f16(want[i]) : e->dtype == DType::kBF16 ? round_bf16(want[i]) : want[i];
        ASSERT_EQ(got[i], w) << name << "[" << i << "]";
      }
      continue;
    }
    int64_t out = 0, in = 0;
    auto back = read_quantized_linear(name, [&](const std::string& rel) { return (*st)->find(name + "." + rel); }, *layout, &out, &in);
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    ASSERT_EQ(*back, want) << name;
    auto engine = testing::engine_dequantized(r.out_dir, **st, name);  // the engine's converters
    ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
    ASSERT_EQ(*engine, want) << name;
  }
  std::filesystem::remove_all(work);
}

QuantizeOptions opts(Format f, Method m, int64_t group) {
  QuantizeOptions o{.format = f, .method = m, .group_size = group};
  return o;
}

INSTANTIATE_TEST_SUITE_P(
    Golden, MethodQuality,
    ::testing::Values(Case{"qwen2", opts(Format::kInt4, Method::kGptq, 64), 256},
                      Case{"qwen2", opts(Format::kInt4, Method::kAwq, 64), 256},
                      Case{"qwen2", opts(Format::kInt8, Method::kSmoothQuant, 0), 256},
                      Case{"llama_linear_rope", opts(Format::kInt4, Method::kAwq, 64), 256},  // n_kv == n_head: v -> o fold
                      Case{"llama_linear_rope", [] { auto o = opts(Format::kInt4, Method::kGptq, 64); o.sym = true; o.act_order = true; return o; }(), 256},
                      Case{"qwen2_tied", opts(Format::kInt8, Method::kGptq, 64), 256}),
    [](const ::testing::TestParamInfo<Case>& i) { return i.param.model + "_" + method_name(i.param.opts.method) + std::to_string(i.index); });

INSTANTIATE_TEST_SUITE_P(
    Reference, MethodQuality,
    ::testing::Values(Case{"reference", opts(Format::kInt4, Method::kGptq, 128), 128},
                      Case{"reference", [] { auto o = opts(Format::kInt4, Method::kAwq, 128); o.awq_grid = 10; return o; }(), 128},
                      Case{"reference", opts(Format::kInt8, Method::kSmoothQuant, 0), 256}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string("reference_") + method_name(i.param.opts.method); });

}  // namespace
}  // namespace frugal::quantize
