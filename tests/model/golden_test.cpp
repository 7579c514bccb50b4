// Golden tests against transformers (tests/data/golden/<name>/, made by
// scripts/golden/make_golden.py in fp32 from the stored weights). For every fixture:
//   - teacher-forced logits of all T tokens: every row within 1e-3 relative error, where a
//     row's relative error is max_j |ours_j - ref_j| / max_j |ref_j|;
//   - hidden states (embeddings, each layer's output, the final norm) with the same metric;
//   - 32 greedy tokens after the prompt, exactly, decoded one token per step through the KV
//     cache (eos masked until 32 tokens, as the fixture's min_new_tokens does).
#include <filesystem>

#include <gtest/gtest.h>

#include "model/model.h"
#include "model/safetensors.h"
#include "model_test_util.h"
#include "backend/cpu/cpu_backend.h"
#include "ops/forwarding_backend.h"
#include "ops/ref_backend.h"
#include "test_paths.h"

namespace frugal::model {
namespace {

constexpr double kTol = 1e-3;

LoadOptions fixture_options(const std::string& /*dir*/, int32_t max_logit_rows) {
  return {.max_logit_rows = max_logit_rows};
}

std::vector<std::string> fixtures() {
  std::vector<std::string> out;
  // golden: fp32-profile fixtures; golden_bf16: the bf16 profile (made for the CUDA check, and
  // held to the same fp32 tolerance here).
  for (const char* sub : {"tests/data/golden", "tests/data/golden_bf16"}) {
    const auto root = std::filesystem::path(frugal::testing::source_root()) / sub;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(root, ec))
      if (e.is_directory() && std::filesystem::exists(e.path() / "reference.safetensors") &&
          !e.path().filename().string().starts_with("deepseek"))  // tests/model/deepseek_golden_test.cpp
        out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int32_t> ids_of(const TensorEntry* t) {
  std::vector<int32_t> v(static_cast<size_t>(t->shape.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(reinterpret_cast<const int64_t*>(t->data)[i]);
  return v;
}

// The CPU backend acting as a device backend: weights are copied into one arena (as on a GPU)
// instead of used in place from the mmap, in WeightStore's placement order, which lets the
// model run q/k/v and gate/up as fused matmuls. Everything else is the CPU backend's.
class ArenaCpuBackend final : public ops::ForwardingBackend {
 public:
  ArenaCpuBackend() : ForwardingBackend(make_cpu_backend()) {}
  std::string name() const override { return "cpu-arena"; }
  bool weights_in_host_memory() const override { return false; }
  bool supports_sample() const override { return false; }  // as before: the engine samples on the host
};

// Every fixture runs on the reference backend (exact oracle), the fast CPU backend, and the
// CPU backend with device-style weight placement (fused projections).
class Golden : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  std::string fixture_dir() const { return std::get<0>(GetParam()); }
  std::unique_ptr<ops::Backend> make_backend() const {
    const std::string& b = std::get<1>(GetParam());
    if (b == "cpu") return make_cpu_backend();
    if (b == "cpuarena") return std::make_unique<ArenaCpuBackend>();
    return ops::make_ref_backend();
  }
  void expect_fused(const Model& m) const {
    if (std::get<1>(GetParam()) == "cpuarena") {
      // Tensors are placed at 256-byte boundaries: q/k/v biases whose bytes are not a multiple
      // of that are not adjacent, and q/k/v then run as three matmuls (qwen2_yarn: 192 bf16).
      const auto& c = m.config();
      const bool qkv_adjacent = !c.attention_bias || dtype_bytes(c.torch_dtype, c.num_attention_heads * c.head_dim) % 256 == 0;
      EXPECT_EQ(m.fused_matmuls(), (qkv_adjacent ? 2 : 1) * c.num_hidden_layers) << "q/k/v and gate/up should run fused";
    }
  }
};

TEST_P(Golden, TeacherForcedLogitsAndHiddenStates) {
  const std::string dir = fixture_dir();
  auto ref = SafetensorsSet::open_file(dir + "/reference.safetensors");
  ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
  const auto ids = ids_of((*ref)->find("input_ids"));
  const int32_t T = static_cast<int32_t>(ids.size());
  auto backend = make_backend();
  auto m = Model::load(dir, backend.get(), fixture_options(dir, T));
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  expect_fused(**m);
  const auto& c = (*m)->config();
  auto kv = KvStorage::create(backend.get(), c, {.n_blocks = (T + 15) / 16, .block_size = 16});
  ASSERT_TRUE(kv.is_ok());
  std::vector<int32_t> pos(ids.size()), rows(ids.size()), table;
  for (int32_t i = 0; i < T; ++i) pos[static_cast<size_t>(i)] = rows[static_cast<size_t>(i)] = i;
  for (int32_t b = 0; b < (T + 15) / 16; ++b) table.push_back(b);
  const std::vector<int32_t> q_start = {0, T}, ctx = {T};
  std::vector<float> logits(static_cast<size_t>(T * c.vocab_size));
  (*m)->set_taps_enabled(true);
  ASSERT_TRUE((*m)->forward({.tokens = ids, .positions = pos, .q_start = q_start, .ctx_len = ctx,
                             .block_tables = table, .max_blocks_per_seq = static_cast<int32_t>(table.size()),
                             .slot_mapping = pos, .logits_rows = rows}, **kv, logits.data()).is_ok());
  const float* want = reinterpret_cast<const float*>((*ref)->find("logits")->data);
  for (int32_t t = 0; t < T; ++t)
    EXPECT_LE(frugal::testing::row_rel_error(logits.data() + t * c.vocab_size, want + t * c.vocab_size, c.vocab_size), kTol) << "logits row " << t;
  const int64_t L = c.num_hidden_layers, H = c.hidden_size;
  for (int64_t i = 0; i <= L; ++i) {
    // hidden_states[0] = embeddings, [i] = output of layer i - 1, [L] = after the final norm.
    const std::string tap = i == 0 ? "embed" : i == L ? "out_norm" : "blk." + std::to_string(i - 1) + ".out";
    const TensorEntry* hs = (*ref)->find("hidden_states." + std::to_string(i));
    ASSERT_NE(hs, nullptr);
    ASSERT_NE((*m)->tap(tap), nullptr) << tap;
    for (int32_t t = 0; t < T; ++t)
      EXPECT_LE(frugal::testing::row_rel_error((*m)->tap(tap)->data() + t * H, reinterpret_cast<const float*>(hs->data) + t * H, H), kTol)
          << tap << " row " << t;
  }
}

TEST_P(Golden, GreedyContinuation) {
  const std::string dir = fixture_dir();
  auto ref = SafetensorsSet::open_file(dir + "/reference.safetensors");
  ASSERT_TRUE(ref.is_ok());
  const auto prompt = ids_of((*ref)->find("greedy_input_ids"));
  const auto want = ids_of((*ref)->find("greedy_output_ids"));
  auto backend = make_backend();
  auto m = Model::load(dir, backend.get(), fixture_options(dir, 1));
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  const auto& c = (*m)->config();
  const int32_t total = static_cast<int32_t>(want.size()), bs = 4;
  auto kv = KvStorage::create(backend.get(), c, {.n_blocks = (total + bs - 1) / bs, .block_size = bs});
  ASSERT_TRUE(kv.is_ok());
  // Blocks in reverse order, to exercise the block table.
  std::vector<int32_t> table;
  for (int32_t b = (total + bs - 1) / bs - 1; b >= 0; --b) table.push_back(b);
  std::vector<int32_t> seq = prompt;
  std::vector<float> logits(static_cast<size_t>(c.vocab_size));
  int32_t done = 0;  // tokens already in the cache
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

INSTANTIATE_TEST_SUITE_P(Fixtures, Golden,
                         ::testing::Combine(::testing::ValuesIn(fixtures()), ::testing::Values("ref", "cpu", "cpuarena")),
                         [](const auto& info) {
                           const std::filesystem::path p(std::get<0>(info.param));
                           const std::string profile = p.parent_path().filename() == "golden_bf16" ? "bf16profile_" : "";
                           return profile + p.filename().string() + "_" + std::get<1>(info.param);
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Golden);

}  // namespace
}  // namespace frugal::model
