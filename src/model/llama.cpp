// The Llama family forward pass (LlamaForCausalLM, Qwen2ForCausalLM): pre-norm decoder layers
// of GQA attention and a gated SiLU MLP, each added into the residual stream. Weights are
// bound by arch-table slot; the step machinery is the ModelRunner's (runner.h).
// Tensor parallel (model/shard.h): each rank runs its heads and intermediate channels; o_proj
// and down_proj write partial sums that one all-reduce per block adds (rank 0 adds the
// residual and the biases); lm_head runs on the rank's vocab rows and the logits are
// all-gathered.
#include <cmath>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "dist/communicator.h"
#include "model/families.h"
#include "model/layers/attention.h"
#include "model/layers/head.h"
#include "model/layers/linear.h"
#include "model/layers/mlp.h"
#include "model/rope.h"

namespace frugal::model {
namespace {

using T = TensorSlot;

struct LlamaLayer {
  Norm attn_norm;  // [hidden]
  layers::GqaWeights attn;
  Norm mlp_norm;   // [hidden]
  layers::MlpWeights mlp;
  int32_t sliding_window = 0;
};

// Activation buffers for max_batch_tokens rows T and max_logit_rows rows R (act dtype).
struct Workspace {
  void* resid;  // [T, hidden] residual stream
  void* xn;     // [T, hidden] normed input of the current block
  void* q;      // [T, (n_head + 2 * n_head_kv) * head_dim]: room for fused [q | k | v]
  void* k;      // [T, n_head_kv * head_dim]
  void* v;      // [T, n_head_kv * head_dim]
  void* attn;   // [T, n_head * head_dim]
  void* gate;   // [T, 2 * inter]: room for fused [gate | up]
  void* up;     // [T, inter]
  void* sel;    // [R, hidden] rows whose logits are wanted
  layers::VocabParallelBuffers tp;  // tensor parallel only
};

class LlamaFamily final : public ForwardFamily {
 public:
  Status bind(const FamilyInputs& in) {
    const ModelConfig& c = in.config;
    config_ = c;
    vocab_ = in.full ? in.full->vocab_size : c.vocab_size;
    comm_ = in.comm;
    backend_ = in.backend;
    if (in.layout) layout_ = *in.layout;
    const bool rank0 = layout_.rank == 0;
    auto name = [&](TensorSlot s, int64_t layer = -1) { return tensor_name(in.arch, s, layer); };
    const WeightStore& w = in.weights;
    FRUGAL_ASSIGN_OR_RETURN(embed_, w.embedding(name(T::kTokenEmbd)));
    FRUGAL_ASSIGN_OR_RETURN(final_norm_, w.norm(name(T::kOutputNorm)));
    FRUGAL_ASSIGN_OR_RETURN(lm_head_, w.linear(name(c.tie_word_embeddings ? T::kTokenEmbd : T::kOutput), ""));
    // Tensor parallel: the embedding is vocab-parallel (this rank's rows, shard.cpp), so a tied
    // lm_head is that shard as it is.
    if (comm_ && embed_.vocab != layout_.vocab.count)
      return internal_error("tensor parallel: the embedding holds " + std::to_string(embed_.vocab) + " rows, this rank's vocab " +
                            std::to_string(layout_.vocab.count));
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      LlamaLayer l;
      FRUGAL_ASSIGN_OR_RETURN(l.attn_norm, w.norm(name(T::kAttnNorm, i)));
      FRUGAL_ASSIGN_OR_RETURN(l.mlp_norm, w.norm(name(T::kFfnNorm, i)));
      const std::tuple<Linear*, TensorSlot, TensorSlot> linears[] = {
          {&l.attn.q, T::kAttnQ, T::kAttnQBias}, {&l.attn.k, T::kAttnK, T::kAttnKBias},
          {&l.attn.v, T::kAttnV, T::kAttnVBias}, {&l.attn.o, T::kAttnO, T::kAttnOBias},
          {&l.mlp.gate, T::kFfnGate, T::kFfnGateBias}, {&l.mlp.up, T::kFfnUp, T::kFfnUpBias},
          {&l.mlp.down, T::kFfnDown, T::kFfnDownBias}};
      for (auto [dst, weight, bias] : linears) {
        // Row-parallel biases are added once, by rank 0.
        const bool row_parallel = weight == T::kAttnO || weight == T::kFfnDown;
        FRUGAL_ASSIGN_OR_RETURN(*dst, w.linear(name(weight, i), row_parallel && !rank0 ? "" : name(bias, i)));
      }
      const Linear qkv_parts[] = {l.attn.q, l.attn.k, l.attn.v};
      l.attn.qkv = fuse_rows(qkv_parts);
      const Linear gu_parts[] = {l.mlp.gate, l.mlp.up};
      l.mlp.gate_up = fuse_rows(gu_parts);
      fused_matmuls_ += (l.attn.qkv ? 1 : 0) + (l.mlp.gate_up ? 1 : 0);
      // transformers (Qwen2): layers from max_window_layers on use the sliding window when
      // use_sliding_window is set.
      if (c.use_sliding_window && i >= c.max_window_layers) l.sliding_window = static_cast<int32_t>(c.sliding_window);
      layers_.push_back(l);
    }
    shape_ = layers::GqaShape{.n_head = static_cast<int32_t>(c.num_attention_heads),
                              .n_head_kv = static_cast<int32_t>(c.num_key_value_heads),
                              .head_dim = static_cast<int32_t>(c.head_dim),
                              .rotary_dim = static_cast<int32_t>(rotary_dim(c)),
                              .sliding_window = 0,
                              .scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim))),
                              .attention_factor = static_cast<float>(rope_attention_factor(c)),
                              .accumulate_o = rank0};
    return Status::ok();
  }

  std::vector<BufferRequest> workspace(const RunnerLimits& lim, DType act) const override {
    max_logit_rows_ = static_cast<size_t>(lim.max_logit_rows);
    const auto& c = config_;
    const int64_t T = lim.max_batch_tokens, R = lim.max_logit_rows;
    const int64_t q_dim = c.num_attention_heads * c.head_dim, kv_dim = c.num_key_value_heads * c.head_dim;
    auto b = [&](const char* n, int64_t elems) { return BufferRequest{.name = n, .bytes = dtype_bytes(act, elems)}; };
    std::vector<BufferRequest> out = {b("resid", T * c.hidden_size), b("xn", T * c.hidden_size), b("q", T * (q_dim + 2 * kv_dim)),
            b("k", T * kv_dim), b("v", T * kv_dim), b("attn", T * q_dim), b("gate", 2 * T * c.intermediate_size),
            b("up", T * c.intermediate_size), b("sel", R * c.hidden_size)};
    if (comm_) layers::add_vocab_parallel_buffers(out, layout_, R);
    return out;
  }

  void bind_workspace(std::span<void* const> p) override {
    ws_ = Workspace{.resid = p[0], .xn = p[1], .q = p[2], .k = p[3], .v = p[4], .attn = p[5],
                    .gate = p[6], .up = p[7], .sel = p[8]};
    if (comm_) bind_status_ = layers::bind_vocab_parallel_buffers(backend_, p, 9, max_logit_rows_, &ws_.tp);
  }

  int32_t fused_matmuls() const override { return fused_matmuls_; }

  // x = embed(tokens); the layers; logits = lm_head(rms_norm(x)[logits_rows]).
  Status forward(const StepContext& step, KvStorage& kv) override {
    FRUGAL_RETURN_IF_ERROR(bind_status_);
    ops::Backend* be = step.backend;
    const DType act = step.act;
    const int64_t n = step.in.n_tokens, hidden = config_.hidden_size;
    const double eps = config_.rms_norm_eps;
    FRUGAL_RETURN_IF_ERROR(be->embedding(ops::EmbeddingParams{
        .table = embed_.table, .table_dtype = embed_.dtype, .ids = step.tokens, .out = ws_.resid,
        .out_dtype = act, .n_tokens = n, .dim = hidden, .vocab = embed_.vocab,
        .vocab_begin = layout_.vocab.begin, .full_vocab = vocab_}));
    // Vocab-parallel: each token's row came from one rank, zeros from the others (an exact sum).
    if (comm_) FRUGAL_RETURN_IF_ERROR(comm_->all_reduce_sum(ws_.resid, n * hidden, act));
    FRUGAL_RETURN_IF_ERROR(step.tap("embed", ws_.resid, n, hidden));

    const layers::GqaScratch scratch{.q = ws_.q, .k = ws_.k, .v = ws_.v, .out = ws_.attn};
    // Each norm goes with the projection before it (matmul_rms_norm: o with the MLP's norm, down
    // with the next layer's attention norm; a backend may normalize in the projection's split
    // epilogue) or with the one after it (rms_norm_matmul), where FP8 weights after it may take
    // the norm into their W8A8 activation quantization. Tensor-parallel ranks keep them apart
    // (the all-reduce comes between).
    const auto norm_after = [&](const LlamaLayer& l) {
      return comm_ == nullptr && !(l.attn.qkv && l.attn.qkv->weight.format.scheme == ops::WeightScheme::kFp8);
    };
    bool attn_normed = false;  // ws_.xn holds this layer's attention norm (the last down ran it)
    for (size_t i = 0; i < layers_.size(); ++i) {
      const LlamaLayer& l = layers_[i];
      layers::GqaShape shape = shape_;
      shape.sliding_window = l.sliding_window;
      shape.sink_tokens = l.sliding_window > 0 ? static_cast<int32_t>(config_.attention_sink_tokens) : 0;
      // x += attn(rms_norm(x)): the norm with the qkv projection (one fused op) or already run
      const ops::RmsNormParams attn_norm = layers::rms_norm_params(l.attn_norm, act, ws_.resid, ws_.xn, n, eps);
      const ops::RmsNormParams mlp_norm = layers::rms_norm_params(l.mlp_norm, act, ws_.resid, ws_.xn, n, eps);
      const bool mlp_norm_with_o = comm_ == nullptr && !layers::mlp_norm_with_gate_up(l.mlp);
      FRUGAL_RETURN_IF_ERROR(layers::gqa_attention(be, act, l.attn, shape, step.in, kv.layer(static_cast<int32_t>(i)),
                                                   ws_.xn, ws_.resid, scratch, attn_normed ? nullptr : &attn_norm,
                                                   mlp_norm_with_o ? &mlp_norm : nullptr));
      if (comm_) FRUGAL_RETURN_IF_ERROR(comm_->all_reduce_sum(ws_.resid, n * hidden, act));
      if (step.taps->enabled()) FRUGAL_RETURN_IF_ERROR(step.tap("blk." + std::to_string(i) + ".attn_out", ws_.resid, n, hidden));
      // x += mlp(rms_norm(x)): the norm with o (above), or inside the MLP (with FP8 gate_up
      // weights, one fused op); the next layer's attention norm with down where norm_after
      const bool next_with_down = i + 1 < layers_.size() && norm_after(layers_[i + 1]);
      const ops::RmsNormParams next_norm =
          next_with_down ? layers::rms_norm_params(layers_[i + 1].attn_norm, act, ws_.resid, ws_.xn, n, eps) : attn_norm;
      FRUGAL_RETURN_IF_ERROR(layers::gated_mlp(be, act, l.mlp, n, ws_.xn, ws_.resid, ws_.gate, ws_.up, !comm_ || layout_.rank == 0,
                                               mlp_norm_with_o ? nullptr : &mlp_norm, next_with_down ? &next_norm : nullptr));
      attn_normed = next_with_down;
      if (comm_) FRUGAL_RETURN_IF_ERROR(comm_->all_reduce_sum(ws_.resid, n * hidden, act));
      if (step.taps->enabled()) FRUGAL_RETURN_IF_ERROR(step.tap("blk." + std::to_string(i) + ".out", ws_.resid, n, hidden));
    }

    if (!comm_)
      return layers::logits_head(step, final_norm_, lm_head_, {.resid = ws_.resid, .xn = ws_.xn, .sel = ws_.sel}, hidden,
                                 vocab_, eps);
    return layers::vocab_parallel_logits_head(step, final_norm_, lm_head_, {.resid = ws_.resid, .xn = ws_.xn, .sel = ws_.sel},
                                              ws_.tp,
                                              hidden, vocab_, layout_, *comm_, eps);
  }

 private:
  ModelConfig config_;
  Embedding embed_;
  Norm final_norm_;
  Linear lm_head_;  // [vocab, hidden]: the embedding table when tied
  std::vector<LlamaLayer> layers_;
  layers::GqaShape shape_;
  Workspace ws_{};
  int32_t fused_matmuls_ = 0;
  int64_t vocab_ = 0;                  // the whole model's vocab (logits width)
  dist::Communicator* comm_ = nullptr;  // tensor parallel (world > 1) only
  ops::Backend* backend_ = nullptr;
  RankLayout layout_;
  mutable size_t max_logit_rows_ = 0;
  Status bind_status_;
};

}  // namespace

Result<std::unique_ptr<ForwardFamily>> make_llama_family(const FamilyInputs& in) {
  auto f = std::make_unique<LlamaFamily>();
  FRUGAL_RETURN_IF_ERROR(f->bind(in));
  return std::unique_ptr<ForwardFamily>(std::move(f));
}

}  // namespace frugal::model
