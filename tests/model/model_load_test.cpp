// Model loading: checkpoint/config errors name the file and the tensor or field; dummy
// weights; batch validation; two sequences in one batch equal each run alone.
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "model/model.h"
#include "model/weights.h"
#include "model_test_util.h"
#include "ops/ref_backend.h"
#include "test_paths.h"

namespace frugal::model {
namespace {

using frugal::testing::temp_dir;
using frugal::testing::tiny_llama_config;
using frugal::testing::write_model_dir;

Status load_status(const std::string& dir) {
  auto backend = ops::make_ref_backend();
  auto m = Model::load(dir, backend.get(), {});
  return m.status();
}

void expect_error_names(const Status& st, std::initializer_list<std::string> parts) {
  ASSERT_FALSE(st.is_ok());
  for (const auto& p : parts) EXPECT_NE(st.message().find(p), std::string::npos) << "'" << p << "' not in: " << st.message();
}

TEST(WeightPlacement, GroupsProjectionsThatShareAnInput) {
  EXPECT_EQ(placement_key("model.layers.3.self_attn.k_proj.bias"), "model.layers.3.self_attn.qkv.bias.1");
  EXPECT_EQ(placement_key("model.layers.3.mlp.up_proj.weight"), "model.layers.3.mlp.gate_up.weight.1");
  EXPECT_EQ(placement_key("model.layers.3.self_attn.o_proj.weight"), "model.layers.3.self_attn.o_proj.weight");
  EXPECT_EQ(placement_key("lm_head.weight"), "lm_head.weight");
  // MLA: the query projection (q_proj, or q_a_proj under q_lora_rank) and kv_a read the same input.
  EXPECT_EQ(placement_key("model.layers.0.self_attn.q_proj.weight"), "model.layers.0.self_attn.qkv.weight.0");
  EXPECT_EQ(placement_key("model.layers.0.self_attn.q_a_proj.weight"), "model.layers.0.self_attn.qkv.weight.0");
  EXPECT_EQ(placement_key("model.layers.0.self_attn.kv_a_proj_with_mqa.weight"), "model.layers.0.self_attn.qkv.weight.1");
  EXPECT_EQ(placement_key("model.layers.0.self_attn.kv_b_proj.weight"), "model.layers.0.self_attn.kv_b_proj.weight");
  // Sorted by key, q/k/v weights are adjacent and in order, then their biases.
  std::vector<std::string> names = {"a.self_attn.v_proj.weight", "a.self_attn.q_proj.bias", "a.self_attn.k_proj.weight",
                                    "a.self_attn.o_proj.weight", "a.self_attn.q_proj.weight", "a.self_attn.v_proj.bias",
                                    "a.self_attn.k_proj.bias"};
  std::sort(names.begin(), names.end(), [](const auto& x, const auto& y) { return placement_key(x) < placement_key(y); });
  EXPECT_EQ(names, (std::vector<std::string>{"a.self_attn.o_proj.weight", "a.self_attn.q_proj.bias", "a.self_attn.k_proj.bias",
                                             "a.self_attn.v_proj.bias", "a.self_attn.q_proj.weight",
                                             "a.self_attn.k_proj.weight", "a.self_attn.v_proj.weight"}));
}

TEST(WeightPlacement, FuseRowsNeedsAdjacentWeightsAndBiases) {
  std::vector<uint16_t> w(10 * 4), bias(10);
  const Linear a{.weight = ops::dense_weight(w.data(), DType::kBF16), .out = 6, .in = 4},
      b{.weight = ops::dense_weight(w.data() + 24, DType::kBF16), .out = 4, .in = 4};
  const Linear ab[] = {a, b};
  auto f = fuse_rows(ab);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->out, 10);
  EXPECT_EQ(f->weight.data, w.data());
  const Linear gap{.weight = ops::dense_weight(w.data() + 28, DType::kBF16), .out = 3, .in = 4};
  const Linear a_gap[] = {a, gap};
  EXPECT_FALSE(fuse_rows(a_gap).has_value()) << "a gap between the weights";
  Linear other_format = b;
  other_format.weight.format = ops::dense_format(DType::kF16);
  const Linear a_f16[] = {a, other_format};
  EXPECT_FALSE(fuse_rows(a_f16).has_value()) << "different weight formats";
  Linear ab1 = a, bb1 = b;
  ab1.bias = bias.data();
  ab1.bias_dtype = DType::kBF16;
  const Linear one_bias[] = {ab1, bb1};
  EXPECT_FALSE(fuse_rows(one_bias).has_value()) << "only one part has a bias";
  bb1.bias = bias.data() + 6;
  bb1.bias_dtype = DType::kBF16;
  const Linear both[] = {ab1, bb1};
  ASSERT_TRUE(fuse_rows(both).has_value());
  EXPECT_EQ(fuse_rows(both)->bias, bias.data());
  bb1.bias = bias.data() + 7;
  const Linear bias_gap[] = {ab1, bb1};
  EXPECT_FALSE(fuse_rows(bias_gap).has_value()) << "biases not adjacent";
}

TEST(WeightPlacement, FuseRowsQuantizedNeedsCodesScalesAndZerosAdjacent) {
  // int4 g32 with zero points, k = 64: 32 code bytes and 2 scale / zero groups per row.
  const ops::WeightFormat f = ops::quant_format(ops::WeightScheme::kInt4, 64, 32, true, 1);
  ASSERT_EQ(ops::weight_row_bytes(f, 64), 32);
  std::vector<uint8_t> codes(10 * 32);
  std::vector<float> scales(10 * 2), zeros(10 * 2);
  auto part = [&](int64_t row0, int64_t rows) {
    Linear l{.out = rows, .in = 64};
    l.weight.format = f;
    l.weight.data = codes.data() + row0 * 32;
    l.weight.scales = scales.data() + row0 * 2;
    l.weight.zeros = zeros.data() + row0 * 2;
    return l;
  };
  const Linear ab[] = {part(0, 6), part(6, 4)};
  auto fused = fuse_rows(ab);
  ASSERT_TRUE(fused.has_value());
  EXPECT_EQ(fused->out, 10);
  EXPECT_EQ(fused->weight.data, codes.data());
  EXPECT_EQ(fused->weight.scales, scales.data());
  EXPECT_EQ(fused->weight.zeros, zeros.data());
  Linear b_scales = part(6, 4);
  b_scales.weight.scales = scales.data() + 13;
  const Linear scale_gap[] = {part(0, 6), b_scales};
  EXPECT_FALSE(fuse_rows(scale_gap).has_value()) << "scales not adjacent";
  Linear b_zeros = part(6, 4);
  b_zeros.weight.zeros = zeros.data() + 14;
  const Linear zero_gap[] = {part(0, 6), b_zeros};
  EXPECT_FALSE(fuse_rows(zero_gap).has_value()) << "zero points not adjacent";
  Linear b_codes = part(6, 4);
  b_codes.weight.data = codes.data() + 7 * 32;
  const Linear code_gap[] = {part(0, 6), b_codes};
  EXPECT_FALSE(fuse_rows(code_gap).has_value()) << "codes not adjacent";
  // FP8 128-row scale blocks: a part of 6 rows would split a block.
  Linear fa = part(0, 6), fb = part(6, 4);
  fa.weight.format = fb.weight.format = ops::quant_format(ops::WeightScheme::kFp8, 64, 32, false, 128);
  fa.weight.zeros = fb.weight.zeros = nullptr;
  const Linear fp8_split[] = {fa, fb};
  EXPECT_FALSE(fuse_rows(fp8_split).has_value()) << "a scale block across two parts";
}

TEST(ModelLoad, TinyModelLoads) {
  const std::string dir = temp_dir("ok");
  write_model_dir(dir, tiny_llama_config());
  EXPECT_TRUE(load_status(dir).is_ok()) << load_status(dir).to_string();
}

TEST(ModelLoad, MissingTensor) {
  const std::string dir = temp_dir("missing");
  write_model_dir(dir, tiny_llama_config(), {.edit = [](TensorSpec& s, DType&) { return s.name != "model.layers.1.mlp.up_proj.weight"; }});
  const Status st = load_status(dir);
  EXPECT_EQ(st.code(), ErrorCode::kNotFound);
  expect_error_names(st, {"model.safetensors", "'model.layers.1.mlp.up_proj.weight'"});
}

TEST(ModelLoad, ExtraTensor) {
  const std::string dir = temp_dir("extra");
  TensorSpec extra{.name = "model.layers.0.self_attn.rotary_emb.weight", .shape = {4}, .role = TensorRole::kNorm};
  write_model_dir(dir, tiny_llama_config(), {.extra = {extra}});
  expect_error_names(load_status(dir), {"model.safetensors", "'model.layers.0.self_attn.rotary_emb.weight'", "unexpected"});
}

TEST(ModelLoad, MisShapedTensor) {
  const std::string dir = temp_dir("shape");
  write_model_dir(dir, tiny_llama_config(), {.edit = [](TensorSpec& s, DType&) {
    if (s.name == "model.layers.0.self_attn.k_proj.weight") s.shape = {16, 16};
    return true;
  }});
  expect_error_names(load_status(dir), {"model.safetensors", "'model.layers.0.self_attn.k_proj.weight'", "[16, 16]", "[8, 16]"});
}

TEST(ModelLoad, UnsupportedWeightDtype) {
  const std::string dir = temp_dir("dtype");
  write_model_dir(dir, tiny_llama_config(), {.edit = [](TensorSpec& s, DType& dt) {
    if (s.name == "model.norm.weight") dt = DType::kI32;
    return true;
  }});
  const Status st = load_status(dir);
  EXPECT_EQ(st.code(), ErrorCode::kUnsupported);
  expect_error_names(st, {"model.safetensors", "'model.norm.weight'", "I32"});
}

TEST(ModelLoad, TruncatedCheckpoint) {
  const std::string dir = temp_dir("trunc");
  write_model_dir(dir, tiny_llama_config());
  std::filesystem::resize_file(dir + "/model.safetensors", std::filesystem::file_size(dir + "/model.safetensors") - 10);
  expect_error_names(load_status(dir), {"model.safetensors", "past the end"});
}

TEST(ModelLoad, UnknownArchitecture) {
  const std::string dir = temp_dir("arch");
  auto cfg = tiny_llama_config();
  cfg["architectures"] = {"FooForCausalLM"};
  frugal::testing::write_text(dir + "/config.json", cfg.dump());
  expect_error_names(load_status(dir), {"config.json", "architectures", "FooForCausalLM"});
}

TEST(ModelLoad, MissingConfigField) {
  const std::string dir = temp_dir("field");
  auto cfg = tiny_llama_config();
  cfg.erase("vocab_size");
  frugal::testing::write_text(dir + "/config.json", cfg.dump());
  expect_error_names(load_status(dir), {"config.json", "vocab_size"});
}

TEST(ModelLoad, HiddenNotDivisibleByHeads) {
  const std::string dir = temp_dir("heads");
  auto cfg = tiny_llama_config();
  cfg["hidden_size"] = 18;
  frugal::testing::write_text(dir + "/config.json", cfg.dump());
  expect_error_names(load_status(dir), {"config.json", "hidden_size"});
}

TEST(ModelLoad, ConfigAloneNeedsDummyWeights) {
  const std::string dir = temp_dir("cfgonly");
  frugal::testing::write_text(dir + "/config.json", tiny_llama_config().dump());
  auto backend = ops::make_ref_backend();
  EXPECT_FALSE(Model::load(dir + "/config.json", backend.get(), {}).is_ok());
  auto m = Model::load(dir + "/config.json", backend.get(), {.dummy_weights = true, .seed = 3});
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
}

// Runs `prompt` as one sequence and returns the last row's logits.
std::vector<float> run_alone(Model& m, const std::vector<int32_t>& prompt) {
  auto kv = KvStorage::create(m.backend(), m.config(), {.n_blocks = 4, .block_size = 4});
  EXPECT_TRUE(kv.is_ok());
  const int32_t n = static_cast<int32_t>(prompt.size());
  std::vector<int32_t> pos(prompt.size()), slots(prompt.size());
  for (int32_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = slots[static_cast<size_t>(i)] = i;
  const std::vector<int32_t> q_start = {0, n}, ctx = {n}, table = {0, 1, 2, 3}, rows = {n - 1};
  std::vector<float> logits(static_cast<size_t>(m.config().vocab_size));
  Status st = m.forward({.tokens = prompt, .positions = pos, .q_start = q_start, .ctx_len = ctx,
                         .block_tables = table, .max_blocks_per_seq = 4, .slot_mapping = slots,
                         .logits_rows = rows}, **kv, logits.data());
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return logits;
}

TEST(ModelForward, DummyWeightsAreDeterministicAndNonZero) {
  const std::string dir = temp_dir("dummy");
  frugal::testing::write_text(dir + "/config.json", tiny_llama_config().dump());
  auto backend = ops::make_ref_backend();
  auto a = Model::load(dir + "/config.json", backend.get(), {.dummy_weights = true, .seed = 5});
  auto b = Model::load(dir + "/config.json", backend.get(), {.dummy_weights = true, .seed = 5});
  auto c = Model::load(dir + "/config.json", backend.get(), {.dummy_weights = true, .seed = 6});
  ASSERT_TRUE(a.is_ok() && b.is_ok() && c.is_ok());
  const auto la = run_alone(**a, {1, 5, 9}), lb = run_alone(**b, {1, 5, 9}), lc = run_alone(**c, {1, 5, 9});
  EXPECT_EQ(la, lb);
  EXPECT_NE(la, lc);
  double mx = 0;
  for (float v : la) { EXPECT_TRUE(std::isfinite(v)); mx = std::max(mx, std::abs(static_cast<double>(v))); }
  EXPECT_GT(mx, 0.0);
}

TEST(ModelForward, TwoSequencesInOneBatchEqualEachAlone) {
  const std::string dir = temp_dir("batch");
  write_model_dir(dir, tiny_llama_config());
  auto backend = ops::make_ref_backend();
  auto m = Model::load(dir, backend.get(), {});
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  const std::vector<int32_t> p0 = {1, 7, 3, 12, 30}, p1 = {1, 4, 4};
  const auto l0 = run_alone(**m, p0), l1 = run_alone(**m, p1);
  // Sequence 0 in blocks {2, 3}, sequence 1 in block {0} (block_size 4).
  auto kv = KvStorage::create(backend.get(), (*m)->config(), {.n_blocks = 4, .block_size = 4});
  ASSERT_TRUE(kv.is_ok());
  const std::vector<int32_t> tokens = {1, 7, 3, 12, 30, 1, 4, 4}, pos = {0, 1, 2, 3, 4, 0, 1, 2};
  const std::vector<int32_t> slots = {8, 9, 10, 11, 12, 0, 1, 2}, q_start = {0, 5, 8}, ctx = {5, 3};
  const std::vector<int32_t> tables = {2, 3, 0, 1}, rows = {4, 7};
  std::vector<float> logits(2 * 32);
  (*m)->set_taps_enabled(true);
  ASSERT_TRUE((*m)->forward({.tokens = tokens, .positions = pos, .q_start = q_start, .ctx_len = ctx,
                             .block_tables = tables, .max_blocks_per_seq = 2, .slot_mapping = slots,
                             .logits_rows = rows}, **kv, logits.data()).is_ok());
  for (int j = 0; j < 32; ++j) {
    EXPECT_NEAR(logits[static_cast<size_t>(j)], l0[static_cast<size_t>(j)], 1e-5);
    EXPECT_NEAR(logits[static_cast<size_t>(32 + j)], l1[static_cast<size_t>(j)], 1e-5);
  }
  for (const char* name : {"embed", "blk.0.attn_out", "blk.1.out", "out_norm"}) {
    ASSERT_NE((*m)->tap(name), nullptr) << name;
    EXPECT_EQ((*m)->tap(name)->size(), 8u * 16u) << name;
  }
}

TEST(ModelForward, BadBatchIsAnError) {
  const std::string dir = temp_dir("badbatch");
  write_model_dir(dir, tiny_llama_config());
  auto backend = ops::make_ref_backend();
  auto m = Model::load(dir, backend.get(), {});
  ASSERT_TRUE(m.is_ok());
  auto kv = KvStorage::create(backend.get(), (*m)->config(), {.n_blocks = 2, .block_size = 4});
  ASSERT_TRUE(kv.is_ok());
  const std::vector<int32_t> tokens = {1, 99}, pos = {0, 1}, slots = {0, 1}, q_start = {0, 2}, ctx = {2}, table = {0}, rows = {1};
  std::vector<float> logits(32);
  Status st = (*m)->forward({.tokens = tokens, .positions = pos, .q_start = q_start, .ctx_len = ctx,
                             .block_tables = table, .max_blocks_per_seq = 1, .slot_mapping = slots,
                             .logits_rows = rows}, **kv, logits.data());
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("token id 99"), std::string::npos) << st.message();
  const std::vector<int32_t> bad_table = {7};
  const std::vector<int32_t> ok_tokens = {1, 2};
  st = (*m)->forward({.tokens = ok_tokens, .positions = pos, .q_start = q_start, .ctx_len = ctx,
                      .block_tables = bad_table, .max_blocks_per_seq = 1, .slot_mapping = slots,
                      .logits_rows = rows}, **kv, logits.data());
  EXPECT_NE(st.message().find("block id 7"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace frugal::model
