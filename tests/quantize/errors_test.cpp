// Acceptance 5: bad input gets a clear error and nothing half-written is left looking complete:
// unsupported format/method pairs, group sizes that do not divide a dimension, empty or too
// short calibration text, an existing output directory, an already-quantized model, and a
// failure halfway through (a tensor missing in the last layer).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "quant_test_util.h"
#include "quantize/quantize.h"

namespace frugal::quantize {
namespace {

namespace fs = std::filesystem;

// Everything in `dir` whose name starts with `stem` (the output and its temporaries).
std::vector<std::string> outputs_like(const std::string& dir, const std::string& stem) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(stem, 0) == 0) v.push_back(e.path().filename().string());
  return v;
}

QuantizeRequest request(const std::string& model, const std::string& out, QuantizeOptions o) {
  QuantizeRequest r{.model_dir = model, .out_dir = out, .options = o};
  r.min_calib_tokens = 64;
  for (int i = 0; i < 128; ++i) r.calib_ids.push_back(i % 300);
  return r;
}

std::string error_of(const QuantizeRequest& r) {
  auto rep = quantize_model(r);
  EXPECT_FALSE(rep.is_ok());
  return rep.is_ok() ? "" : rep.status().message();
}

TEST(QuantizeErrors, GroupSizeThatDoesNotDivideNamesTheTensor) {
  const std::string work = testing::quant_temp_dir("group");
  const std::string msg = error_of(request(testing::golden_dir("qwen2"), work + "/out", {.format = Format::kInt4, .group_size = 128}));
  EXPECT_NE(msg.find("--group-size 128 does not divide the input dimension 320 of model.layers.0.mlp.down_proj"), std::string::npos) << msg;
  EXPECT_TRUE(outputs_like(work, "out").empty());
  const std::string nf4 = error_of(request(testing::golden_dir("qwen2"), work + "/out", {.format = Format::kNf4, .group_size = 10}));
  EXPECT_NE(nf4.find("--group-size 10"), std::string::npos) << nf4;
  fs::remove_all(work);
}

TEST(QuantizeErrors, ExistingOutputIsNeverTouched) {
  const std::string work = testing::quant_temp_dir("exists");
  fs::create_directories(work + "/out");
  std::ofstream(work + "/out/keep.txt") << "mine";
  const std::string msg = error_of(request(testing::golden_dir("qwen2"), work + "/out", {.format = Format::kFp8}));
  EXPECT_NE(msg.find("already exists"), std::string::npos) << msg;
  EXPECT_TRUE(fs::exists(work + "/out/keep.txt"));
  EXPECT_EQ(outputs_like(work, "out"), std::vector<std::string>{"out"});
  fs::remove_all(work);
}

TEST(QuantizeErrors, AlreadyQuantizedInput) {
  const std::string work = testing::quant_temp_dir("prequant");
  const std::string msg = error_of(request(testing::quant_fixture_dir("awq_w4g128"), work + "/out", {.format = Format::kInt8}));
  EXPECT_NE(msg.find("already quantized"), std::string::npos) << msg;
  fs::remove_all(work);
}

TEST(QuantizeErrors, EmptyAndShortCalibrationText) {
  const std::string work = testing::quant_temp_dir("calib");
  std::ofstream(work + "/empty.txt") << "  \n";
  std::ofstream(work + "/short.txt") << "Well, Prince, so Genoa and Lucca are now just family estates.";
  QuantizeRequest r{.model_dir = testing::reference_model_dir(), .out_dir = work + "/out",
                    .options = {.format = Format::kInt4, .method = Method::kGptq}};
  r.calib_file = work + "/empty.txt";
  std::string msg = error_of(r);
  EXPECT_NE(msg.find("empty.txt is empty"), std::string::npos) << msg;
  r.calib_file = work + "/short.txt";
  msg = error_of(r);
  EXPECT_NE(msg.find("short.txt is too short"), std::string::npos) << msg;
  EXPECT_NE(msg.find("at least 128"), std::string::npos) << msg;
  r.calib_file = work + "/missing.txt";
  msg = error_of(r);
  EXPECT_NE(msg.find("missing.txt: cannot open"), std::string::npos) << msg;
  EXPECT_TRUE(outputs_like(work, "out").empty());
  fs::remove_all(work);
}

TEST(QuantizeErrors, FailureHalfwayLeavesNothingBehind) {
  // A copy of the golden qwen2 model without layer 1's down_proj: layer 0 is written first.
  const std::string work = testing::quant_temp_dir("halfway");
  const std::string src = work + "/src";
  fs::create_directories(src);
  fs::copy_file(testing::golden_dir("qwen2") + "/config.json", src + "/config.json");
  auto st = model::SafetensorsSet::open_dir(testing::golden_dir("qwen2"));
  ASSERT_TRUE(st.is_ok());
  std::vector<model::TensorToWrite> tw;
  for (const auto& n : (*st)->names()) {
    if (n == "model.layers.1.mlp.down_proj.weight") continue;
    const model::TensorEntry* e = (*st)->find(n);
    tw.push_back({n, e->dtype, std::vector<int64_t>(e->shape.dims.begin(), e->shape.dims.begin() + e->shape.ndim), e->data});
  }
  ASSERT_TRUE(model::write_safetensors(src + "/model.safetensors", tw).is_ok());
  QuantizeRequest r = request(src, work + "/out", {.format = Format::kInt4, .method = Method::kGptq, .group_size = 64});
  const std::string msg = error_of(r);
  EXPECT_NE(msg.find("model.layers.1.mlp.down_proj.weight is missing"), std::string::npos) << msg;
  EXPECT_TRUE(outputs_like(work, "out").empty());
  fs::remove_all(work);
}

TEST(QuantizeErrors, CliReportsBadPairsWithExitCode2) {
  const std::string work = testing::quant_temp_dir("cli");
  const std::string cmd = testing::frugal_binary() + " quantize --model " + testing::golden_dir("qwen2") +
                          " --format int4 --method smoothquant --out " + work + "/out 2>" + work + "/err.txt";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  std::ifstream f(work + "/err.txt");
  const std::string err((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(err.find("--format int4 with --method smoothquant is not supported"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(work + "/out"));
  fs::remove_all(work);
}

TEST(QuantizeErrors, CliNamesABadDevice) {
  const std::string work = testing::quant_temp_dir("cli_device");
  const std::string base = testing::frugal_binary() + " quantize --model " + testing::golden_dir("qwen2") +
                           " --format int4 --method gptq --group-size 64 --out " + work + "/out";
  int rc = std::system((base + " --device tpu 2>" + work + "/err.txt").c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  std::ifstream f(work + "/err.txt");
  std::string err((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(err.find("--device tpu: expected auto, cpu or cuda"), std::string::npos) << err;
  // Here (no GPU, or a build without CUDA) --device cuda is refused by name, nothing written.
  if (std::system("nvidia-smi -L >/dev/null 2>&1") != 0) {
    rc = std::system((base + " --device cuda 2>" + work + "/err2.txt").c_str());
    EXPECT_NE(WEXITSTATUS(rc), 0);
    std::ifstream f2(work + "/err2.txt");
    err.assign((std::istreambuf_iterator<char>(f2)), std::istreambuf_iterator<char>());
    EXPECT_NE(err.find("--device cuda: "), std::string::npos) << err;
  }
  EXPECT_FALSE(fs::exists(work + "/out"));
  fs::remove_all(work);
}

TEST(QuantizeErrors, CliWritesACompleteShardedDirectory) {
  const std::string work = testing::quant_temp_dir("cli_ok");
  const std::string cmd = testing::frugal_binary() + " quantize --model " + testing::reference_model_dir() +
                          " --format fp8 --fp8-scale channel --keep layers.0.mlp.down_proj --max-shard-gb 0.01 --out " +
                          work + "/out > " + work + "/table.txt";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_TRUE(fs::exists(work + "/out/model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(work + "/out/tokenizer.json"));
  EXPECT_TRUE(fs::exists(work + "/out/generation_config.json"));
  auto st = model::SafetensorsSet::open_dir(work + "/out");
  ASSERT_TRUE(st.is_ok()) << st.status().to_string();
  EXPECT_NE((*st)->find("model.layers.0.mlp.down_proj.weight"), nullptr);
  EXPECT_EQ((*st)->find("model.layers.0.mlp.down_proj.weight")->dtype, DType::kBF16);  // kept
  EXPECT_EQ((*st)->find("model.layers.1.mlp.down_proj.weight")->dtype, DType::kF8E4M3);
  EXPECT_EQ((*st)->find("model.embed_tokens.weight")->dtype, DType::kBF16);
  const auto cfg = testing::read_json_file(work + "/out/config.json");
  EXPECT_EQ(cfg["quantization_config"]["ignore"], nlohmann::json({"lm_head", "model.layers.0.mlp.down_proj"}));
  EXPECT_EQ(outputs_like(work, "out"), std::vector<std::string>{"out"});
  fs::remove_all(work);
}

TEST(QuantizeMoe, RouterStaysPreciseAndExpertsQuantizeOneByOne) {
  const std::string work = testing::quant_temp_dir("moe");
  QuantizeRequest r{.model_dir = testing::golden_dir("deepseek_v2"), .out_dir = work + "/out",
                    .options = {.format = Format::kInt4, .group_size = 64}};
  r.keep_dequantized = true;
  auto rep = quantize_model(r);
  ASSERT_TRUE(rep.is_ok()) << rep.status().to_string();
  auto st = model::SafetensorsSet::open_dir(r.out_dir);
  ASSERT_TRUE(st.is_ok());
  const model::TensorEntry* router = (*st)->find("model.layers.1.mlp.gate.weight");
  ASSERT_NE(router, nullptr);
  EXPECT_EQ(router->dtype, DType::kF16);  // GPTQ checkpoints store what stays precise in f16
  EXPECT_NE((*st)->find("model.layers.1.mlp.experts.7.down_proj.qweight"), nullptr);
  EXPECT_NE((*st)->find("model.layers.1.mlp.shared_experts.up_proj.qweight"), nullptr);
  EXPECT_NE((*st)->find("model.layers.1.self_attn.kv_b_proj.qweight"), nullptr);
  EXPECT_EQ((*st)->find("model.layers.1.mlp.gate.qweight"), nullptr);
  EXPECT_NE((*st)->find("model.layers.1.self_attn.kv_a_layernorm.weight"), nullptr);
  // Calibrated methods need the host forward, which covers dense layers only.
  QuantizeRequest a = request(testing::golden_dir("deepseek_v2"), work + "/awq", {.format = Format::kInt4, .method = Method::kAwq, .group_size = 64});
  const std::string msg = error_of(a);
  EXPECT_NE(msg.find("--method rtn only"), std::string::npos) << msg;
  EXPECT_TRUE(outputs_like(work, "awq").empty());
  fs::remove_all(work);
}

// --lm-head: the untied lm_head is written quantized (GPTQ's "lm_head": true, compressed-tensors
// without lm_head in "ignore"; RTN, or with --method gptq GPTQ on the final norm's outputs), the engine's loader (code independent of the quantizer) reads
// back exactly the weight the quantizer computed, and the loaded model runs it quantized. A tied
// model and a layout whose loaders expect a dense lm_head are refused, naming the flag.
TEST(QuantizeLmHead, WrittenQuantizedReadBackAndRefusedWhereItCannotApply) {
  const std::string work = testing::quant_temp_dir("lm_head");
  struct Case {
    const char* name;
    QuantizeOptions o;
    const char* format_prefix;
  };
  const Case cases[] = {{"gptq", {.format = Format::kInt4, .group_size = 64, .lm_head = true}, "int4"},
                        {"gptq_calibrated", {.format = Format::kInt4, .method = Method::kGptq, .group_size = 64, .lm_head = true}, "int4"},
                        {"gptq_lm8", {.format = Format::kInt4, .group_size = 64, .lm_head_bits = 8}, "int8"},
                        {"ct_int8", {.format = Format::kInt8, .lm_head = true}, "int8"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    QuantizeRequest r = request(testing::golden_dir("qwen2"), work + "/" + c.name, c.o);
    r.keep_dequantized = true;
    auto rep = quantize_model(r);
    ASSERT_TRUE(rep.is_ok()) << rep.status().to_string();
    // RTN: no calibration of the lm_head's inputs (no output error); GPTQ: on the final norm's
    // outputs, with a smaller output error there than RTN's.
    const LinearReport* lm = nullptr;
    for (const auto& l : rep->linears)
      if (l.name == "lm_head") lm = &l;
    ASSERT_NE(lm, nullptr);
    if (c.o.method == Method::kGptq) {
      ASSERT_TRUE(std::isfinite(lm->err) && std::isfinite(lm->err_rtn)) << lm->err << " " << lm->err_rtn;
      EXPECT_GT(lm->err, 0.0);
      EXPECT_LT(lm->err, lm->err_rtn) << "GPTQ's lm_head output error against RTN's on the same inputs";
    } else {
      EXPECT_TRUE(std::isnan(lm->err));
    }
    const nlohmann::json qc = testing::read_json_file(r.out_dir + "/config.json")["quantization_config"];
    if (qc["quant_method"] == "gptq") {
      EXPECT_TRUE(qc["lm_head"].get<bool>());
      if (c.o.lm_head_bits == 8) {  // the 4-bit body's config, the lm_head's bits by a GPTQModel rule
        EXPECT_EQ(qc["bits"], 4);
        EXPECT_EQ(qc["dynamic"]["+:^lm_head$"]["bits"], 8) << qc.dump();
      }
    } else {
      EXPECT_EQ(qc["ignore"], nlohmann::json::array());
    }
    auto st = model::SafetensorsSet::open_dir(r.out_dir);
    ASSERT_TRUE(st.is_ok()) << st.status().to_string();
    EXPECT_EQ((*st)->find("lm_head.weight") != nullptr, qc["quant_method"] != "gptq");  // CT keeps the name, int8 codes
    auto deq = testing::engine_dequantized(r.out_dir, **st, "lm_head");
    ASSERT_TRUE(deq.is_ok()) << deq.status().to_string();
    ASSERT_TRUE(rep->dequantized.count("lm_head"));
    EXPECT_EQ(*deq, rep->dequantized.at("lm_head"));
    auto backend = make_cpu_backend();
    auto m = model::Model::load(r.out_dir, backend.get(), {});
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    bool saw = false;
    for (const auto& role : (*m)->weight_bytes_by_role())
      if (role.role == "lm_head") {
        saw = true;
        EXPECT_EQ(role.format.rfind(c.format_prefix, 0), 0u) << role.format;
      }
    EXPECT_TRUE(saw);
  }
  std::string msg = error_of(request(testing::golden_dir("qwen2"), work + "/awq",
                                     {.format = Format::kInt4, .method = Method::kAwq, .group_size = 64, .lm_head = true}));
  EXPECT_NE(msg.find("--lm-head"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dense lm_head"), std::string::npos) << msg;
  msg = error_of(request(testing::golden_dir("qwen2"), work + "/ctbits", {.format = Format::kInt8, .lm_head_bits = 4}));
  EXPECT_NE(msg.find("--lm-head-bits"), std::string::npos) << msg;
  msg = error_of(request(testing::golden_dir("qwen2"), work + "/bits3", {.format = Format::kInt4, .group_size = 64, .lm_head_bits = 3}));
  EXPECT_NE(msg.find("--lm-head-bits 3"), std::string::npos) << msg;
  msg = error_of(request(testing::golden_dir("qwen2_tied"), work + "/tied", {.format = Format::kInt8, .lm_head = true}));
  EXPECT_NE(msg.find("tie_word_embeddings"), std::string::npos) << msg;
  EXPECT_TRUE(outputs_like(work, "awq").empty());
  EXPECT_TRUE(outputs_like(work, "tied").empty());
  fs::remove_all(work);
}

}  // namespace
}  // namespace frugal::quantize
