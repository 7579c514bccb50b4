// The DeepSeek family forward pass (DeepseekV2ForCausalLM, DeepseekV3ForCausalLM), as
// transformers' modeling_deepseek_v2 / v3: pre-norm decoder layers of multi-head latent
// attention (MLA) and either a dense gated MLP (the first first_k_dense_replace layers, and
// those off moe_layer_freq) or DeepSeekMoE (shared experts plus top-k routed experts), each added
// into the residual stream. Weights are bound by arch-table slot; the step machinery is the
// ModelRunner's (runner.h).
//
// MLA, per token: q = q_proj(x) (or q_b(rms_norm(q_a(x))) with q_lora_rank), per head
// [q_nope | q_pe]; kv_a(x) = [c | k_pe] with the latent c = rms_norm(kv_a_layernorm) of the first
// kv_lora_rank values; kv_b(c) = per head [k_nope | v]. The paged cache stores only [c | k_pe]
// (kv_lora_rank + qk_rope_head_dim values per token per layer, kv/kv_geometry.h), and attention
// runs in the latent space for every step (weight absorption):
//   q_nope . k_nope = (W_UK^T q_nope) . c,   out = W_UV (sum_j p_j c_j)
// so each head's query is [W_UK^T q_nope | q_pe] against one shared KV head [c | k_pe], which
// the paged attention op runs as MQA with K = V = the latent row (its output's first
// kv_lora_rank values are sum_j p_j c_j). W_abs[h] = [[W_UK[h]^T, 0], [0, I]] is built once
// at load (one matmul per head gives [q_abs | q_pe]); W_UV[h] is a row slice of kv_b_proj.
//
// q (or q_a) and kv_a read the same input and are placed back to back at load: one matmul into
// rows [q | c | k_pe] (fuse_rows; two where the formats differ).
//
// RoPE is the interleaved form (pairs (2i, 2i + 1)) on the qk_rope part only: transformers'
// DeepSeek-V2 complex-number rope and V3 with rope_interleave (its default).
//
// MoE: the router (mlp.gate, f32 logits over the block's input norm) feeds the routing (each
// token's top_k experts and weights): norm, router and routing are one fused op, moe_router
// (CUDA may run the three in one kernel);
// the moe_experts op then runs each token through only its chosen experts, the tokens grouped by
// expert (a grouped GEMM on CUDA, per-expert matmuls on the CPU), and the
// shared experts, and sums them into the residual in k order, the shared experts last (one op,
// so a backend may fuse them: CUDA's batch-1/2 decode path runs the whole block in two kernels);
// without the grouped op the shared experts are a plain gated MLP. An
// expert-parallel rank passes its own experts (first_expert, n_routed): only pairs routed to them
// run there. Where the backend has no grouped kernel for the experts' format (checked once at
// load: CUDA takes dense bf16 experts, all of them or a rank's subset), every routed expert the
// rank holds runs over all tokens with its rows scaled by the router weights (0 where not
// chosen) instead.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/families.h"
#include "model/layers/head.h"
#include "model/layers/linear.h"
#include "model/layers/mlp.h"
#include "model/rope.h"
#include "ops/weight_format_check.h"

namespace frugal::model {
namespace {

using T = TensorSlot;

// FRUGAL_MLA_FUSE_QKVA=0: q (q_a) and kv_a as two matmuls even where they could be one.
bool fuse_q_kva() {
  static const bool on = [] {
    const char* e = std::getenv("FRUGAL_MLA_FUSE_QKVA");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

struct MlaWeights {
  std::optional<Linear> q;   // q_proj [H * qk, hidden] (q_lora_rank == 0)
  std::optional<Linear> q_a; // q_a_proj [q_lora_rank, hidden]
  Norm q_a_norm;             // [q_lora_rank]
  std::optional<Linear> q_b; // q_b_proj [H * qk, q_lora_rank]
  Linear kv_a;               // kv_a_proj_with_mqa [rank + rope, hidden]
  std::optional<Linear> q_kva;  // q (or q_a) and kv_a as one matmul, where placed back to back (fuse_rows)
  Norm kv_a_norm;            // [rank]
  Linear kv_b;               // kv_b_proj [H * (nope + v), rank]
  Linear o;                  // o_proj [hidden, H * v]
  ops::DeviceBuffer w_abs;   // [H, rank + rope, qk]: W_abs[h] (kv_b's dtype)
};

struct MoeWeights {
  Linear router;                       // mlp.gate [E, hidden], never quantized
  const void* router_bias = nullptr;   // e_score_correction_bias [E] (V3)
  DType router_bias_dtype = DType::kF32;
  std::vector<layers::MlpWeights> experts;
  std::optional<layers::MlpWeights> shared;
  ops::DeviceBuffer views;  // WeightViews of the experts: gate [E], up [E], down [E] (moe_experts)
  ops::WeightFormat format;
  bool grouped = false;     // the backend runs moe_experts on this format
};

struct DeepseekLayer {
  Norm attn_norm;
  MlaWeights attn;
  Norm mlp_norm;
  std::optional<layers::MlpWeights> dense;  // dense layers
  std::optional<MoeWeights> moe;            // MoE layers
};

// Activation buffers for max_batch_tokens rows T and max_logit_rows rows R.
struct Workspace {
  void* resid;    // [T, hidden]
  void* xn;       // [T, hidden]
  void* qa;       // [T, q_lora_rank]
  void* q;        // [T, H * qk]
  void* kva;      // [T, rank + rope]: [c | k_pe], the cache row
  void* qcat;     // [T, H * (rank + rope)]: [q_abs | q_pe] per head
  void* ocat;     // [T, H * (rank + rope)]: attention output in the latent space
  void* attn;     // [T, H * v]
  void* gate;     // [T, 2 * max inter]
  void* up;       // [T, max inter]
  float* rlogits; // [T, E] f32 router logits
  float* rdense;  // [T, E] f32 router weights (0 where not chosen)
  int32_t* ridx;  // [T, top_k]
  float* rw;      // [T, top_k]
  void* sel;      // [R, hidden]
  void* moe_scratch;  // moe_experts_scratch_bytes(T, ...)
  layers::VocabParallelBuffers tp;  // tensor parallel only
};

class DeepseekFamily final : public ForwardFamily {
 public:
  Status bind(const FamilyInputs& in) {
    const ModelConfig& c = in.config;  // this rank's (local heads and channels) under tensor parallelism
    config_ = c;
    const MlaConfig& m = c.mla;
    H_ = c.num_attention_heads;
    vocab_ = in.full ? in.full->vocab_size : c.vocab_size;
    comm_ = in.comm;
    backend_ = in.backend;
    if (in.layout) layout_ = *in.layout;
    // Routed experts this rank holds: all, or its share (expert parallelism, model/shard.h).
    experts_ = comm_ ? layout_.experts : Range{.begin = 0, .count = c.moe.n_routed_experts};
    rank_ = m.kv_lora_rank;
    rope_ = m.qk_rope_head_dim;
    nope_ = m.qk_nope_head_dim;
    vdim_ = m.v_head_dim;
    qk_ = nope_ + rope_;
    auto name = [&](TensorSlot s, int64_t layer = -1, int64_t expert = -1) { return tensor_name(in.arch, s, layer, expert); };
    const WeightStore& w = in.weights;
    FRUGAL_ASSIGN_OR_RETURN(embed_, w.embedding(name(T::kTokenEmbd)));
    FRUGAL_ASSIGN_OR_RETURN(final_norm_, w.norm(name(T::kOutputNorm)));
    FRUGAL_ASSIGN_OR_RETURN(lm_head_, w.linear(name(c.tie_word_embeddings ? T::kTokenEmbd : T::kOutput), ""));
    if (comm_ && embed_.vocab != layout_.vocab.count)
      return internal_error("tensor parallel: the embedding holds " + std::to_string(embed_.vocab) + " rows, this rank's vocab " +
                            std::to_string(layout_.vocab.count));
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      DeepseekLayer l;
      FRUGAL_ASSIGN_OR_RETURN(l.attn_norm, w.norm(name(T::kAttnNorm, i)));
      FRUGAL_ASSIGN_OR_RETURN(l.mlp_norm, w.norm(name(T::kFfnNorm, i)));
      MlaWeights& a = l.attn;
      if (m.q_lora_rank > 0) {
        FRUGAL_ASSIGN_OR_RETURN(a.q_a, w.linear(name(T::kAttnQA, i), name(T::kAttnQABias, i)));
        FRUGAL_ASSIGN_OR_RETURN(a.q_a_norm, w.norm(name(T::kAttnQANorm, i)));
        FRUGAL_ASSIGN_OR_RETURN(a.q_b, w.linear(name(T::kAttnQB, i), ""));
      } else {
        FRUGAL_ASSIGN_OR_RETURN(a.q, w.linear(name(T::kAttnQ, i), ""));
      }
      FRUGAL_ASSIGN_OR_RETURN(a.kv_a, w.linear(name(T::kAttnKvA, i), name(T::kAttnKvABias, i)));
      FRUGAL_ASSIGN_OR_RETURN(a.kv_a_norm, w.norm(name(T::kAttnKvANorm, i)));
      // q (q_a) and kv_a both read the normed input: one matmul (one GEMV a decode step, not
      // two) where the weights were placed back to back (weights.cpp's placement_key).
      // FRUGAL_MLA_FUSE_QKVA=0 keeps them apart (A/B runs).
      if (fuse_q_kva()) {
        const Linear parts[] = {a.q ? *a.q : *a.q_a, a.kv_a};
        a.q_kva = fuse_rows(parts);
      }
      FRUGAL_ASSIGN_OR_RETURN(a.kv_b, w.linear(name(T::kAttnKvB, i), ""));
      // o_proj is row-parallel under tensor parallelism: its bias is added once, by rank 0.
      FRUGAL_ASSIGN_OR_RETURN(a.o, w.linear(name(T::kAttnO, i), comm_ && layout_.rank != 0 ? "" : name(T::kAttnOBias, i)));
      FRUGAL_ASSIGN_OR_RETURN(a.w_abs, absorbed_q_weight(in.backend, a.kv_b, name(T::kAttnKvB, i)));
      if (is_moe_layer(c, i)) {
        MoeWeights moe;
        FRUGAL_ASSIGN_OR_RETURN(moe.router, w.linear(name(T::kFfnRouter, i), ""));
        if (moe.router.weight.format.scheme != ops::WeightScheme::kDense)
          return invalid_argument(name(T::kFfnRouter, i) + ": the MoE router must be stored dense (bf16/f32), not quantized");
        if (in.arch.router_score_bias) {
          const std::string bn = name(T::kFfnRouterBias, i);
          const TensorView* b = w.find(bn);
          if (!b) return not_found(bn + ": missing");
          moe.router_bias = b->data;
          moe.router_bias_dtype = b->dtype;
        }
        for (int64_t e = experts_.begin; e < experts_.begin + experts_.count; ++e) {
          layers::MlpWeights x;
          FRUGAL_RETURN_IF_ERROR(bind_mlp(w, name(T::kExpGate, i, e), name(T::kExpUp, i, e), name(T::kExpDown, i, e), x));
          moe.experts.push_back(x);
        }
        // The grouped op over the experts this rank holds (all of them on one rank); where the
        // backend does not take their format (CUDA: quantized experts, non-bf16 activations) they
        // run one by one over the tokens (their router weight, 0 where unchosen).
        FRUGAL_RETURN_IF_ERROR(bind_grouped(in.backend, moe));
        if (c.moe.n_shared_experts > 0) {
          layers::MlpWeights x;
          FRUGAL_RETURN_IF_ERROR(bind_mlp(w, name(T::kShexpGate, i), name(T::kShexpUp, i), name(T::kShexpDown, i), x));
          moe.shared = x;
          shared_inter_ = std::max(shared_inter_, x.gate.out);
        }
        l.moe = std::move(moe);
      } else {
        layers::MlpWeights x;
        FRUGAL_RETURN_IF_ERROR(bind_mlp(w, name(T::kFfnGate, i), name(T::kFfnUp, i), name(T::kFfnDown, i), x));
        l.dense = x;
      }
      layers_.push_back(std::move(l));
    }
    // Softmax scale: qk_head_dim^-0.5, times yarn_mscale(factor, mscale_all_dim)^2 under YaRN
    // (transformers' DeepseekV2/V3Attention).
    double scale = 1.0 / std::sqrt(static_cast<double>(qk_));
    const RopeScaling& rs = c.rope_scaling;
    if (rs.type == RopeScalingType::kYarn && rs.mscale_all_dim != 0) {
      const double ms = yarn_mscale(rs.factor, rs.mscale_all_dim);
      scale *= ms * ms;
    }
    scale_ = static_cast<float>(scale);
    attention_factor_ = static_cast<float>(rope_attention_factor(c));
    interleaved_ = (c.architecture == "DeepseekV2ForCausalLM" || c.rope_interleave);
    return Status::ok();
  }

  std::vector<BufferRequest> workspace(const RunnerLimits& lim, DType act) const override {
    const auto& c = config_;
    moe_scratch_request_ = c.moe.n_routed_experts > 0
                               ? ops::moe_experts_scratch_bytes(lim.max_batch_tokens, static_cast<int32_t>(std::max<int64_t>(c.moe.num_experts_per_tok, 1)),
                                                                static_cast<int32_t>(c.moe.n_routed_experts), c.hidden_size,
                                                                std::max<int64_t>(c.moe.moe_intermediate_size, 1), shared_inter_)
                               : 256;
    const int64_t T = lim.max_batch_tokens, R = lim.max_logit_rows;
    const int64_t E = std::max<int64_t>(c.moe.n_routed_experts, 1), K = std::max<int64_t>(c.moe.num_experts_per_tok, 1);
    const int64_t inter = std::max({c.intermediate_size, c.moe.moe_intermediate_size,
                                    c.moe.moe_intermediate_size * c.moe.n_shared_experts});
    auto b = [&](const char* n, int64_t elems) { return BufferRequest{.name = n, .bytes = dtype_bytes(act, elems)}; };
    auto f = [&](const char* n, int64_t elems) { return BufferRequest{.name = n, .bytes = elems * 4}; };
    std::vector<BufferRequest> out = {b("resid", T * c.hidden_size), b("xn", T * c.hidden_size), b("qa", T * (std::max<int64_t>(c.mla.q_lora_rank, 1) + rank_ + rope_)),
            b("q", T * (H_ * qk_ + rank_ + rope_)), b("kva", T * (rank_ + rope_)), b("qcat", T * H_ * (rank_ + rope_)),
            b("ocat", T * H_ * (rank_ + rope_)), b("attn", T * H_ * vdim_), b("gate", 2 * T * inter), b("up", T * inter),
            f("router_logits", T * E), f("router_dense", T * E), f("router_idx", T * K), f("router_w", T * K),
            b("sel", R * c.hidden_size),
            BufferRequest{.name = "moe_scratch", .bytes = moe_scratch_request_}};
    if (comm_) layers::add_vocab_parallel_buffers(out, layout_, R);
    max_logit_rows_ = static_cast<size_t>(R);
    return out;
  }

  void bind_workspace(std::span<void* const> p) override {
    ws_ = Workspace{.resid = p[0], .xn = p[1], .qa = p[2], .q = p[3], .kva = p[4], .qcat = p[5], .ocat = p[6],
                    .attn = p[7], .gate = p[8], .up = p[9], .rlogits = static_cast<float*>(p[10]),
                    .rdense = static_cast<float*>(p[11]), .ridx = static_cast<int32_t*>(p[12]),
                    .rw = static_cast<float*>(p[13]), .sel = p[14], .moe_scratch = p[15]};
    moe_scratch_bytes_ = moe_scratch_request_;
    if (comm_) bind_status_ = layers::bind_vocab_parallel_buffers(backend_, p, 16, max_logit_rows_, &ws_.tp);
  }

  // x = embed(tokens); the layers; logits = lm_head(rms_norm(x)[logits_rows]).
  // Tensor parallel: every block's partial outputs are summed by one all-reduce of the residual
  // stream; rank 0 adds them to the stream, the other ranks to zeros (partial_block).
  Status forward(const StepContext& step, KvStorage& kv) override {
    FRUGAL_RETURN_IF_ERROR(bind_status_);
    ops::Backend* be = step.backend;
    const DType act = step.act;
    const int64_t n = step.in.n_tokens, hidden = config_.hidden_size;
    const double eps = config_.rms_norm_eps;
    FRUGAL_RETURN_IF_ERROR(be->embedding(ops::EmbeddingParams{
        .table = embed_.table, .table_dtype = embed_.dtype, .ids = step.tokens, .out = ws_.resid,
        .out_dtype = act, .n_tokens = n, .dim = hidden, .vocab = embed_.vocab,
        .vocab_begin = comm_ ? layout_.vocab.begin : 0, .full_vocab = vocab_}));
    if (comm_) FRUGAL_RETURN_IF_ERROR(comm_->all_reduce_sum(ws_.resid, n * hidden, act));  // vocab-parallel rows
    FRUGAL_RETURN_IF_ERROR(step.tap("embed", ws_.resid, n, hidden));
    for (size_t i = 0; i < layers_.size(); ++i) {
      const DeepseekLayer& l = layers_[i];
      const std::string blk = "blk." + std::to_string(i);
      // x += mla(rms_norm(x)). Without tensor parallelism (whose other ranks zero the stream
      // before the block) the norm runs inside mla, as one fused op with the q / kv_a projection
      // where the two are one matmul.
      const ops::RmsNormParams attn_norm = layers::rms_norm_params(l.attn_norm, act, ws_.resid, ws_.xn, n, eps);
      const bool norm_in_mla = !comm_ && l.attn.q_kva.has_value();
      if (!norm_in_mla) FRUGAL_RETURN_IF_ERROR(be->rms_norm(attn_norm));
      FRUGAL_RETURN_IF_ERROR(begin_partial(be, act, n));
      FRUGAL_RETURN_IF_ERROR(mla(be, act, l.attn, step.in, kv.layer(static_cast<int32_t>(i)), n, norm_in_mla ? &attn_norm : nullptr));
      FRUGAL_RETURN_IF_ERROR(end_partial(act, n));
      if (step.taps->enabled()) FRUGAL_RETURN_IF_ERROR(step.tap(blk + ".attn_out", ws_.resid, n, hidden));
      // x += mlp(rms_norm(x)) or moe(rms_norm(x)). A MoE block's norm runs with its router, one
      // fused op (before tensor-parallel ranks other than 0 zero the stream).
      const ops::RmsNormParams mlp_norm = layers::rms_norm_params(l.mlp_norm, act, ws_.resid, ws_.xn, n, eps);
      if (l.dense) {
        FRUGAL_RETURN_IF_ERROR(be->rms_norm(mlp_norm));
        FRUGAL_RETURN_IF_ERROR(begin_partial(be, act, n));
        FRUGAL_RETURN_IF_ERROR(layers::gated_mlp(be, act, *l.dense, n, ws_.xn, ws_.resid, ws_.gate, ws_.up));
      } else {
        if (l.moe->grouped && !comm_) {
          // The router and the grouped experts as one fused op (a backend may route inside its
          // expert kernels); with tensor parallelism the stream is zeroed between the two.
          FRUGAL_RETURN_IF_ERROR(be->moe_block(ops::MoeBlockParams{.router = router_params(act, *l.moe, n, mlp_norm),
                                                                   .experts = experts_params(act, *l.moe, n)}));
        } else {
          FRUGAL_RETURN_IF_ERROR(be->moe_router(router_params(act, *l.moe, n, mlp_norm)));
          FRUGAL_RETURN_IF_ERROR(begin_partial(be, act, n));
          FRUGAL_RETURN_IF_ERROR(moe(be, act, *l.moe, n));
        }
        // The router's f32 logits and weights per expert (0 where not chosen), any act dtype.
        if (step.taps->enabled()) {
          FRUGAL_RETURN_IF_ERROR(step.tap_f32(blk + ".router_logits", ws_.rlogits, n, config_.moe.n_routed_experts));
          FRUGAL_RETURN_IF_ERROR(step.tap_f32(blk + ".router", ws_.rdense, n, config_.moe.n_routed_experts));
        }
      }
      FRUGAL_RETURN_IF_ERROR(end_partial(act, n));
      if (step.taps->enabled()) FRUGAL_RETURN_IF_ERROR(step.tap(blk + ".out", ws_.resid, n, hidden));
    }
    if (!comm_)
      return layers::logits_head(step, final_norm_, lm_head_, {.resid = ws_.resid, .xn = ws_.xn, .sel = ws_.sel}, hidden,
                                 config_.vocab_size, eps);
    return layers::vocab_parallel_logits_head(step, final_norm_, lm_head_, {.resid = ws_.resid, .xn = ws_.xn, .sel = ws_.sel},
                                              ws_.tp,
                                              hidden, vocab_, layout_, *comm_, eps);
  }

 private:
  // A block whose output every rank adds partially (heads, channels or experts of its own):
  // ranks other than 0 start from a zero residual stream, and the all-reduce after it sums the
  // ranks' streams (rank 0's holds the input stream plus its part).
  Status begin_partial(ops::Backend* be, DType act, int64_t n) const {
    if (!comm_ || layout_.rank == 0) return Status::ok();
    return be->memset_zero(ws_.resid, static_cast<size_t>(dtype_bytes(act, n * config_.hidden_size)));
  }
  Status end_partial(DType act, int64_t n) const {
    return comm_ ? comm_->all_reduce_sum(ws_.resid, n * config_.hidden_size, act) : Status::ok();
  }

  static Status bind_mlp(const WeightStore& w, const std::string& g, const std::string& u, const std::string& d,
                         layers::MlpWeights& out) {
    FRUGAL_ASSIGN_OR_RETURN(out.gate, w.linear(g, ""));
    FRUGAL_ASSIGN_OR_RETURN(out.up, w.linear(u, ""));
    FRUGAL_ASSIGN_OR_RETURN(out.down, w.linear(d, ""));
    const Linear parts[] = {out.gate, out.up};
    out.gate_up = fuse_rows(parts);
    return Status::ok();
  }

  // W_abs[h] = [[W_UK[h]^T, 0], [0, I_rope]] ([rank + rope, qk], kv_b's dtype), where W_UK[h]
  // is rows [h (nope + v), h (nope + v) + nope) of kv_b_proj ([nope, rank]).
  Result<ops::DeviceBuffer> absorbed_q_weight(ops::Backend* be, const Linear& kv_b, const std::string& name) const {
    if (kv_b.weight.format.scheme != ops::WeightScheme::kDense)
      return unsupported(name + ": MLA weight absorption needs a dense kv_b_proj (quantized kv_b is not supported yet)");
    const DType t = kv_b.weight.format.dtype;
    if (t != DType::kBF16 && t != DType::kF32 && t != DType::kF16)
      return unsupported(name + ": kv_b_proj dtype " + std::string(dtype_name(t)) + " (expected bf16, f16 or f32)");
    const size_t es = static_cast<size_t>(dtype_bytes(t, 1));
    std::vector<uint8_t> kvb(static_cast<size_t>(kv_b.out * kv_b.in) * es);
    FRUGAL_RETURN_IF_ERROR(be->download(kvb.data(), kv_b.weight.data, kvb.size()));
    FRUGAL_RETURN_IF_ERROR(be->synchronize());
    const int64_t rows = rank_ + rope_, cols = qk_;
    std::vector<uint8_t> abs(static_cast<size_t>(H_ * rows * cols) * es, 0);
    uint8_t one[4];
    if (t == DType::kF32) { const float f = 1.0f; std::memcpy(one, &f, 4); }
    else { const uint16_t b = t == DType::kBF16 ? f32_to_bf16(1.0f) : f32_to_f16(1.0f); std::memcpy(one, &b, 2); }
    for (int64_t h = 0; h < H_; ++h) {
      uint8_t* dst = abs.data() + static_cast<size_t>(h * rows * cols) * es;
      for (int64_t r = 0; r < rank_; ++r)      // W_abs[h][r][j] = W_UK[h][j][r]
        for (int64_t j = 0; j < nope_; ++j)
          std::memcpy(dst + static_cast<size_t>(r * cols + j) * es,
                      kvb.data() + static_cast<size_t>((h * (nope_ + vdim_) + j) * rank_ + r) * es, es);
      for (int64_t r = 0; r < rope_; ++r)
        std::memcpy(dst + static_cast<size_t>((rank_ + r) * cols + nope_ + r) * es, one, es);
    }
    FRUGAL_ASSIGN_OR_RETURN(ops::DeviceBuffer buf, ops::DeviceBuffer::create(be, abs.size()));
    FRUGAL_RETURN_IF_ERROR(be->upload(buf.data(), abs.data(), abs.size()));
    FRUGAL_RETURN_IF_ERROR(be->synchronize());
    return buf;
  }

  // residual += o_proj(MLA(xn)), absorbed (see the top of the file). With `norm` (whose y is xn;
  // a.q_kva set) xn = rms_norm(residual) runs here, fused with the q / kv_a projection.
  Status mla(ops::Backend* be, DType act, const MlaWeights& a, const layers::StepInputs& in,
             const ops::KvCacheLayer& cache, int64_t n, const ops::RmsNormParams* norm) const {
    const int64_t hidden = config_.hidden_size, lat = rank_ + rope_, cat_ld = H_ * lat;
    // q (or q_a) into qbuf and [c | k_pe] = kv_a(x): fused, both in qbuf's rows [q | c | k_pe].
    const int64_t qout = a.q ? H_ * qk_ : a.q_a->out;
    void* qbuf = a.q ? ws_.q : ws_.qa;
    int64_t q_ld = qout, kva_ld = lat;
    void* kva = ws_.kva;
    // With the norm and the fused q / kv_a projection (q_lora_rank 0: V2-Lite), the whole part
    // below is one fused op (mla_attention); `fused` holds its first step until the rest is built.
    std::optional<ops::RmsNormMatmulParams> fused;
    if (a.q_kva) {
      q_ld = kva_ld = qout + lat;
      kva = static_cast<uint8_t*>(qbuf) + dtype_bytes(act, qout);
      if (norm && a.q)
        fused = ops::RmsNormMatmulParams{
            .norm = *norm, .mm = layers::linear_params(*a.q_kva, act, norm->y, norm->ld_y, qbuf, q_ld, n, false)};
      else if (norm) FRUGAL_RETURN_IF_ERROR(layers::norm_linear(be, *norm, *a.q_kva, act, qbuf, q_ld, false));
      else FRUGAL_RETURN_IF_ERROR(layers::linear(be, *a.q_kva, act, ws_.xn, hidden, qbuf, q_ld, n, false));
    } else {
      if (norm) FRUGAL_RETURN_IF_ERROR(be->rms_norm(*norm));
      FRUGAL_RETURN_IF_ERROR(layers::linear(be, a.q ? *a.q : *a.q_a, act, ws_.xn, hidden, qbuf, q_ld, n, false));
      FRUGAL_RETURN_IF_ERROR(layers::linear(be, a.kv_a, act, ws_.xn, hidden, kva, kva_ld, n, false));
    }
    if (!a.q) {  // q = q_b(rms_norm(q_a)), the norm in place
      const int64_t qr = a.q_a->out, qa_ld = q_ld;
      FRUGAL_RETURN_IF_ERROR(be->rms_norm(ops::RmsNormParams{
          .x = ws_.qa, .residual = nullptr, .y = ws_.qa, .weight = a.q_a_norm.weight, .act_dtype = act,
          .weight_dtype = a.q_a_norm.dtype, .rows = n, .dim = qr, .ld_x = qa_ld, .ld_res = qa_ld, .ld_y = qa_ld,
          .eps = static_cast<float>(config_.rms_norm_eps)}));
      q_ld = H_ * qk_;
      FRUGAL_RETURN_IF_ERROR(layers::linear(be, *a.q_b, act, ws_.qa, qa_ld, ws_.q, q_ld, n, false));
    }
    // c = rms_norm(c) in place; RoPE on q_pe (the last rope values of each q head) and k_pe (the
    // end of the latent row): pointers start at the rope part, heads are qk apart, only the first
    // rotary_dim rotate; the row [c | k_pe] into the latent cache (ops/params.h, MlaKvPrologueParams).
    const ops::MlaKvPrologueParams prologue{
        .norm = {.x = kva, .residual = nullptr, .y = kva, .weight = a.kv_a_norm.weight, .act_dtype = act,
                 .weight_dtype = a.kv_a_norm.dtype, .rows = n, .dim = rank_, .ld_x = kva_ld, .ld_res = kva_ld,
                 .ld_y = kva_ld, .eps = static_cast<float>(config_.rms_norm_eps)},
        .rope = {.q = static_cast<uint8_t*>(ws_.q) + dtype_bytes(act, nope_),
                 .k = static_cast<uint8_t*>(kva) + dtype_bytes(act, rank_), .act_dtype = act,
                 .positions = in.positions, .inv_freq = in.inv_freq, .n_tokens = n, .ld_q = q_ld, .ld_k = kva_ld,
                 .n_head = static_cast<int32_t>(H_), .n_head_kv = 1, .head_dim = static_cast<int32_t>(qk_),
                 .rotary_dim = static_cast<int32_t>(rope_), .attention_factor = attention_factor_,
                 .interleaved = interleaved_},
        .kv = {.cache = cache, .k = kva, .v = kva, .act_dtype = act, .ld_k = kva_ld, .ld_v = kva_ld,
               .slot_mapping = in.slot_mapping, .n_tokens = n}};
    // [q_abs | q_pe] per head: W_abs[h] [lat, qk] against q[h], one batched matmul over the heads.
    const DType wt = a.kv_b.weight.format.dtype;
    const ops::BatchedMatmulParams absorb{
        .x = ws_.q, .x_dtype = act, .ld_x = q_ld, .stride_x = qk_, .w = a.w_abs.data(), .w_dtype = wt,
        .stride_w = lat * qk_, .y = ws_.qcat, .y_dtype = act, .ld_y = cat_ld, .stride_y = lat, .batch = H_, .m = n,
        .n = lat, .k = qk_};
    // Attention in the latent space, then v[h] = W_UV[h] (the latent part of each head's output);
    // W_UV[h] is rows [h (nope + v) + nope, + v) of kv_b. One fused op (ocat is its scratch).
    const ops::AttentionBatchedMatmulParams attn{
        .attn = {.cache = cache, .q = ws_.qcat, .out = ws_.ocat, .act_dtype = act, .ld_q = cat_ld, .ld_out = cat_ld,
                 .n_seqs = in.n_seqs, .n_tokens = static_cast<int32_t>(n), .q_start = in.q_start, .ctx_len = in.ctx_len,
                 .block_tables = in.block_tables, .max_blocks_per_seq = in.max_blocks_per_seq,
                 .max_ctx_len = in.max_ctx_len, .n_head = static_cast<int32_t>(H_), .sliding_window = 0, .scale = scale_,
                 .n_decode_seqs = in.n_decode_seqs, .decode_max_ctx_len = in.decode_max_ctx_len},
        .mm = {.x = ws_.ocat, .x_dtype = act, .ld_x = cat_ld, .stride_x = lat,
               .w = static_cast<const uint8_t*>(a.kv_b.weight.data) + dtype_bytes(wt, nope_ * rank_), .w_dtype = wt,
               .stride_w = (nope_ + vdim_) * rank_, .y = ws_.attn, .y_dtype = act, .ld_y = H_ * vdim_,
               .stride_y = vdim_, .batch = H_, .m = n, .n = vdim_, .k = rank_}};
    const ops::MatmulParams o = layers::linear_params(a.o, act, ws_.attn, H_ * vdim_, ws_.resid, hidden, n, true);
    if (fused)
      return be->mla_attention(ops::MlaAttentionParams{
          .qkv = *fused, .prologue = prologue, .absorb = absorb, .attn = attn, .o = o,
          .absorb_rope_identity = true});  // absorbed_q_weight's [[W_UK^T, 0], [0, I]]
    FRUGAL_RETURN_IF_ERROR(be->mla_kv_prologue(prologue));
    FRUGAL_RETURN_IF_ERROR(be->batched_matmul(absorb));
    FRUGAL_RETURN_IF_ERROR(be->attention_batched_matmul(attn));
    return be->matmul(o);
  }

  // xn = rms_norm(residual), the router's f32 logits over it, then the routing: one fused op
  // (a backend may run the three in one kernel).
  ops::MoeRouterParams router_params(DType act, const MoeWeights& w, int64_t n, const ops::RmsNormParams& norm) const {
    const MoeConfig& m = config_.moe;
    const int64_t hidden = config_.hidden_size, E = m.n_routed_experts;
    const ops::MoeTopk method = m.topk_method == "noaux_tc"               ? ops::MoeTopk::kNoauxTc
                                : m.topk_method == "group_limited_greedy" ? ops::MoeTopk::kGroupLimitedGreedy
                                                                          : ops::MoeTopk::kGreedy;
    return ops::MoeRouterParams{
        .norm = norm,
        .mm = {.x = ws_.xn, .x_dtype = act, .ld_x = hidden, .w = w.router.weight, .bias = nullptr,
               .bias_dtype = DType::kF32, .y = ws_.rlogits, .y_dtype = DType::kF32, .ld_y = E, .m = n, .n = E, .k = hidden,
               .accumulate = false},
        .route = {.logits = ws_.rlogits, .ld_logits = E, .bias = w.router_bias, .bias_dtype = w.router_bias_dtype,
                  .n_tokens = n, .n_experts = static_cast<int32_t>(E), .top_k = static_cast<int32_t>(m.num_experts_per_tok),
                  .n_group = method == ops::MoeTopk::kGreedy ? 1 : static_cast<int32_t>(m.n_group),
                  .topk_group = method == ops::MoeTopk::kGreedy ? 1 : static_cast<int32_t>(m.topk_group),
                  .scoring = m.scoring_func == "sigmoid" ? ops::MoeScoring::kSigmoid : ops::MoeScoring::kSoftmax,
                  .method = method, .norm_topk_prob = norm_topk_prob(),
                  .routed_scaling_factor = static_cast<float>(m.routed_scaling_factor), .topk_idx = ws_.ridx,
                  .topk_weight = ws_.rw, .dense_weight = ws_.rdense}};
  }

  // The grouped experts over router_params()'s choices (w.grouped): residual += sum_e weight[t, e]
  // expert_e(xn) + shared(xn).
  ops::MoeExpertsParams experts_params(DType act, const MoeWeights& w, int64_t n) const {
    const MoeConfig& m = config_.moe;
    const int64_t hidden = config_.hidden_size;
    const auto* views = w.views.as<ops::WeightView>();
    return ops::MoeExpertsParams{
        .x = ws_.xn, .act_dtype = act, .ld_x = hidden, .out = ws_.resid, .ld_out = hidden, .n_tokens = n,
        .hidden = hidden, .inter = m.moe_intermediate_size, .n_experts = static_cast<int32_t>(experts_.count),
        .top_k = static_cast<int32_t>(m.num_experts_per_tok), .topk_idx = ws_.ridx, .topk_weight = ws_.rw,
        .gate = views, .up = views + experts_.count, .down = views + 2 * experts_.count, .format = w.format,
        .scratch = ws_.moe_scratch, .scratch_bytes = moe_scratch_bytes_,
        .first_expert = static_cast<int32_t>(experts_.begin), .n_routed = static_cast<int32_t>(m.n_routed_experts),
        .shared_inter = w.shared ? w.shared->gate.out : 0, .shared_gate = w.shared ? w.shared->gate.weight : ops::WeightView{},
        .shared_up = w.shared ? w.shared->up.weight : ops::WeightView{},
        .shared_down = w.shared ? w.shared->down.weight : ops::WeightView{},
        .shared_gate_up = w.shared && w.shared->gate_up ? w.shared->gate_up->weight : ops::WeightView{}};
  }

  // residual += sum_e weight[t, e] expert_e(xn) + shared(xn), over the router's choices.
  Status moe(ops::Backend* be, DType act, const MoeWeights& w, int64_t n) const {
    const int64_t E = config_.moe.n_routed_experts;
    if (w.grouped) return be->moe_experts(experts_params(act, w, n));
    for (int64_t e = experts_.begin; e < experts_.begin + experts_.count; ++e)
      FRUGAL_RETURN_IF_ERROR(expert(be, act, w.experts[static_cast<size_t>(e - experts_.begin)], n, ws_.rdense + e, E));
    if (w.shared) FRUGAL_RETURN_IF_ERROR(layers::gated_mlp(be, act, *w.shared, n, ws_.xn, ws_.resid, ws_.gate, ws_.up));
    return Status::ok();
  }

  // The WeightViews of the experts this rank holds as one table on the device, and whether the
  // backend runs the grouped moe_experts op on their format and range (asked once with zero tokens).
  // FRUGAL_MOE_GROUPED=0 keeps the experts one by one (A/B runs).
  Status bind_grouped(ops::Backend* be, MoeWeights& moe) const {
    static const bool off = [] {
      const char* e = std::getenv("FRUGAL_MOE_GROUPED");
      return e && std::strcmp(e, "0") == 0;
    }();
    const int64_t E = static_cast<int64_t>(moe.experts.size());
    if (E == 0 || off) return Status::ok();
    moe.format = moe.experts[0].gate.weight.format;
    std::vector<ops::WeightView> v(static_cast<size_t>(3 * E));
    bool same = true;
    for (int64_t e = 0; e < E; ++e) {
      const auto& x = moe.experts[static_cast<size_t>(e)];
      v[static_cast<size_t>(e)] = x.gate.weight;
      v[static_cast<size_t>(E + e)] = x.up.weight;
      v[static_cast<size_t>(2 * E + e)] = x.down.weight;
      for (const Linear* l : {&x.gate, &x.up, &x.down})
        same = same && ops::weight_format_name(l->weight.format) == ops::weight_format_name(moe.format);
    }
    if (!same) return Status::ok();
    const Status probe = be->moe_experts(ops::MoeExpertsParams{
        .x = nullptr, .act_dtype = be->activation_dtype(), .ld_x = config_.hidden_size, .out = nullptr,
        .ld_out = config_.hidden_size, .n_tokens = 0, .hidden = config_.hidden_size,
        .inter = config_.moe.moe_intermediate_size, .n_experts = static_cast<int32_t>(E),
        .top_k = static_cast<int32_t>(config_.moe.num_experts_per_tok), .topk_idx = nullptr, .topk_weight = nullptr,
        .gate = nullptr, .up = nullptr, .down = nullptr, .format = moe.format, .scratch = nullptr, .scratch_bytes = 0,
        .first_expert = static_cast<int32_t>(experts_.begin), .n_routed = static_cast<int32_t>(config_.moe.n_routed_experts)});
    if (probe.code() == ErrorCode::kUnsupported) return Status::ok();
    FRUGAL_RETURN_IF_ERROR(probe);
    const size_t bytes = v.size() * sizeof(ops::WeightView);
    FRUGAL_ASSIGN_OR_RETURN(moe.views, ops::DeviceBuffer::create(be, bytes));
    FRUGAL_RETURN_IF_ERROR(be->upload(moe.views.data(), v.data(), bytes));
    FRUGAL_RETURN_IF_ERROR(be->synchronize());
    moe.grouped = true;
    return Status::ok();
  }

  // transformers' DeepseekV2Moe never normalizes the top-k weights; V3 does with norm_topk_prob.
  bool norm_topk_prob() const {
    return config_.architecture == "DeepseekV3ForCausalLM" && config_.moe.norm_topk_prob;
  }

  // residual += scale[t] * down(silu(gate(xn)) * up(xn)), scale[t] = weights[t * ld_w].
  Status expert(ops::Backend* be, DType act, const layers::MlpWeights& w, int64_t n, const float* weights,
                int64_t ld_w) const {
    const int64_t hidden = w.gate.in, inter = w.gate.out;
    if (w.gate_up) {
      FRUGAL_RETURN_IF_ERROR(layers::linear(be, *w.gate_up, act, ws_.xn, hidden, ws_.gate, 2 * inter, n, false));
      FRUGAL_RETURN_IF_ERROR(be->silu_mul(ops::SiluMulParams{
          .gate = ws_.gate, .up = static_cast<uint8_t*>(ws_.gate) + dtype_bytes(act, inter), .out = ws_.up,
          .act_dtype = act, .n_tokens = n, .dim = inter, .ld_gate = 2 * inter, .ld_up = 2 * inter, .ld_out = inter}));
    } else {
      FRUGAL_RETURN_IF_ERROR(layers::linear(be, w.gate, act, ws_.xn, hidden, ws_.gate, inter, n, false));
      FRUGAL_RETURN_IF_ERROR(layers::linear(be, w.up, act, ws_.xn, hidden, ws_.up, inter, n, false));
      FRUGAL_RETURN_IF_ERROR(be->silu_mul(ops::SiluMulParams{
          .gate = ws_.gate, .up = ws_.up, .out = ws_.up, .act_dtype = act, .n_tokens = n, .dim = inter,
          .ld_gate = inter, .ld_up = inter, .ld_out = inter}));
    }
    FRUGAL_RETURN_IF_ERROR(be->scale_rows(ops::ScaleRowsParams{
        .x = ws_.up, .act_dtype = act, .ld_x = inter, .rows = n, .dim = inter, .scale = weights, .ld_scale = ld_w}));
    return layers::linear(be, w.down, act, ws_.up, inter, ws_.resid, hidden, n, true);
  }

  ModelConfig config_;
  int64_t H_ = 0, rank_ = 0, rope_ = 0, nope_ = 0, vdim_ = 0, qk_ = 0;
  int64_t vocab_ = 0;  // the whole vocabulary (config_ is this rank's under tensor parallelism)
  dist::Communicator* comm_ = nullptr;  // tensor parallel (world > 1) only
  ops::Backend* backend_ = nullptr;
  RankLayout layout_;
  Range experts_;  // the routed experts this rank holds
  mutable size_t max_logit_rows_ = 0;
  Status bind_status_;
  float scale_ = 1.0f, attention_factor_ = 1.0f;
  bool interleaved_ = true;
  Embedding embed_;
  Norm final_norm_;
  Linear lm_head_;
  std::vector<DeepseekLayer> layers_;
  Workspace ws_{};
  mutable int64_t moe_scratch_request_ = 0;  // the moe_scratch bytes workspace() asked for
  int64_t shared_inter_ = 0;  // the shared experts' channels on this rank (the most of any layer)
  int64_t moe_scratch_bytes_ = 0;
};

}  // namespace

Result<std::unique_ptr<ForwardFamily>> make_deepseek_family(const FamilyInputs& in) {
  auto f = std::make_unique<DeepseekFamily>();
  FRUGAL_RETURN_IF_ERROR(f->bind(in));
  return std::unique_ptr<ForwardFamily>(std::move(f));
}

}  // namespace frugal::model
