#include "quantize/host_layer.h"

#include <algorithm>
#include <cmath>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "model/rope.h"
#include "quantize/math.h"

namespace frugal::quantize {

float dot_f32(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}


const char* stage_name(Stage s) {
  switch (s) {
    case Stage::kQkv: return "qkv";
    case Stage::kO: return "o";
    case Stage::kGateUp: return "gate_up";
    case Stage::kDown: return "down";
  }
  return "?";
}

std::vector<LinearF32*> LayerF32::stage_linears(Stage s) {
  switch (s) {
    case Stage::kQkv: return {&q, &k, &v};
    case Stage::kO: return {&o};
    case Stage::kGateUp: return {&gate, &up};
    case Stage::kDown: return {&down};
  }
  return {};
}

namespace {

Result<std::vector<float>> read_f32(const model::SafetensorsSet& st, const std::string& name, int64_t* rows, int64_t* cols) {
  const model::TensorEntry* e = st.find(name);
  if (!e) return not_found("tensor " + name + " is missing");
  if (e->dtype != DType::kF32 && e->dtype != DType::kF16 && e->dtype != DType::kBF16) {
    return unsupported("tensor " + name + ": dtype " + std::string(dtype_name(e->dtype)) +
                       "; frugal quantize reads bf16, f16 or f32 checkpoints");
  }
  if (e->shape.ndim < 1 || e->shape.ndim > 2) return corrupt("tensor " + name + ": shape " + e->shape.to_string() + ", expected 1-D or 2-D");
  *rows = e->shape[0];
  *cols = e->shape.ndim == 2 ? e->shape[1] : 1;
  const int64_t n = e->shape.numel();
  std::vector<float> v(static_cast<size_t>(n));
  // Chunks of 1M elements across the pool (a 7B layer is 0.93 GB of f32).
  constexpr int64_t kChunk = 1 << 20;
  const int64_t bytes_per = dtype_bytes(e->dtype, 1);
  ThreadPool::global().parallel_for((n + kChunk - 1) / kChunk, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t i0 = c * kChunk, m = std::min(kChunk, n - i0);
      convert_to_f32(e->dtype, e->data + i0 * bytes_per, v.data() + i0, m);
    }
  });
  return v;
}

Status read_linear(const model::SafetensorsSet& st, const std::string& name, LinearF32* l) {
  l->name = name;
  FRUGAL_ASSIGN_OR_RETURN(l->w, read_f32(st, name + ".weight", &l->out, &l->in));
  if (st.find(name + ".bias")) {
    int64_t r = 0, c = 0;
    FRUGAL_ASSIGN_OR_RETURN(l->b, read_f32(st, name + ".bias", &r, &c));
    if (r != l->out) return corrupt("tensor " + name + ".bias: " + std::to_string(r) + " values, expected " + std::to_string(l->out));
  }
  return {};
}

void rms_norm(const std::vector<float>& x, int64_t t, int64_t d, const std::vector<float>& w, float eps, std::vector<float>* y) {
  y->resize(static_cast<size_t>(t * d));
  for (int64_t r = 0; r < t; ++r) {
    double ss = 0;
    for (int64_t j = 0; j < d; ++j) ss += static_cast<double>(x[r * d + j]) * x[r * d + j];
    const float inv = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(d)) + eps);
    for (int64_t j = 0; j < d; ++j) (*y)[r * d + j] = w[j] * (x[r * d + j] * inv);
  }
}

}  // namespace

Result<LayerF32> read_layer(const model::SafetensorsSet& st, int64_t i) {
  LayerF32 l;
  l.index = i;
  const std::string p = "model.layers." + std::to_string(i) + ".";
  int64_t r = 0, c = 0;
  FRUGAL_ASSIGN_OR_RETURN(l.norm_in, read_f32(st, p + "input_layernorm.weight", &r, &c));
  FRUGAL_ASSIGN_OR_RETURN(l.norm_post, read_f32(st, p + "post_attention_layernorm.weight", &r, &c));
  FRUGAL_RETURN_IF_ERROR(read_linear(st, p + "self_attn.q_proj", &l.q));
  FRUGAL_RETURN_IF_ERROR(read_linear(st, p + "self_attn.k_proj", &l.k));
  FRUGAL_RETURN_IF_ERROR(read_linear(st, p + "self_attn.v_proj", &l.v));
  FRUGAL_RETURN_IF_ERROR(read_linear(st, p + "self_attn.o_proj", &l.o));
  FRUGAL_RETURN_IF_ERROR(read_linear(st, p + "mlp.gate_proj", &l.gate));
  FRUGAL_RETURN_IF_ERROR(read_linear(st, p + "mlp.up_proj", &l.up));
  FRUGAL_RETURN_IF_ERROR(read_linear(st, p + "mlp.down_proj", &l.down));
  return l;
}

void linear_forward(const float* x, int64_t t, const LinearF32& l, float* y, QuantMath& m) {
  m.linear(x, t, l.w.data(), l.b.empty() ? nullptr : l.b.data(), l.out, l.in, y);
}

Result<HostCalibration> HostCalibration::create(const model::ModelConfig& c, const model::SafetensorsSet& st,
                                                const std::vector<int32_t>& tokens, int64_t seq_len) {
  if (c.is_moe() || c.is_mla()) {
    return unsupported("calibration: the host forward covers dense Llama/Qwen2 layers; " + c.model_type +
                       " (MoE/MLA) quantizes with --method rtn only");
  }
  if (c.rope_scaling.type == model::RopeScalingType::kYarn) return unsupported("calibration: yarn rope scaling is not covered by the host forward");
  if (c.hidden_act != "silu") return unsupported("calibration: hidden_act \"" + c.hidden_act + "\" (expected silu)");
  if (c.use_sliding_window && c.sliding_window > 0 && seq_len > c.sliding_window) {
    return unsupported("calibration: sequences of " + std::to_string(seq_len) + " tokens exceed the sliding window " +
                       std::to_string(c.sliding_window) + " (the host forward attends to the whole sequence)");
  }
  if (seq_len <= 0 || tokens.size() < static_cast<size_t>(seq_len)) return invalid_argument("calibration: fewer tokens than one sequence");
  HostCalibration h;
  h.c_ = c;
  h.seq_len_ = seq_len;
  h.n_tokens_ = static_cast<int64_t>(tokens.size()) / seq_len * seq_len;
  h.inv_freq_ = model::rope_inv_freq(c, seq_len - 1);
  const model::TensorEntry* e = st.find("model.embed_tokens.weight");
  if (!e) return not_found("tensor model.embed_tokens.weight is missing");
  if (e->shape.ndim != 2 || e->shape[1] != c.hidden_size) return corrupt("tensor model.embed_tokens.weight: shape " + e->shape.to_string());
  const int64_t d = c.hidden_size;
  h.h_.resize(static_cast<size_t>(h.n_tokens_ * d));
  for (int64_t t = 0; t < h.n_tokens_; ++t) {
    const int32_t id = tokens[static_cast<size_t>(t)];
    if (id < 0 || id >= e->shape[0]) return invalid_argument("calibration token id " + std::to_string(id) + " is outside the embedding table");
    convert_to_f32(e->dtype, e->data + dtype_bytes(e->dtype, id * d), h.h_.data() + t * d, d);
  }
  return h;
}

std::vector<float> HostCalibration::final_norm(const std::vector<float>& w) const {
  std::vector<float> y;
  rms_norm(h_, n_tokens_, c_.hidden_size, w, static_cast<float>(c_.rms_norm_eps), &y);
  return y;
}

Status HostCalibration::run_layer(LayerF32& L, const StageHook& hook) {
  const int64_t T = n_tokens_, d = c_.hidden_size, hd = c_.head_dim, nh = c_.num_attention_heads,
                nkv = c_.num_key_value_heads;
  const float eps = static_cast<float>(c_.rms_norm_eps);
  if (L.q.out != nh * hd || L.k.out != nkv * hd || L.v.out != nkv * hd || L.q.in != d || L.o.in != nh * hd ||
      L.gate.in != d || L.down.in != L.up.out) {
    return corrupt("layer " + std::to_string(L.index) + ": linear shapes disagree with config.json");
  }
  std::vector<float> x;
  rms_norm(h_, T, d, L.norm_in, eps, &x);
  if (hook) FRUGAL_RETURN_IF_ERROR(hook(Stage::kQkv, x, L));
  std::vector<float> q(static_cast<size_t>(T * nh * hd)), k(static_cast<size_t>(T * nkv * hd)), v(k.size());
  linear_forward(x.data(), T, L.q, q.data(), *math_);
  linear_forward(x.data(), T, L.k, k.data(), *math_);
  linear_forward(x.data(), T, L.v, v.data(), *math_);
  // RoPE (rotate_half convention), positions restart at 0 in every sequence.
  const int64_t half = static_cast<int64_t>(inv_freq_.size());
  for (int64_t t = 0; t < T; ++t) {
    const float pos = static_cast<float>(t % seq_len_);
    for (int64_t j = 0; j < half; ++j) {
      const float a = pos * inv_freq_[j];
      const float cs = std::cos(a), sn = std::sin(a);
      for (int64_t hh = 0; hh < nh + nkv; ++hh) {
        float* p = hh < nh ? q.data() + (t * nh + hh) * hd : k.data() + (t * nkv + (hh - nh)) * hd;
        const float x1 = p[j], x2 = p[j + hd / 2];
        p[j] = x1 * cs - x2 * sn;
        p[j + hd / 2] = x2 * cs + x1 * sn;
      }
    }
  }
  // Causal attention within each sequence (GQA: query head hh reads kv head hh / group).
  std::vector<float> a(static_cast<size_t>(T * nh * hd), 0.0f);
  const int64_t group = nh / nkv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  ThreadPool::global().parallel_for(T * nh, 4, [&](int64_t i0, int64_t i1) {
    std::vector<float> sc(static_cast<size_t>(seq_len_));
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / nh, hh = i % nh, kvh = hh / group, s0 = t - t % seq_len_;
      const float* qr = q.data() + (t * nh + hh) * hd;
      float mx = -INFINITY;
      for (int64_t u = s0; u <= t; ++u) {
        sc[u - s0] = dot_f32(qr, k.data() + (u * nkv + kvh) * hd, hd) * scale;
        mx = std::max(mx, sc[u - s0]);
      }
      double sum = 0;
      for (int64_t u = s0; u <= t; ++u) sum += (sc[u - s0] = std::exp(sc[u - s0] - mx));
      float* out = a.data() + (t * nh + hh) * hd;
      for (int64_t u = s0; u <= t; ++u) {
        const float p = static_cast<float>(sc[u - s0] / sum);
        const float* vr = v.data() + (u * nkv + kvh) * hd;
        for (int64_t j = 0; j < hd; ++j) out[j] += p * vr[j];
      }
    }
  });
  if (hook) FRUGAL_RETURN_IF_ERROR(hook(Stage::kO, a, L));
  std::vector<float> y(static_cast<size_t>(T * d));
  linear_forward(a.data(), T, L.o, y.data(), *math_);
  for (size_t i = 0; i < h_.size(); ++i) h_[i] += y[i];
  rms_norm(h_, T, d, L.norm_post, eps, &x);
  if (hook) FRUGAL_RETURN_IF_ERROR(hook(Stage::kGateUp, x, L));
  const int64_t inter = L.up.out;
  std::vector<float> g(static_cast<size_t>(T * inter)), u(g.size());
  linear_forward(x.data(), T, L.gate, g.data(), *math_);
  linear_forward(x.data(), T, L.up, u.data(), *math_);
  for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  if (hook) FRUGAL_RETURN_IF_ERROR(hook(Stage::kDown, g, L));
  linear_forward(g.data(), T, L.down, y.data(), *math_);
  for (size_t i = 0; i < h_.size(); ++i) h_[i] += y[i];
  return {};
}

}  // namespace frugal::quantize
