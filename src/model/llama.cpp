// The Llama family forward pass (LlamaForCausalLM, Qwen2ForCausalLM): pre-norm decoder layers
// of GQA attention and a gated SiLU MLP, each added into the residual stream.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

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
  void* q;         // [T, (n_head + 2 * n_head_kv) * head_dim]
  void* k;         // [T, n_head_kv * head_dim]
  void* v;         // [T, n_head_kv * head_dim]
  void* attn;      // [T, n_head * head_dim]
  void* gate;      // [T, 2 * inter]
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
                              .scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)))};
    FRUGAL_RETURN_IF_ERROR(allocate());
    inv_freq_host_ = step_inv_freq(0);
    return backend_->upload(ws_.inv_freq, inv_freq_host_.data(), inv_freq_host_.size() * sizeof(float));
  }

  Status forward(const ForwardBatch& b, KvStorage& kv, float* logits) override {
    FRUGAL_RETURN_IF_ERROR(validate(b, kv));
    FRUGAL_ASSIGN_OR_RETURN(StepBuffers sb, upload_step(b, nullptr, max_ctx_of(b)));
    FRUGAL_RETURN_IF_ERROR(enqueue_body(sb, kv));
    ++eager_steps_;
    const int64_t rows = sb.n_rows;
    if (rows == 0) return backend_->synchronize();
    FRUGAL_RETURN_IF_ERROR(backend_->download(logits, ws_.logits, static_cast<size_t>(rows * config_.vocab_size) * sizeof(float)));
    return backend_->synchronize();
  }

  Status forward_sample(const ForwardBatch& b, KvStorage& kv, const SamplingBatch& s, int32_t* ids,
                        std::span<const int32_t> host_rows, float* host_logits) override {
    const auto t0 = std::chrono::steady_clock::now();
    auto prepared = [&] { prepare_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    FRUGAL_RETURN_IF_ERROR(validate(b, kv));
    const size_t R = b.logits_rows.size();
    if (s.temperature.size() != R || s.top_k.size() != R || s.top_p.size() != R || s.seeds.size() != R)
      return invalid_argument("forward_sample: sampling arrays must have one entry per logits row (" + std::to_string(R) + ")");
    for (int32_t h : host_rows)
      if (h < 0 || static_cast<size_t>(h) >= R) return invalid_argument("forward_sample: host row " + std::to_string(h) + " out of range");
    ops::Backend* be = backend_;
    const int32_t bucket = graph_bucket(b);
    if (bucket > 0) {
      // Pad the decode batch to the bucket: padded sequences hold one token at position 0,
      // write no KV (slot -1), read block 0 (ctx 1) and sample greedily; their ids are dropped.
      const int32_t n = b.n_tokens(), bs = kv.block_size();
      const int32_t cap_blocks = (max_context_ + bs - 1) / bs;
      int32_t mb = 16;
      while (mb < b.max_blocks_per_seq) mb *= 2;
      mb = std::min(mb, cap_blocks);
      if (mb < b.max_blocks_per_seq) mb = b.max_blocks_per_seq;
      PaddedBatch& pb = padded_;
      pb.tokens.assign(b.tokens.begin(), b.tokens.end());
      pb.tokens.resize(static_cast<size_t>(bucket), 0);
      pb.positions.assign(b.positions.begin(), b.positions.end());
      pb.positions.resize(static_cast<size_t>(bucket), 0);
      pb.slots.assign(b.slot_mapping.begin(), b.slot_mapping.end());
      pb.slots.resize(static_cast<size_t>(bucket), -1);
      pb.q_start.resize(static_cast<size_t>(bucket) + 1);
      for (int32_t i = 0; i <= bucket; ++i) pb.q_start[static_cast<size_t>(i)] = i;
      pb.ctx_len.assign(b.ctx_len.begin(), b.ctx_len.end());
      pb.ctx_len.resize(static_cast<size_t>(bucket), 1);
      pb.tables.assign(static_cast<size_t>(bucket) * static_cast<size_t>(mb), 0);
      for (int32_t i = 0; i < n; ++i)
        std::copy_n(b.block_tables.begin() + static_cast<int64_t>(i) * b.max_blocks_per_seq, b.max_blocks_per_seq,
                    pb.tables.begin() + static_cast<int64_t>(i) * mb);
      pb.rows.resize(static_cast<size_t>(bucket));
      for (int32_t i = 0; i < bucket; ++i) pb.rows[static_cast<size_t>(i)] = i;
      pb.temperature.assign(s.temperature.begin(), s.temperature.end());
      pb.temperature.resize(static_cast<size_t>(bucket), 0.f);
      pb.top_k.assign(s.top_k.begin(), s.top_k.end());
      pb.top_k.resize(static_cast<size_t>(bucket), 0);
      pb.top_p.assign(s.top_p.begin(), s.top_p.end());
      pb.top_p.resize(static_cast<size_t>(bucket), 1.f);
      pb.seeds.assign(s.seeds.begin(), s.seeds.end());
      pb.seeds.resize(static_cast<size_t>(bucket), 0);
      const ForwardBatch fb{.tokens = pb.tokens, .positions = pb.positions, .q_start = pb.q_start,
                            .ctx_len = pb.ctx_len, .block_tables = pb.tables, .max_blocks_per_seq = mb,
                            .slot_mapping = pb.slots, .logits_rows = pb.rows};
      const SamplingBatch sp{.temperature = pb.temperature, .top_k = pb.top_k, .top_p = pb.top_p, .seeds = pb.seeds};
      FRUGAL_ASSIGN_OR_RETURN(StepBuffers sb, upload_step(fb, &sp, mb * bs));
      prepared();
      const uint64_t key = (static_cast<uint64_t>(bucket) << 32) | static_cast<uint32_t>(mb);
      auto record = [&]() -> Status {
        FRUGAL_RETURN_IF_ERROR(enqueue_body(sb, kv));
        return enqueue_sample(sb);
      };
      if (be->has_graph(key)) {
        FRUGAL_RETURN_IF_ERROR(be->replay_graph(key));
        ++graph_replays_;
      } else {
        // First step of this shape: run it eagerly (which also grows any scratch the ops need),
        // then record it for the next steps of the same shape.
        FRUGAL_RETURN_IF_ERROR(record());
        ++eager_steps_;
        FRUGAL_RETURN_IF_ERROR(be->capture_graph(key, record));
      }
      FRUGAL_RETURN_IF_ERROR(finish_sample(sb, R, ids, host_rows, host_logits));
      return Status::ok();
    }
    FRUGAL_ASSIGN_OR_RETURN(StepBuffers sb, upload_step(b, &s, max_ctx_of(b)));
    prepared();
    FRUGAL_RETURN_IF_ERROR(enqueue_body(sb, kv));
    FRUGAL_RETURN_IF_ERROR(enqueue_sample(sb));
    ++eager_steps_;
    return finish_sample(sb, R, ids, host_rows, host_logits);
  }

 private:
  // Device pointers of one step's inputs and outputs (all inside ws_.ints).
  struct StepBuffers {
    layers::StepInputs in;
    const int32_t* tokens = nullptr;
    const int32_t* logit_rows = nullptr;
    int64_t n_rows = 0;
    const float* temperature = nullptr;
    const int32_t* top_k = nullptr;
    const float* top_p = nullptr;
    const uint64_t* seeds = nullptr;
    int32_t* ids = nullptr;
  };
  struct PaddedBatch {
    std::vector<int32_t> tokens, positions, slots, q_start, ctx_len, tables, rows, top_k;
    std::vector<float> temperature, top_p;
    std::vector<uint64_t> seeds;
  };

  static int32_t max_ctx_of(const ForwardBatch& b) { return *std::max_element(b.ctx_len.begin(), b.ctx_len.end()); }

  // The padded batch size a decode step replays at, or 0 to run it eagerly.
  int32_t graph_bucket(const ForwardBatch& b) const {
    if (!graphs_enabled() || taps_enabled() || !backend_->supports_graphs()) return 0;
    const int32_t n = b.n_tokens();
    if (n != b.n_seqs() || static_cast<int32_t>(b.logits_rows.size()) != n) return 0;
    for (int32_t i = 0; i < n; ++i)
      if (b.logits_rows[static_cast<size_t>(i)] != i) return 0;
    const int32_t limit = std::min({opts_.max_seqs, opts_.max_batch_tokens, opts_.max_logit_rows});
    if (n > limit) return 0;
    static constexpr int32_t kBuckets[] = {1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256,
                                           320, 384, 448, 512};
    for (int32_t c : kBuckets)
      if (c >= n) return std::min(c, limit);
    return 0;
  }

  // x = embed(tokens); the layers; logits = lm_head(rms_norm(x)[logits_rows]) into ws_.logits.
  Status enqueue_body(const StepBuffers& sb, KvStorage& kv) {
    ops::Backend* be = backend_;
    const DType act = be->activation_dtype();
    const layers::StepInputs& step = sb.in;
    const int64_t n = step.n_tokens, hidden = config_.hidden_size;
    FRUGAL_RETURN_IF_ERROR(be->embedding(ops::EmbeddingParams{
        .table = embed_.table, .table_dtype = embed_.dtype, .ids = sb.tokens, .out = ws_.resid,
        .out_dtype = act, .n_tokens = n, .dim = hidden, .vocab = embed_.vocab}));
    FRUGAL_RETURN_IF_ERROR(tap("embed", ws_.resid, n, hidden));

    const layers::GqaScratch scratch{.q = ws_.q, .k = ws_.k, .v = ws_.v, .out = ws_.attn};
    for (size_t i = 0; i < layers_.size(); ++i) {
      const LlamaLayer& l = layers_[i];
      layers::GqaShape shape = shape_;
      shape.sliding_window = l.sliding_window;
      // x += attn(rms_norm(x))
      FRUGAL_RETURN_IF_ERROR(layers::rms_norm(be, l.attn_norm, act, ws_.resid, ws_.xn, n, config_.rms_norm_eps));
      FRUGAL_RETURN_IF_ERROR(layers::gqa_attention(be, act, l.attn, shape, step, kv.layer(static_cast<int32_t>(i)),
                                                   ws_.xn, ws_.resid, scratch));
      if (taps_enabled()) FRUGAL_RETURN_IF_ERROR(tap("blk." + std::to_string(i) + ".attn_out", ws_.resid, n, hidden));
      // x += mlp(rms_norm(x))
      FRUGAL_RETURN_IF_ERROR(layers::rms_norm(be, l.mlp_norm, act, ws_.resid, ws_.xn, n, config_.rms_norm_eps));
      FRUGAL_RETURN_IF_ERROR(layers::gated_mlp(be, act, l.mlp, n, ws_.xn, ws_.resid, ws_.gate, ws_.up));
      if (taps_enabled()) FRUGAL_RETURN_IF_ERROR(tap("blk." + std::to_string(i) + ".out", ws_.resid, n, hidden));
    }

    FRUGAL_RETURN_IF_ERROR(layers::rms_norm(be, final_norm_, act, ws_.resid, ws_.xn, n, config_.rms_norm_eps));
    FRUGAL_RETURN_IF_ERROR(tap("out_norm", ws_.xn, n, hidden));
    const int64_t rows = sb.n_rows;
    if (rows == 0) return Status::ok();
    FRUGAL_RETURN_IF_ERROR(be->gather_rows(ops::GatherRowsParams{
        .x = ws_.xn, .x_dtype = act, .ld_x = hidden, .rows = sb.logit_rows,
        .out = ws_.sel, .out_dtype = act, .ld_out = hidden, .n_rows = rows, .dim = hidden}));
    return be->matmul(ops::MatmulParams{
        .x = ws_.sel, .x_dtype = act, .ld_x = hidden, .w = lm_head_.weight,
        .bias = nullptr, .bias_dtype = DType::kF32, .y = ws_.logits, .y_dtype = DType::kF32,
        .ld_y = config_.vocab_size, .m = rows, .n = config_.vocab_size, .k = hidden, .accumulate = false});
  }

  Status enqueue_sample(const StepBuffers& sb) {
    if (sb.n_rows == 0) return Status::ok();
    return backend_->sample(ops::SampleParams{
        .logits = ws_.logits, .logits_dtype = DType::kF32, .ld_logits = config_.vocab_size,
        .n_rows = static_cast<int32_t>(sb.n_rows), .vocab = static_cast<int32_t>(config_.vocab_size),
        .temperature = sb.temperature, .top_k = sb.top_k, .top_p = sb.top_p, .seeds = sb.seeds, .out_ids = sb.ids});
  }

  // One copy of the ids (the first n_rows of the step), plus the logits rows sampled on the host.
  Status finish_sample(const StepBuffers& sb, size_t n_rows, int32_t* ids, std::span<const int32_t> host_rows,
                       float* host_logits) {
    if (n_rows > 0) FRUGAL_RETURN_IF_ERROR(backend_->download(ids, sb.ids, n_rows * sizeof(int32_t)));
    const int64_t vocab = config_.vocab_size;
    for (size_t i = 0; i < host_rows.size(); ++i)
      FRUGAL_RETURN_IF_ERROR(backend_->download(host_logits + static_cast<int64_t>(i) * vocab,
                                                ws_.logits + static_cast<int64_t>(host_rows[i]) * vocab,
                                                static_cast<size_t>(vocab) * sizeof(float)));
    return backend_->synchronize();
  }

  int64_t table_capacity() const {
    return static_cast<int64_t>(opts_.max_seqs) * ((max_context_ + opts_.block_size - 1) / opts_.block_size);
  }

  // Room in ws_.ints (int32 units) for one step's packed inputs: tokens, positions, slots,
  // logits rows, q_start, ctx_len, block tables, sampling parameters and ids, each 16-byte aligned.
  int64_t ints_capacity() const {
    const int64_t T = opts_.max_batch_tokens, R = opts_.max_logit_rows, S = opts_.max_seqs;
    return 3 * T + R + (S + 1) + S + table_capacity() + 7 * R + 12 * 4;
  }

  Status allocate() {
    const auto& c = config_;
    const DType act = backend_->activation_dtype();
    const int64_t T = opts_.max_batch_tokens, R = opts_.max_logit_rows;
    const int64_t q_dim = c.num_attention_heads * c.head_dim, kv_dim = c.num_key_value_heads * c.head_dim;
    // q has room for fused [q | k | v] rows, gate for fused [gate | up] rows.
    const int64_t act_elems[] = {T * c.hidden_size, T * c.hidden_size, T * (q_dim + 2 * kv_dim), T * kv_dim, T * kv_dim,
                                 T * q_dim, 2 * T * c.intermediate_size, T * c.intermediate_size, R * c.hidden_size};
    std::vector<int64_t> sizes;
    for (int64_t e : act_elems) sizes.push_back(dtype_bytes(act, e));
    sizes.push_back(R * c.vocab_size * 4);
    sizes.push_back(ints_capacity() * 4);
    sizes.push_back(rotary_dim(c) / 2 * 4);
    int64_t total = 0;
    for (int64_t s : sizes) total += (s + 255) / 256 * 256;
    FRUGAL_ASSIGN_OR_RETURN(arena_, ops::DeviceBuffer::create(backend_, static_cast<size_t>(total)));
    workspace_bytes_ = total;
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

  // Packs the batch's int arrays (and sampling parameters) into one host buffer and copies it
  // to ws_.ints in one upload; the offsets depend only on the batch's sizes, so a replayed
  // graph of the same sizes reads this step's values. For dynamic NTK rope, also this step's
  // inv_freq.
  Result<StepBuffers> upload_step(const ForwardBatch& b, const SamplingBatch* s, int32_t max_ctx_len) {
    std::vector<int32_t>& h = host_ints_;
    h.clear();
    auto put = [&](const void* src, size_t n_ints) {
      const size_t off = h.size();
      h.resize(off + (n_ints + 3) / 4 * 4, 0);
      if (n_ints > 0 && src != nullptr) std::memcpy(h.data() + off, src, n_ints * sizeof(int32_t));
      return off;
    };
    const size_t o_tokens = put(b.tokens.data(), b.tokens.size());
    const size_t o_pos = put(b.positions.data(), b.positions.size());
    const size_t o_slots = put(b.slot_mapping.data(), b.slot_mapping.size());
    const size_t o_rows = put(b.logits_rows.data(), b.logits_rows.size());
    const size_t o_qs = put(b.q_start.data(), b.q_start.size());
    const size_t o_ctx = put(b.ctx_len.data(), b.ctx_len.size());
    const size_t o_tab = put(b.block_tables.data(), b.block_tables.size());
    size_t o_temp = 0, o_topk = 0, o_topp = 0, o_seeds = 0, o_ids = 0;
    if (s != nullptr) {
      o_temp = put(s->temperature.data(), s->temperature.size());
      o_topk = put(s->top_k.data(), s->top_k.size());
      o_topp = put(s->top_p.data(), s->top_p.size());
      o_seeds = put(s->seeds.data(), s->seeds.size() * 2);
      o_ids = put(nullptr, b.logits_rows.size());
    }
    if (static_cast<int64_t>(h.size()) > ints_capacity())
      return internal_error("forward: step inputs (" + std::to_string(h.size()) + " ints) exceed the workspace");
    FRUGAL_RETURN_IF_ERROR(backend_->upload(ws_.ints, h.data(), h.size() * sizeof(int32_t)));
    if (rope_depends_on_position(config_)) {
      const int32_t max_pos = *std::max_element(b.positions.begin(), b.positions.end());
      inv_freq_host_ = step_inv_freq(max_pos);
      FRUGAL_RETURN_IF_ERROR(backend_->upload(ws_.inv_freq, inv_freq_host_.data(), inv_freq_host_.size() * sizeof(float)));
    }
    int32_t* d = ws_.ints;
    StepBuffers sb;
    sb.in = layers::StepInputs{
        .n_tokens = b.n_tokens(), .n_seqs = b.n_seqs(), .positions = d + o_pos, .slot_mapping = d + o_slots,
        .q_start = d + o_qs, .ctx_len = d + o_ctx, .block_tables = d + o_tab,
        .max_blocks_per_seq = b.max_blocks_per_seq, .max_ctx_len = max_ctx_len, .inv_freq = ws_.inv_freq};
    // Leading one-token sequences (the scheduler puts decodes first): a hint for mixed steps.
    int32_t n_dec = 0, dec_ctx = 0;
    while (n_dec < b.n_seqs() && b.q_start[static_cast<size_t>(n_dec) + 1] - b.q_start[static_cast<size_t>(n_dec)] == 1) {
      dec_ctx = std::max(dec_ctx, b.ctx_len[static_cast<size_t>(n_dec)]);
      ++n_dec;
    }
    sb.in.n_decode_seqs = n_dec;
    sb.in.decode_max_ctx_len = dec_ctx;
    sb.tokens = d + o_tokens;
    sb.logit_rows = d + o_rows;
    sb.n_rows = static_cast<int64_t>(b.logits_rows.size());
    if (s != nullptr) {
      sb.temperature = reinterpret_cast<const float*>(d + o_temp);
      sb.top_k = d + o_topk;
      sb.top_p = reinterpret_cast<const float*>(d + o_topp);
      sb.seeds = reinterpret_cast<const uint64_t*>(d + o_seeds);
      sb.ids = d + o_ids;
    }
    return sb;
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
  std::vector<int32_t> host_ints_;
  PaddedBatch padded_;
};

}  // namespace

Result<std::unique_ptr<Model>> make_llama_model(ModelParts parts) {
  auto m = std::make_unique<LlamaModel>(std::move(parts));
  FRUGAL_RETURN_IF_ERROR(m->init());
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace frugal::model
