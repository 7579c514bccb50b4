// The quantized-checkpoint fixtures made on the GPU machine by scripts/gpu/quant_fixtures.py
// (packed with plain torch from the published layouts, independent of this code), once
// extracted into tests/data/quant/: every linear of every fixture loads through
// parse_quantization_config + load_quant_linear, and the dequantized weights equal the
// script's dequantization (reference.safetensors "dequant.*") to f32 rounding. Skipped until
// the fixtures are in the tree. Also: quantization_config errors (no fixtures needed).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "backend/cpu/quant_matmul.h"
#include "model/quant/quant_loader.h"
#include "ops/reference.h"

namespace frugal::model {
namespace {

namespace fs = std::filesystem;

const char* kLinears[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                          "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};

fs::path fixture_root() { return fs::path(FRUGAL_SOURCE_ROOT) / "tests" / "data" / "quant"; }

float load_f32(const TensorEntry& e, int64_t i) { return ops::ref::load(e.dtype, e.data, i); }

TEST(QuantFixtures, EveryLinearLoadsAndDequantizesLikeTheScript) {
  if (!fs::exists(fixture_root())) GTEST_SKIP() << "no fixtures at " << fixture_root() << " (run scripts/gpu/quant_fixtures.py)";
  int n_dirs = 0;
  for (const auto& d : fs::directory_iterator(fixture_root())) {
    if (!d.is_directory() || !fs::exists(d.path() / "config.json")) continue;
    ++n_dirs;
    const std::string name = d.path().filename().string();
    SCOPED_TRACE(name);
    nlohmann::json cfg = nlohmann::json::parse(std::ifstream(d.path() / "config.json"));
    Result<QuantConfig> qc = parse_quantization_config(cfg["quantization_config"], name + "/config.json");
    ASSERT_TRUE(qc) << qc.status().to_string();
    auto st = SafetensorsSet::open_dir(d.path().string());
    ASSERT_TRUE(st) << st.status().to_string();
    auto ref = SafetensorsSet::open_file((d.path() / "reference.safetensors").string());
    ASSERT_TRUE(ref) << ref.status().to_string();
    ThreadPool pool(2);
    for (int layer = 0; layer < 2; ++layer)
      for (const char* lin : kLinears) {
        const std::string prefix = "model.layers." + std::to_string(layer) + "." + lin;
        ASSERT_TRUE(is_quantized_linear(*qc, **st, prefix)) << prefix;
        Result<quant::QuantWeight> w = load_quant_linear(*qc, **st, prefix);
        ASSERT_TRUE(w) << w.status().to_string();
        const TensorEntry* dump = (*ref)->find("dequant." + prefix + ".weight");
        if (dump == nullptr) continue;
        const std::vector<float> deq = quant::dequantize(*w);
        ASSERT_EQ(dump->shape[1], w->k) << prefix;
        for (int64_t r = 0; r < dump->shape[0]; ++r)
          for (int64_t j = 0; j < w->k; ++j) {
            const float want = load_f32(*dump, r * w->k + j), got = deq[static_cast<size_t>(r * w->k + j)];
            ASSERT_NEAR(got, want, 1e-6 * std::fabs(want) + 1e-9) << prefix << " row " << r << " col " << j;
          }
        // The kernels on the real weights, against the reference matmul on them.
        std::vector<float> x(static_cast<size_t>(3 * w->k)), y(static_cast<size_t>(3 * w->n)), yr(y.size());
        for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
        ASSERT_TRUE(cpu::quant_matmul(pool, {.x = x.data(), .ld_x = w->k, .w = &*w, .y = y.data(), .ld_y = w->n, .m = 3, .exact_activations = true}));
        ops::ref::matmul({.x = x.data(), .x_dtype = DType::kF32, .ld_x = w->k, .w = ops::dense_weight(deq.data(), DType::kF32),
                          .bias = nullptr, .bias_dtype = DType::kF32, .y = yr.data(), .y_dtype = DType::kF32,
                          .ld_y = w->n, .m = 3, .n = w->n, .k = w->k, .accumulate = false});
        for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], yr[i], 1e-4 * (1 + std::fabs(yr[i]))) << prefix;
      }
    // Embeddings and norms stay as they were.
    EXPECT_FALSE(is_quantized_linear(*qc, **st, "model.embed_tokens"));
  }
  EXPECT_GT(n_dirs, 0);
}

TEST(QuantConfigErrors, NamesTheField) {
  auto err = [](const char* text) {
    Result<QuantConfig> r = parse_quantization_config(nlohmann::json::parse(text), "x/config.json");
    return r ? std::string("ok") : r.status().message();
  };
  EXPECT_NE(err(R"({"quant_method": "hqq"})").find("quantization_config.quant_method = 'hqq' is not supported"), std::string::npos);
  EXPECT_NE(err(R"({"quant_method": "gptq", "bits": 4})").find("quantization_config.group_size is missing"), std::string::npos);
  EXPECT_NE(err(R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "checkpoint_format": "marlin"})")
                .find("checkpoint_format = 'marlin'"), std::string::npos);
  EXPECT_NE(err(R"({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemv"})").find("version = 'gemv'"),
            std::string::npos);
  EXPECT_NE(err(R"({"quant_method": "fp8", "fmt": "e4m3"})").find("weight_block_size"), std::string::npos);
  EXPECT_NE(err(R"({"quant_method": "bitsandbytes", "load_in_8bit": true})").find("nf4 only"), std::string::npos);
  EXPECT_EQ(err(R"({"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": true, "version": "gemm"})"), "ok");
  Result<QuantConfig> g = parse_quantization_config(
      nlohmann::json::parse(R"({"quant_method": "gptq", "bits": 8, "group_size": -1, "desc_act": true, "sym": false,
                                "checkpoint_format": "gptq_v2"})"), "x");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->bits, 8);
  EXPECT_EQ(g->group_size, -1);
  EXPECT_TRUE(g->desc_act);
  EXPECT_FALSE(g->sym);
  EXPECT_TRUE(g->zeros_v2);
}

}  // namespace
}  // namespace frugal::model
