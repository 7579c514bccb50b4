// frugal eval router (docs/eval.md): router agreement of a model with a reference. Oracles:
//  - the DeepSeek-V2 golden against itself: every route equal (exact 1, overlap 1), one decision
//    per token per MoE layer;
//  - against a copy whose layer-1 router has the rows of experts 0 and 1 swapped: the copy
//    routes every token to the original's experts with 0 and 1 relabelled (V2: softmax scores,
//    greedy top-k, no bias), so a route agrees exactly iff it holds both or neither of {0, 1},
//    and its overlap is |A and swap(A)| / k; counted by hand from the original's routes (which
//    tests/model holds equal to transformers').
//  - a dense model and mismatched MoE shapes are refused with errors naming them.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "eval/router.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "test_paths.h"

namespace frugal::eval {
namespace {

std::string golden(const std::string& name) { return frugal::testing::source_root() + "/tests/data/golden/" + name; }

std::vector<int32_t> some_tokens(int n, int vocab) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 37 + 11) % vocab));
  return t;
}

TEST(EvalRouter, ModelAgainstItselfAgreesEverywhere) {
  auto be = make_cpu_backend();
  const auto tokens = some_tokens(50, 384);
  auto r = run_router_agreement(golden("deepseek_v3"), golden("deepseek_v3"), be.get(), tokens, 32);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->n_chunks, 2);
  EXPECT_EQ(r->decisions, 50 * 2);  // V3 golden: layers 2 and 3 are MoE
  EXPECT_EQ(r->exact, r->decisions);
  EXPECT_DOUBLE_EQ(r->overlap, 1.0);
  ASSERT_EQ(r->layers.size(), 2u);
  EXPECT_EQ(r->layers[0].layer, 2);
}

TEST(EvalRouter, SwappedRouterRowsGiveTheHandCountedAgreement) {
  const std::string src = golden("deepseek_v2");
  const std::string dir = (std::filesystem::temp_directory_path() / ("frugal_eval_router_" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const char* f : {"config.json", "generation_config.json"})
    std::filesystem::copy_file(src + "/" + f, dir + "/" + f);
  auto st = model::SafetensorsSet::open_dir(src);
  ASSERT_TRUE(st.is_ok());
  std::vector<std::vector<uint8_t>> data;
  std::vector<model::TensorToWrite> out;
  std::ifstream names(src + "/weight_names.txt");
  std::string line;
  const std::string router = "model.layers.1.mlp.gate.weight";
  while (std::getline(names, line)) {
    const std::string name = line.substr(0, line.find(' '));  // "name [shape] dtype"
    if (name.empty()) continue;
    const model::TensorEntry* e = (*st)->find(name);
    ASSERT_NE(e, nullptr) << name;
    data.emplace_back(e->data, e->data + e->nbytes);
    if (name == router) {  // [E, hidden]: swap rows 0 and 1
      const size_t row = static_cast<size_t>(e->nbytes / e->shape.dims[0]);
      std::swap_ranges(data.back().begin(), data.back().begin() + row, data.back().begin() + row);
    }
    out.push_back({name, e->dtype, std::vector<int64_t>(e->shape.dims.begin(), e->shape.dims.begin() + e->shape.ndim),
                   data.back().data()});
  }
  ASSERT_TRUE(model::write_safetensors(dir + "/model.safetensors", out).is_ok());

  auto be = make_cpu_backend();
  const auto tokens = some_tokens(40, 384);
  auto r = run_router_agreement(dir, src, be.get(), tokens, 40);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  // The original's layer-1 and layer-2 routes, by the taps of one forward.
  auto m = model::Model::load(src, be.get(), {.max_batch_tokens = 40, .max_logit_rows = 1});
  ASSERT_TRUE(m.is_ok());
  const auto& c = (*m)->config();
  auto kv = model::KvStorage::create(be.get(), c, {.n_blocks = 3, .block_size = 16});
  ASSERT_TRUE(kv.is_ok());
  std::vector<int32_t> pos(40), table = {0, 1, 2};
  for (int32_t i = 0; i < 40; ++i) pos[static_cast<size_t>(i)] = i;
  const std::vector<int32_t> q_start = {0, 40}, ctx = {40}, rows = {39};
  std::vector<float> logits(static_cast<size_t>(c.vocab_size));
  (*m)->set_taps_enabled(true);
  ASSERT_TRUE((*m)->forward({.tokens = tokens, .positions = pos, .q_start = q_start, .ctx_len = ctx, .block_tables = table,
                             .max_blocks_per_seq = 3, .slot_mapping = pos, .logits_rows = rows}, **kv, logits.data()).is_ok());
  const int64_t E = c.moe.n_routed_experts, K = c.moe.num_experts_per_tok;
  int64_t exact = 0;
  double overlap = 0;
  // Layer 1: exact iff both or neither of {0, 1}; overlap K - 1 of K otherwise.
  const auto* w1 = (*m)->tap("blk.1.router");
  for (int32_t t = 0; t < 40; ++t) {
    const bool e0 = (*w1)[static_cast<size_t>(t * E)] != 0, e1 = (*w1)[static_cast<size_t>(t * E + 1)] != 0;
    exact += e0 == e1 ? 1 : 0;
    overlap += e0 == e1 ? 1.0 : static_cast<double>(K - 1) / static_cast<double>(K);
  }
  ASSERT_EQ(r->layers.size(), 2u);
  EXPECT_EQ(r->layers[0].layer, 1);
  EXPECT_EQ(r->layers[0].decisions, 40);
  EXPECT_EQ(r->layers[0].exact, exact);
  EXPECT_NEAR(r->layers[0].overlap, overlap / 40, 1e-12);
  EXPECT_LT(exact, 40) << "the swap should change some routes";
  std::filesystem::remove_all(dir);
}

TEST(EvalRouter, RefusesDenseModelsAndMismatchedShapes) {
  auto be = make_cpu_backend();
  const auto tokens = some_tokens(8, 100);
  auto dense = run_router_agreement(golden("qwen2_yarn"), golden("qwen2_yarn"), be.get(), tokens, 8);
  ASSERT_FALSE(dense.is_ok());
  EXPECT_NE(dense.status().to_string().find("not a mixture-of-experts model"), std::string::npos) << dense.status().to_string();
  auto mixed = run_router_agreement(golden("deepseek_v2"), golden("deepseek_v3"), be.get(), tokens, 8);
  ASSERT_FALSE(mixed.is_ok());
  EXPECT_NE(mixed.status().to_string().find("different MoE shapes"), std::string::npos) << mixed.status().to_string();
}

}  // namespace
}  // namespace frugal::eval
