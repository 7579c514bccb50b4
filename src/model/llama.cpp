// The Llama family forward pass (LlamaForCausalLM, Qwen2ForCausalLM): pre-norm decoder layers
// of GQA attention and a gated SiLU MLP, each added into the residual stream.
#include <algorithm>
#include <cmath>

#include "model/families.h"
#include "model/layers/attention.h"
#include "model/layers/linear.h"
#include "model/layers/mlp.h"
#include "model/rope.h"

namespace frugal::model {
namespace {

struct LlamaLayer {
  Norm attn_norm;  // [hidden]
  layers::GqaWeights attn;
  Norm mlp_norm;   // [hidden]
  layers::MlpWeights mlp;
  int32_t sliding_window = 0;
};

// Activation buffers, allocated once for max_batch_tokens rows (act dtype unless noted).
struct Workspace {
  void* resid;     // [T, hidden] residual stream
  void* xn;        // [T, hidden] normed input of the current block
  void* q;         // [T, n_head * head_dim]
  void* k;         // [T, n_head_kv * head_dim]
  void* v;         // [T, n_head_kv * head_dim]
  void* attn;      // [T, n_head * head_dim]
  void* gate;      // [T, inter]
  void* up;        // [T, inter]
  void* sel;       // [R, hidden] rows whose logits are wanted
  float* logits;   // [R, vocab] f32
  int32_t* ints;   // tokens, positions, slots, logits_rows, q_start, ctx_len, block tables
  float* inv_freq; // [rotary_dim / 2]
};

class LlamaModel final : public Model {
 public:
  explicit LlamaModel(ModelParts p) {
    config_ = std::move(p.config);
    generation_ = std::move(p.generation);
    opts_ = p.opts;
    backend_ = p.backend;
    weights_ = std::move(p.weights);
    max_context_ = p.max_context;
  }

  Status init() {
    const auto& c = config_;
    const std::string lm = c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
    FRUGAL_ASSIGN_OR_RETURN(embed_, weights_->embedding("model.embed_tokens.weight"));
    FRUGAL_ASSIGN_OR_RETURN(final_norm_, weights_->norm("model.norm.weight"));
    FRUGAL_ASSIGN_OR_RETURN(lm_head_, weights_->linear(lm, ""));
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      LlamaLayer l;
      FRUGAL_ASSIGN_OR_RETURN(l.attn_norm, weights_->norm(p + "input_layernorm.weight"));
      FRUGAL_ASSIGN_OR_RETURN(l.mlp_norm, weights_->norm(p + "post_attention_layernorm.weight"));
      for (auto [dst, name] : {std::pair{&l.attn.q, "q_proj"}, {&l.attn.k, "k_proj"}, {&l.attn.v, "v_proj"}, {&l.attn.o, "o_proj"}}) {
        const std::string base = p + "self_attn." + name;
        FRUGAL_ASSIGN_OR_RETURN(*dst, weights_->linear(base + ".weight", base + ".bias"));
      }
      for (auto [dst, name] : {std::pair{&l.mlp.gate, "gate_proj"}, {&l.mlp.up, "up_proj"}, {&l.mlp.down, "down_proj"}}) {
        const std::string base = p + "mlp." + name;
        FRUGAL_ASSIGN_OR_RETURN(*dst, weights_->linear(base + ".weight", base + ".bias"));
      }
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
                              .scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)))};
    FRUGAL_RETURN_IF_ERROR(allocate());
    inv_freq_host_ = step_inv_freq(0);
    return backend_->upload(ws_.inv_freq, inv_freq_host_.data(), inv_freq_host_.size() * sizeof(float));
  }

  Status forward(const ForwardBatch& b, KvStorage& kv, float* logits) override {
    FRUGAL_RETURN_IF_ERROR(validate(b, kv));
    ops::Backend* be = backend_;
    const DType act = be->activation_dtype();
    const int64_t n = b.n_tokens(), hidden = config_.hidden_size;
    FRUGAL_ASSIGN_OR_RETURN(layers::StepInputs step, upload_step(b));

    // x = embed(tokens)
    FRUGAL_RETURN_IF_ERROR(be->embedding(ops::EmbeddingParams{
        .table = embed_.table, .table_dtype = embed_.dtype, .ids = ws_.ints, .out = ws_.resid,
        .out_dtype = act, .n_tokens = n, .dim = hidden, .vocab = embed_.vocab}));
    FRUGAL_RETURN_IF_ERROR(tap("embed", ws_.resid, n, hidden));

    const layers::GqaScratch scratch{.q = ws_.q, .k = ws_.k, .v = ws_.v, .out = ws_.attn};
    for (size_t i = 0; i < layers_.size(); ++i) {
      const LlamaLayer& l = layers_[i];
      const std::string blk = "blk." + std::to_string(i);
      layers::GqaShape shape = shape_;
      shape.sliding_window = l.sliding_window;
      // x += attn(rms_norm(x))
      FRUGAL_RETURN_IF_ERROR(layers::rms_norm(be, l.attn_norm, act, ws_.resid, ws_.xn, n, config_.rms_norm_eps));
      FRUGAL_RETURN_IF_ERROR(layers::gqa_attention(be, act, l.attn, shape, step, kv.layer(static_cast<int32_t>(i)),
                                                   ws_.xn, ws_.resid, scratch));
      FRUGAL_RETURN_IF_ERROR(tap(blk + ".attn_out", ws_.resid, n, hidden));
      // x += mlp(rms_norm(x))
      FRUGAL_RETURN_IF_ERROR(layers::rms_norm(be, l.mlp_norm, act, ws_.resid, ws_.xn, n, config_.rms_norm_eps));
      FRUGAL_RETURN_IF_ERROR(layers::gated_mlp(be, act, l.mlp, n, ws_.xn, ws_.resid, ws_.gate, ws_.up));
      FRUGAL_RETURN_IF_ERROR(tap(blk + ".out", ws_.resid, n, hidden));
    }

    // logits = lm_head(rms_norm(x)[logits_rows])
    FRUGAL_RETURN_IF_ERROR(layers::rms_norm(be, final_norm_, act, ws_.resid, ws_.xn, n, config_.rms_norm_eps));
    FRUGAL_RETURN_IF_ERROR(tap("out_norm", ws_.xn, n, hidden));
    const int64_t rows = static_cast<int64_t>(b.logits_rows.size());
    if (rows == 0) return be->synchronize();
    FRUGAL_RETURN_IF_ERROR(be->gather_rows(ops::GatherRowsParams{
        .x = ws_.xn, .x_dtype = act, .ld_x = hidden, .rows = ws_.ints + kLogitRowsOff * opts_.max_batch_tokens,
        .out = ws_.sel, .out_dtype = act, .ld_out = hidden, .n_rows = rows, .dim = hidden}));
    FRUGAL_RETURN_IF_ERROR(be->matmul(ops::MatmulParams{
        .x = ws_.sel, .x_dtype = act, .ld_x = hidden, .w = lm_head_.weight, .w_dtype = lm_head_.dtype,
        .bias = nullptr, .bias_dtype = DType::kF32, .y = ws_.logits, .y_dtype = DType::kF32,
        .ld_y = config_.vocab_size, .m = rows, .n = config_.vocab_size, .k = hidden, .accumulate = false}));
    FRUGAL_RETURN_IF_ERROR(be->download(logits, ws_.logits, static_cast<size_t>(rows * config_.vocab_size) * sizeof(float)));
    return be->synchronize();
  }

 private:
  // Offsets (in units of max_batch_tokens ints) of the per-token int arrays in ws_.ints.
  static constexpr int64_t kTokensOff = 0, kPositionsOff = 1, kSlotsOff = 2, kLogitRowsOff = 3, kTokenArrays = 4;

  int64_t table_capacity() const {
    return static_cast<int64_t>(opts_.max_seqs) * ((max_context_ + opts_.block_size - 1) / opts_.block_size);
  }

  Status allocate() {
    const auto& c = config_;
    const DType act = backend_->activation_dtype();
    const int64_t T = opts_.max_batch_tokens, R = opts_.max_logit_rows;
    const int64_t q_dim = c.num_attention_heads * c.head_dim, kv_dim = c.num_key_value_heads * c.head_dim;
    const int64_t act_elems[] = {T * c.hidden_size, T * c.hidden_size, T * q_dim, T * kv_dim, T * kv_dim,
                                 T * q_dim, T * c.intermediate_size, T * c.intermediate_size, R * c.hidden_size};
    const int64_t n_ints = kTokenArrays * T + (opts_.max_seqs + 1) + opts_.max_seqs + table_capacity();
    std::vector<int64_t> sizes;
    for (int64_t e : act_elems) sizes.push_back(dtype_bytes(act, e));
    sizes.push_back(R * c.vocab_size * 4);
    sizes.push_back(n_ints * 4);
    sizes.push_back(rotary_dim(c) / 2 * 4);
    int64_t total = 0;
    for (int64_t s : sizes) total += (s + 255) / 256 * 256;
    FRUGAL_ASSIGN_OR_RETURN(arena_, ops::DeviceBuffer::create(backend_, static_cast<size_t>(total)));
    uint8_t* p = arena_.as<uint8_t>();
    void* ptrs[12];
    for (size_t i = 0; i < sizes.size(); ++i) {
      ptrs[i] = p;
      p += (sizes[i] + 255) / 256 * 256;
    }
    ws_ = Workspace{.resid = ptrs[0], .xn = ptrs[1], .q = ptrs[2], .k = ptrs[3], .v = ptrs[4], .attn = ptrs[5],
                    .gate = ptrs[6], .up = ptrs[7], .sel = ptrs[8], .logits = static_cast<float*>(ptrs[9]),
                    .ints = static_cast<int32_t*>(ptrs[10]), .inv_freq = static_cast<float*>(ptrs[11])};
    return {};
  }

  // Copies the batch's int arrays (and, for dynamic NTK, this step's inv_freq) to the device.
  Result<layers::StepInputs> upload_step(const ForwardBatch& b) {
    const int64_t T = opts_.max_batch_tokens;
    auto put = [&](int32_t* dst, std::span<const int32_t> src) {
      return backend_->upload(dst, src.data(), src.size() * sizeof(int32_t));
    };
    int32_t* q_start = ws_.ints + kTokenArrays * T;
    int32_t* ctx_len = q_start + opts_.max_seqs + 1;
    int32_t* tables = ctx_len + opts_.max_seqs;
    FRUGAL_RETURN_IF_ERROR(put(ws_.ints + kTokensOff * T, b.tokens));
    FRUGAL_RETURN_IF_ERROR(put(ws_.ints + kPositionsOff * T, b.positions));
    FRUGAL_RETURN_IF_ERROR(put(ws_.ints + kSlotsOff * T, b.slot_mapping));
    FRUGAL_RETURN_IF_ERROR(put(ws_.ints + kLogitRowsOff * T, b.logits_rows));
    FRUGAL_RETURN_IF_ERROR(put(q_start, b.q_start));
    FRUGAL_RETURN_IF_ERROR(put(ctx_len, b.ctx_len));
    FRUGAL_RETURN_IF_ERROR(put(tables, b.block_tables));
    if (rope_depends_on_position(config_)) {
      const int32_t max_pos = *std::max_element(b.positions.begin(), b.positions.end());
      inv_freq_host_ = step_inv_freq(max_pos);
      FRUGAL_RETURN_IF_ERROR(backend_->upload(ws_.inv_freq, inv_freq_host_.data(), inv_freq_host_.size() * sizeof(float)));
    }
    return layers::StepInputs{
        .n_tokens = b.n_tokens(), .n_seqs = b.n_seqs(), .positions = ws_.ints + kPositionsOff * T,
        .slot_mapping = ws_.ints + kSlotsOff * T, .q_start = q_start, .ctx_len = ctx_len,
        .block_tables = tables, .max_blocks_per_seq = b.max_blocks_per_seq,
        .max_ctx_len = *std::max_element(b.ctx_len.begin(), b.ctx_len.end()), .inv_freq = ws_.inv_freq};
  }

  std::vector<float> step_inv_freq(int64_t max_pos) const {
    return rope_inv_freq(config_, max_pos);
  }

  Status tap(const std::string& name, const void* data, int64_t rows, int64_t width) {
    return taps_enabled() ? record_tap(name, data, rows, width, width) : Status{};
  }

  Embedding embed_;
  Norm final_norm_;
  Linear lm_head_;  // [vocab, hidden]: the embedding table when tied
  std::vector<LlamaLayer> layers_;
  layers::GqaShape shape_;
  ops::DeviceBuffer arena_;
  Workspace ws_{};
  std::vector<float> inv_freq_host_;
};

}  // namespace

Result<std::unique_ptr<Model>> make_llama_model(ModelParts parts) {
  auto m = std::make_unique<LlamaModel>(std::move(parts));
  FRUGAL_RETURN_IF_ERROR(m->init());
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace frugal::model
