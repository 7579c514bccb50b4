// The ModelRunner seam: a second, toy family (embedding -> lm_head) built against the runner
// and checked against a hand computation; and the runner's graph path (bucket padding in
// place, capture, replay) on the CPU through a backend that "records" a step by keeping its
// closure, checked against the same steps run eagerly.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "model/family.h"
#include "model/model.h"
#include "model/runner.h"
#include "model/step_batch.h"
#include "model_test_util.h"

namespace frugal::model {
namespace {

// --- the toy family: logits[r] = E[token] @ W^T for the tokens of the logits rows ---
class ToyFamily final : public ForwardFamily {
 public:
  ToyFamily(Embedding e, Linear head) : embed_(e), head_(head) {}
  std::vector<BufferRequest> workspace(const RunnerLimits& lim, DType act) const override {
    return {{.name = "x", .bytes = dtype_bytes(act, lim.max_batch_tokens * embed_.dim)},
            {.name = "sel", .bytes = dtype_bytes(act, lim.max_logit_rows * embed_.dim)}};
  }
  void bind_workspace(std::span<void* const> p) override {
    x_ = p[0];
    sel_ = p[1];
  }
  Status forward(const StepContext& s, KvStorage&) override {
    const int64_t d = embed_.dim;
    FRUGAL_RETURN_IF_ERROR(s.backend->embedding({.table = embed_.table, .table_dtype = embed_.dtype, .ids = s.tokens,
                                                 .out = x_, .out_dtype = s.act, .n_tokens = s.in.n_tokens, .dim = d,
                                                 .vocab = embed_.vocab}));
    FRUGAL_RETURN_IF_ERROR(s.tap("embed", x_, s.in.n_tokens, d));
    if (s.n_logits_rows == 0) return Status::ok();
    FRUGAL_RETURN_IF_ERROR(s.backend->gather_rows({.x = x_, .x_dtype = s.act, .ld_x = d, .rows = s.logits_rows,
                                                   .out = sel_, .out_dtype = s.act, .ld_out = d,
                                                   .n_rows = s.n_logits_rows, .dim = d}));
    return s.backend->matmul({.x = sel_, .x_dtype = s.act, .ld_x = d, .w = head_.weight,
                              .bias = nullptr, .bias_dtype = DType::kF32, .y = s.logits, .y_dtype = DType::kF32,
                              .ld_y = head_.out, .m = s.n_logits_rows, .n = head_.out, .k = d, .accumulate = false});
  }

 private:
  Embedding embed_;
  Linear head_;
  void* x_ = nullptr;
  void* sel_ = nullptr;
};

constexpr int kVocab = 5, kDim = 3;
// Small integers: every product and sum is exact in f32, so the hand values are exact.
const std::vector<float> kEmbed = {1, 0, 2,  0, 1, 1,  3, -1, 0,  2, 2, -2,  -1, 0, 1};  // [vocab, dim]
const std::vector<float> kHead = {1, 1, 1,  0, 2, 0,  -1, 0, 3,  2, 0, -1,  0, -3, 1};  // [vocab, dim]

ModelConfig toy_config() {
  // One 1-head layer of head_dim 2 only so a KV storage (unused by the toy) can be created.
  return ModelConfig{.vocab_size = kVocab, .hidden_size = kDim, .num_hidden_layers = 1, .num_attention_heads = 1,
                     .num_key_value_heads = 1, .head_dim = 2, .max_position_embeddings = 16};
}

std::unique_ptr<ModelRunner> toy_runner(ops::Backend* b) {
  auto fam = std::make_unique<ToyFamily>(Embedding{.table = kEmbed.data(), .dtype = DType::kF32, .vocab = kVocab, .dim = kDim},
                                         Linear{.weight = ops::dense_weight(kHead.data(), DType::kF32), .out = kVocab, .in = kDim});
  auto r = ModelRunner::create(b, toy_config(), {.max_batch_tokens = 8, .max_seqs = 4, .max_logit_rows = 4,
                                                 .max_context = 8, .block_size = 4}, std::move(fam));
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? std::move(*r) : nullptr;
}

// Hand computation: logits[v] = sum_d E[token][d] * W[v][d].
std::vector<float> hand_logits(int32_t token) {
  std::vector<float> out(kVocab);
  for (int v = 0; v < kVocab; ++v)
    for (int d = 0; d < kDim; ++d) out[static_cast<size_t>(v)] += kEmbed[static_cast<size_t>(token * kDim + d)] * kHead[static_cast<size_t>(v * kDim + d)];
  return out;
}
// token 0 -> {3, 0, 5, 0, 2}; 1 -> {2, 2, 3, -1, -2}; 2 -> {2, -2, -3, 6, 3}; 3 -> {2, 4, -8, 6, -8}; 4 -> {0, 0, 4, -3, 1}.

TEST(ToyFamily, ForwardMatchesHandComputation) {
  auto backend = make_cpu_backend();
  auto runner = toy_runner(backend.get());
  ASSERT_NE(runner, nullptr);
  auto kv = KvStorage::create(backend.get(), toy_config(), {.n_blocks = 4, .block_size = 4});
  ASSERT_TRUE(kv.is_ok());
  StepBatch b;
  b.reset(2);
  const std::vector<int32_t> p0 = {0, 3}, p1 = {2}, t0 = {0}, t1 = {1}, s0 = {0, 1}, s1 = {4};
  b.add_seq(p0, 0, 2, t0, s0, true);  // logits of token 3
  b.add_seq(p1, 0, 1, t1, s1, true);  // logits of token 2
  std::vector<float> logits(2 * kVocab);
  ASSERT_TRUE(runner->forward(b.view(), **kv, logits.data()).is_ok());
  EXPECT_EQ(std::vector<float>(logits.begin(), logits.begin() + kVocab), hand_logits(3));
  EXPECT_EQ(std::vector<float>(logits.begin() + kVocab, logits.end()), hand_logits(2));
  EXPECT_EQ(hand_logits(3), (std::vector<float>{2, 4, -8, 6, -8}));
  EXPECT_EQ(runner->eager_steps(), 1);
  EXPECT_GT(runner->workspace_bytes(), 0);

  // forward_sample, greedy: argmax of the hand logits (token 3 -> 3, token 2 -> 3); row 1's
  // logits also come to the host.
  b.temperature = {0.f, 0.f};
  b.top_k = {0, 0};
  b.top_p = {1.f, 1.f};
  b.seeds = {1, 2};
  std::vector<int32_t> ids(2, -1);
  const std::vector<int32_t> host_rows = {1};
  std::vector<float> host(kVocab);
  ASSERT_TRUE(runner->forward_sample(b, **kv, ids.data(), host_rows, host.data()).is_ok());
  EXPECT_EQ(ids, (std::vector<int32_t>{3, 3}));
  EXPECT_EQ(host, hand_logits(2));

  runner->taps().set_enabled(true);
  ASSERT_TRUE(runner->forward(b.view(), **kv, logits.data()).is_ok());
  ASSERT_NE(runner->taps().get("embed"), nullptr);
  EXPECT_EQ(*runner->taps().get("embed"), (std::vector<float>{1, 0, 2, 2, 2, -2, 3, -1, 0}));
}

TEST(ToyFamily, BadBatchIsAnErrorNamingTheField) {
  auto backend = make_cpu_backend();
  auto runner = toy_runner(backend.get());
  ASSERT_NE(runner, nullptr);
  auto kv = KvStorage::create(backend.get(), toy_config(), {.n_blocks = 4, .block_size = 4});
  ASSERT_TRUE(kv.is_ok());
  StepBatch b;
  b.reset(1);
  const std::vector<int32_t> p = {7}, t = {0}, s = {0};
  b.add_seq(p, 0, 1, t, s, true);
  std::vector<float> logits(kVocab);
  const Status st = runner->forward(b.view(), **kv, logits.data());
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("token id 7"), std::string::npos) << st.message();
}

// --- the graph path on the CPU ---

// The CPU backend with "graphs": capture keeps the step's closure and replay calls it again,
// as a device graph reruns its kernels with the recorded pointers.
class GraphCpuBackend final : public ops::Backend {
 public:
  GraphCpuBackend() : b_(make_cpu_backend()) {}
  std::string name() const override { return "cpu-graphs"; }
  DType activation_dtype() const override { return b_->activation_dtype(); }
  Result<void*> alloc(size_t n) override { return b_->alloc(n); }
  void free(void* p) override { b_->free(p); }
  Status upload(void* d, const void* s, size_t n) override { return b_->upload(d, s, n); }
  Status download(void* d, const void* s, size_t n) override { return b_->download(d, s, n); }
  Status memset_zero(void* d, size_t n) override { return b_->memset_zero(d, n); }
  Status synchronize() override { return b_->synchronize(); }
  bool weights_in_host_memory() const override { return true; }
  Status embedding(const ops::EmbeddingParams& p) override { return b_->embedding(p); }
  Status rms_norm(const ops::RmsNormParams& p) override { return b_->rms_norm(p); }
  Status matmul(const ops::MatmulParams& p) override { return b_->matmul(p); }
  Status rope(const ops::RopeParams& p) override { return b_->rope(p); }
  Status kv_write(const ops::KvWriteParams& p) override { return b_->kv_write(p); }
  Status attention(const ops::AttentionParams& p) override { return b_->attention(p); }
  Status silu_mul(const ops::SiluMulParams& p) override { return b_->silu_mul(p); }
  Status gather_rows(const ops::GatherRowsParams& p) override { return b_->gather_rows(p); }
  Status moe_route(const ops::MoeRouteParams& p) override { return b_->moe_route(p); }
  Status scale_rows(const ops::ScaleRowsParams& p) override { return b_->scale_rows(p); }
  Status moe_experts(const ops::MoeExpertsParams& p) override { return b_->moe_experts(p); }
  Status batched_matmul(const ops::BatchedMatmulParams& p) override { return b_->batched_matmul(p); }
  bool supports_sample() const override { return true; }
  Status sample(const ops::SampleParams& p) override { return b_->sample(p); }
  bool supports_graphs() const override { return true; }
  bool has_graph(uint64_t key) const override { return graphs_.count(key) > 0; }
  Status capture_graph(uint64_t key, const std::function<Status()>& record) override {
    graphs_[key] = record;
    return Status::ok();
  }
  Status replay_graph(uint64_t key) override { return graphs_.at(key)(); }
  int64_t graph_count() const override { return static_cast<int64_t>(graphs_.size()); }

 private:
  std::unique_ptr<ops::Backend> b_;
  std::map<uint64_t, std::function<Status()>> graphs_;
};

TEST(RunnerGraphs, DecodeStepsPadInPlaceAndReplay) {
  GraphCpuBackend backend;
  auto runner = toy_runner(&backend);
  ASSERT_NE(runner, nullptr);
  auto kv = KvStorage::create(&backend, toy_config(), {.n_blocks = 4, .block_size = 4});
  ASSERT_TRUE(kv.is_ok());
  // Three one-token decodes: bucket 4, tables 2 wide (8 tokens of context in blocks of 4).
  for (int round = 0; round < 2; ++round) {
    StepBatch b;
    b.reset(1);
    const std::vector<int32_t> tok[3] = {{round}, {2}, {4}}, slot[3] = {{0}, {4}, {8}}, table[3] = {{0}, {1}, {2}};
    for (int s = 0; s < 3; ++s) b.add_seq(tok[s], 0, 1, table[s], slot[s], true);
    b.temperature = {0.f, 0.f, 0.f};
    b.top_k = {0, 0, 0};
    b.top_p = {1.f, 1.f, 1.f};
    b.seeds = {1, 2, 3};
    std::vector<int32_t> ids(3, -1);
    const std::vector<int32_t> host_rows = {2};
    std::vector<float> host(kVocab);
    ASSERT_TRUE(runner->forward_sample(b, **kv, ids.data(), host_rows, host.data()).is_ok());
    // argmax of hand_logits: token 0 or 1 -> 2, token 2 -> 3, token 4 -> 2.
    EXPECT_EQ(ids, (std::vector<int32_t>{2, 3, 2})) << "round " << round;
    EXPECT_EQ(host, hand_logits(4));
    // Padded in place to the bucket.
    EXPECT_EQ(b.n_tokens(), 4);
    EXPECT_EQ(b.max_blocks_per_seq, 2);
    EXPECT_EQ(b.block_tables, (std::vector<int32_t>{0, 0, 1, 0, 2, 0, 0, 0}));
    EXPECT_EQ(b.slot_mapping, (std::vector<int32_t>{0, 4, 8, -1}));
  }
  EXPECT_EQ(runner->eager_steps(), 1);
  EXPECT_EQ(runner->graph_replays(), 1);
  EXPECT_EQ(backend.graph_count(), 1);
}

// The tiny Llama: decode steps replayed from graphs give the eager steps' tokens and logits.
TEST(RunnerGraphs, LlamaReplayMatchesEager) {
  const std::string dir = frugal::testing::temp_dir("runner_graphs");
  frugal::testing::write_text(dir + "/config.json", frugal::testing::tiny_llama_config().dump());
  std::vector<int32_t> ids_of[2];
  std::vector<float> logits_of[2];
  for (int graphs = 0; graphs < 2; ++graphs) {
    GraphCpuBackend backend;
    auto m = Model::load(dir + "/config.json", &backend, {.dummy_weights = true, .seed = 9, .max_seqs = 4,
                                                          .max_logit_rows = 4, .max_context = 32, .block_size = 4});
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    (*m)->set_graphs_enabled(graphs == 1);
    auto kv = KvStorage::create(&backend, (*m)->config(), {.n_blocks = 8, .block_size = 4});
    ASSERT_TRUE(kv.is_ok());
    // Three sequences (a decode bucket of 4: one padded row), blocks {0, 1}, {2, 3}, {4, 5};
    // prompts {1, 5, 9}, {1, 4}, {2}, then three greedy decode steps each.
    const std::vector<int32_t> prompts[3] = {{1, 5, 9}, {1, 4}, {2}}, tables[3] = {{0, 1}, {2, 3}, {4, 5}};
    std::vector<int32_t> len = {3, 2, 1};
    StepBatch b;
    b.reset(2);
    for (int s = 0; s < 3; ++s) {
      std::vector<int32_t> slots;
      for (int32_t p = 0; p < len[static_cast<size_t>(s)]; ++p) slots.push_back(8 * s + p);
      b.add_seq(prompts[s], 0, len[static_cast<size_t>(s)], tables[s], slots, true);
    }
    for (int step = 0; step < 4; ++step) {
      b.temperature.assign(3, 0.f);
      b.top_k.assign(3, 0);
      b.top_p.assign(3, 1.f);
      b.seeds.assign(3, 1);
      std::vector<int32_t> ids(3);
      const std::vector<int32_t> host_rows = {0, 1, 2};
      std::vector<float> host(3 * 32);
      ASSERT_TRUE((*m)->forward_sample(b, **kv, ids.data(), host_rows, host.data()).is_ok());
      ids_of[graphs].insert(ids_of[graphs].end(), ids.begin(), ids.end());
      logits_of[graphs].insert(logits_of[graphs].end(), host.begin(), host.end());
      b.reset(2);
      for (int s = 0; s < 3; ++s) {
        const int32_t n = len[static_cast<size_t>(s)]++;
        const std::vector<int32_t> tok = {ids[static_cast<size_t>(s)]}, slot = {8 * s + n};
        b.add_seq(tok, n, n + 1, tables[s], slot, true);
      }
    }
    if (graphs == 1) {
      EXPECT_EQ((*m)->graph_replays(), 2);  // decode steps 2 and 3; step 1 recorded the graph
    } else {
      EXPECT_EQ((*m)->graph_replays(), 0);
    }
  }
  EXPECT_EQ(ids_of[0], ids_of[1]);
  ASSERT_EQ(logits_of[0].size(), logits_of[1].size());
  for (size_t i = 0; i < logits_of[0].size(); ++i) EXPECT_NEAR(logits_of[0][i], logits_of[1][i], 1e-5) << i;
}

}  // namespace
}  // namespace frugal::model
