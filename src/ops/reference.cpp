#include "ops/reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/status.h"
#include "ops/kv_quant.h"
#include "ops/quant_element.h"
#include "ops/weight_format_check.h"

namespace frugal::ops::ref {

float load(DType t, const void* base, int64_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(base)[i];
    case DType::kBF16: return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::kF16: return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::kF8E4M3: return f8e4m3_to_f32(static_cast<const uint8_t*>(base)[i]);
    case DType::kF64: return static_cast<float>(static_cast<const double*>(base)[i]);
    case DType::kI8: return static_cast<const int8_t*>(base)[i];
    case DType::kI4: case DType::kI32: case DType::kI64: case DType::kU8: case DType::kBool:
      break;
  }
  check_failed(__FILE__, __LINE__, "load", std::string("unsupported dtype ") + dtype_name(t));
}

void store(DType t, void* base, int64_t i, float v) {
  switch (t) {
    case DType::kF32: static_cast<float*>(base)[i] = v; return;
    case DType::kBF16: static_cast<uint16_t*>(base)[i] = f32_to_bf16(v); return;
    case DType::kF16: static_cast<uint16_t*>(base)[i] = f32_to_f16(v); return;
    case DType::kF8E4M3: static_cast<uint8_t*>(base)[i] = f32_to_f8e4m3(v); return;
    case DType::kF64: static_cast<double*>(base)[i] = v; return;
    case DType::kI8: {  // round half to even, saturating; NaN stores 0
      const float q = std::isnan(v) ? 0.0f : std::nearbyint(std::clamp(v, -128.0f, 127.0f));
      static_cast<int8_t*>(base)[i] = static_cast<int8_t>(q);
      return;
    }
    case DType::kI4: case DType::kI32: case DType::kI64: case DType::kU8:
    case DType::kBool:
      break;
  }
  check_failed(__FILE__, __LINE__, "store", std::string("unsupported dtype ") + dtype_name(t));
}

void embedding(const EmbeddingParams& p) {
  const int64_t full = p.full_vocab > 0 ? p.full_vocab : p.vocab;
  for (int64_t t = 0; t < p.n_tokens; ++t) {
    const int64_t id = p.ids[t];
    FRUGAL_CHECK(id >= 0 && id < full);
    const int64_t row = id - p.vocab_begin;
    const bool here = row >= 0 && row < p.vocab;
    for (int64_t j = 0; j < p.dim; ++j)
      store(p.out_dtype, p.out, t * p.dim + j, here ? load(p.table_dtype, p.table, row * p.dim + j) : 0.0f);
  }
}

void rms_norm(const RmsNormParams& p) {
  std::vector<double> row(static_cast<size_t>(p.dim));
  for (int64_t r = 0; r < p.rows; ++r) {
    double ss = 0;
    for (int64_t j = 0; j < p.dim; ++j) {
      double v = load(p.act_dtype, p.x, r * p.ld_x + j);
      if (p.residual) {
        v += load(p.act_dtype, p.residual, r * p.ld_res + j);
        // The residual stream is stored in act_dtype; normalize what was stored.
        store(p.act_dtype, p.residual, r * p.ld_res + j, static_cast<float>(v));
        v = load(p.act_dtype, p.residual, r * p.ld_res + j);
      }
      row[static_cast<size_t>(j)] = v;
      ss += v * v;
    }
    double inv = 1.0 / std::sqrt(ss / static_cast<double>(p.dim) + p.eps);
    for (int64_t j = 0; j < p.dim; ++j) {
      double w = load(p.weight_dtype, p.weight, j);
      store(p.act_dtype, p.y, r * p.ld_y + j, static_cast<float>(row[static_cast<size_t>(j)] * inv * w));
    }
  }
}

// W[o, j'] as a float, decoded from its stored format (the oracle for every format's kernels).
// j' is the internal column (ops/weight_format.h); it multiplies x[k_perm[j']] under act order.
// One function per scheme, chosen once per call.
static float dense_w(const WeightView& w, const QuantGeometry&, int64_t k, int64_t o, int64_t j) {
  return load(w.format.dtype, w.data, o * k + j);
}
static float quant_w(const WeightView& w, const QuantGeometry& g, int64_t, int64_t o, int64_t j) {
  return quant_weight_element(w, g, o, j);
}

using WeightElement = float (*)(const WeightView& w, const QuantGeometry& g, int64_t k, int64_t o, int64_t j);

static WeightElement weight_element(const WeightFormat& f) {
  const Status st = check_weight_format(f, "ref matmul");
  FRUGAL_CHECK_MSG(st.is_ok(), st.to_string());
  switch (f.scheme) {
    case WeightScheme::kDense: return dense_w;
    case WeightScheme::kInt8: case WeightScheme::kInt4: case WeightScheme::kNf4: case WeightScheme::kFp8:
      return quant_w;
  }
  check_failed(__FILE__, __LINE__, "weight_element", weight_format_name(f));
}

void matmul(const MatmulParams& p) {
  const WeightElement w_at = weight_element(p.w.format);
  const QuantGeometry g = quant_geometry(p.w.format, p.n, p.k);
  const int32_t* perm = p.w.format.act_order ? p.w.k_perm : nullptr;
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t o = 0; o < p.n; ++o) {
      double acc = 0;
      for (int64_t j = 0; j < p.k; ++j)
        acc += static_cast<double>(load(p.x_dtype, p.x, i * p.ld_x + (perm ? perm[j] : j))) * w_at(p.w, g, p.k, o, j);
      if (p.bias) acc += load(p.bias_dtype, p.bias, o);
      if (p.accumulate) acc += load(p.y_dtype, p.y, i * p.ld_y + o);
      store(p.y_dtype, p.y, i * p.ld_y + o, static_cast<float>(acc));
    }
  }
}

static void rope_rows(void* base, DType t, int64_t n_tokens, int64_t ld, int n_heads, const RopeParams& p) {
  const int half = p.rotary_dim / 2;
  for (int64_t tok = 0; tok < n_tokens; ++tok) {
    double pos = p.positions[tok];
    for (int h = 0; h < n_heads; ++h) {
      int64_t off = tok * ld + static_cast<int64_t>(h) * p.head_dim;
      for (int i = 0; i < half; ++i) {
        double angle = pos * static_cast<double>(p.inv_freq[i]);
        double c = std::cos(angle) * p.attention_factor, s = std::sin(angle) * p.attention_factor;
        const int64_t i0 = p.interleaved ? off + 2 * i : off + i, i1 = p.interleaved ? i0 + 1 : i0 + half;
        double x0 = load(t, base, i0), x1 = load(t, base, i1);
        store(t, base, i0, static_cast<float>(x0 * c - x1 * s));
        store(t, base, i1, static_cast<float>(x1 * c + x0 * s));
      }
    }
  }
}

void rope(const RopeParams& p) {
  if (p.q) rope_rows(p.q, p.act_dtype, p.n_tokens, p.ld_q, p.n_head, p);
  if (p.k) rope_rows(p.k, p.act_dtype, p.n_tokens, p.ld_k, p.n_head_kv, p);
}

namespace {

// One kv head's row of the new token t (k or v) into its cache slot, quantized per ops/kv_quant.h.
void write_kv_row(const KvCacheLayer& c, DType act, const void* src, int64_t src_off, void* cache, float* scales,
                  float layer_scale, int64_t slot, int h) {
  const int64_t row = static_cast<int64_t>(c.n_head_kv) * c.head_dim;
  const int64_t dst = slot * row + static_cast<int64_t>(h) * c.head_dim;
  if (c.cache_dtype == DType::kI8) {
    float amax = 0;
    for (int e = 0; e < c.head_dim; ++e) amax = std::max(amax, std::fabs(load(act, src, src_off + e)));
    const float scale = kv_int8_scale(amax);
    scales[slot * c.n_head_kv + h] = scale;
    for (int e = 0; e < c.head_dim; ++e)
      static_cast<int8_t*>(cache)[dst + e] = kv_int8_quantize(load(act, src, src_off + e), scale);
    return;
  }
  if (c.cache_dtype == DType::kF8E4M3) {
    for (int e = 0; e < c.head_dim; ++e)
      static_cast<uint8_t*>(cache)[dst + e] = kv_f32_to_e4m3(load(act, src, src_off + e) / layer_scale);
    return;
  }
  for (int e = 0; e < c.head_dim; ++e) store(c.cache_dtype, cache, dst + e, load(act, src, src_off + e));
}

}  // namespace

float kv_load(const KvCacheLayer& c, bool value, int64_t slot, int h, int e) {
  const void* cache = value ? c.v_cache : c.k_cache;
  const int64_t i = (slot * c.n_head_kv + h) * c.head_dim + e;
  switch (c.cache_dtype) {
    case DType::kI8: return static_cast<const int8_t*>(cache)[i] * (value ? c.v_scales : c.k_scales)[slot * c.n_head_kv + h];
    case DType::kF8E4M3: return kv_e4m3_to_f32(static_cast<const uint8_t*>(cache)[i]) * (value ? c.v_scale : c.k_scale);
    default: return load(c.cache_dtype, cache, i);
  }
}

void kv_write(const KvWriteParams& p) {
  const auto& c = p.cache;
  for (int64_t t = 0; t < p.n_tokens; ++t) {
    int32_t slot = p.slot_mapping[t];
    if (slot < 0) continue;
    FRUGAL_CHECK(slot < c.n_blocks * c.block_size);
    for (int h = 0; h < c.n_head_kv; ++h) {
      write_kv_row(c, p.act_dtype, p.k, t * p.ld_k + static_cast<int64_t>(h) * c.head_dim, c.k_cache, c.k_scales,
                   c.k_scale, slot, h);
      write_kv_row(c, p.act_dtype, p.v, t * p.ld_v + static_cast<int64_t>(h) * c.head_dim, c.v_cache, c.v_scales,
                   c.v_scale, slot, h);
    }
  }
}

void rope_kv_write(const RopeKvWriteParams& p) {
  rope(p.rope);
  kv_write(p.kv);
}

void matmul_silu_mul(const MatmulSiluMulParams& p) {
  matmul(p.mm);
  silu_mul(p.act);
}

void silu_mul_matmul(const SiluMulMatmulParams& p) {
  silu_mul(p.act);
  matmul(p.mm);
}

void mla_kv_prologue(const MlaKvPrologueParams& p) {
  rms_norm(p.norm);
  rope(p.rope);
  kv_write(p.kv);
}

void attention_batched_matmul(const AttentionBatchedMatmulParams& p) {
  attention(p.attn);
  batched_matmul(p.mm);
}

void mla_attention(const MlaAttentionParams& p) {
  rms_norm_matmul(p.qkv);
  mla_kv_prologue(p.prologue);
  batched_matmul(p.absorb);
  attention_batched_matmul(p.attn);
  matmul(p.o);
}

void moe_router(const MoeRouterParams& p) {
  rms_norm(p.norm);
  matmul(p.mm);
  moe_route(p.route);
}

void moe_block(const MoeBlockParams& p) {
  moe_router(p.router);
  moe_experts(p.experts);
}

void rms_norm_matmul(const RmsNormMatmulParams& p) {
  rms_norm(p.norm);
  matmul(p.mm);
}

void matmul_rope_kv_write(const MatmulRopeKvWriteParams& p) {
  matmul(p.mm);
  rope_kv_write(p.rkv);
}

void matmul_rms_norm(const MatmulRmsNormParams& p) {
  matmul(p.mm);
  rms_norm(p.norm);
}

void attention(const AttentionParams& p) {
  const auto& c = p.cache;
  const int group = p.n_head / c.n_head_kv;
  std::vector<double> scores, acc(static_cast<size_t>(c.head_dim));
  for (int s = 0; s < p.n_seqs; ++s) {
    const int q0 = p.q_start[s], n_q = p.q_start[s + 1] - p.q_start[s];
    const int ctx = p.ctx_len[s];
    const int32_t* table = p.block_tables + static_cast<int64_t>(s) * p.max_blocks_per_seq;
    for (int i = 0; i < n_q; ++i) {
      const int pos = ctx - n_q + i;
      const int lo = p.sliding_window > 0 ? std::max(0, pos - p.sliding_window + 1) : 0;
      const int64_t t = q0 + i;
      for (int h = 0; h < p.n_head; ++h) {
        const int kvh = h / group;
        scores.assign(static_cast<size_t>(pos + 1), 0.0);
        double mx = -INFINITY;
        const int sinks = p.sliding_window > 0 ? std::min(p.sink_tokens, lo) : 0;
        auto visible = [&](int j) { return j >= lo || j < sinks; };
        for (int j = 0; j <= pos; ++j) {
          if (!visible(j)) continue;
          int64_t slot = static_cast<int64_t>(table[j / c.block_size]) * c.block_size + j % c.block_size;
          double d = 0;
          for (int e = 0; e < c.head_dim; ++e)
            d += static_cast<double>(load(p.act_dtype, p.q, t * p.ld_q + h * c.head_dim + e)) *
                 kv_load(c, false, slot, kvh, e);
          scores[static_cast<size_t>(j)] = d * p.scale;
          mx = std::max(mx, scores[static_cast<size_t>(j)]);
        }
        double sum = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int j = 0; j <= pos; ++j) {
          if (!visible(j)) continue;
          double w = std::exp(scores[static_cast<size_t>(j)] - mx);
          sum += w;
          int64_t slot = static_cast<int64_t>(table[j / c.block_size]) * c.block_size + j % c.block_size;
          for (int e = 0; e < c.head_dim; ++e) acc[static_cast<size_t>(e)] += w * kv_load(c, true, slot, kvh, e);
        }
        for (int e = 0; e < c.head_dim; ++e)
          store(p.act_dtype, p.out, t * p.ld_out + h * c.head_dim + e, static_cast<float>(acc[static_cast<size_t>(e)] / sum));
      }
    }
  }
}

void silu_mul(const SiluMulParams& p) {
  for (int64_t t = 0; t < p.n_tokens; ++t) {
    for (int64_t j = 0; j < p.dim; ++j) {
      double g = load(p.act_dtype, p.gate, t * p.ld_gate + j);
      double u = load(p.act_dtype, p.up, t * p.ld_up + j);
      store(p.act_dtype, p.out, t * p.ld_out + j, static_cast<float>(g / (1.0 + std::exp(-g)) * u));
    }
  }
}

void gather_rows(const GatherRowsParams& p) {
  for (int64_t i = 0; i < p.n_rows; ++i)
    for (int64_t j = 0; j < p.dim; ++j)
      store(p.out_dtype, p.out, i * p.ld_out + j, load(p.x_dtype, p.x, static_cast<int64_t>(p.rows[i]) * p.ld_x + j));
}

float sample_uniform(uint64_t seed, uint64_t id) {
  uint64_t z = seed ^ (id * 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (static_cast<float>(z >> 40) + 0.5f) * (1.f / 16777216.f);
}

// Exact thresholds (sorting), where the CUDA kernel bisects on the value: the same kept set
// up to ties within float resolution of the boundary.
void sample(const SampleParams& p) {
  std::vector<float> z(static_cast<size_t>(p.vocab));
  for (int32_t r = 0; r < p.n_rows; ++r) {
    const float temp = p.temperature[r];
    const bool greedy = !(temp > 0.f);
    const float inv_t = greedy ? 1.f : 1.f / temp;
    for (int32_t i = 0; i < p.vocab; ++i) z[static_cast<size_t>(i)] = load(p.logits_dtype, p.logits, r * p.ld_logits + i) * inv_t;
    int32_t best_i = -1;
    float best = -INFINITY;
    auto consider = [&](float v, int32_t i) {
      if (best_i < 0 || v > best) {  // NaN never wins; lowest id on ties
        if (!(v != v)) {
          best = v;
          best_i = i;
        }
      }
    };
    if (greedy) {
      for (int32_t i = 0; i < p.vocab; ++i) consider(z[static_cast<size_t>(i)], i);
      p.out_ids[r] = best_i < 0 ? 0 : best_i;
      continue;
    }
    float thr = -INFINITY;
    std::vector<float> sorted;
    for (float v : z)
      if (!(v != v)) sorted.push_back(v);
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    const int32_t k = p.top_k ? p.top_k[r] : 0;
    if (k > 0 && k < p.vocab && k <= static_cast<int32_t>(sorted.size())) thr = sorted[static_cast<size_t>(k - 1)];
    const float top_p = p.top_p ? p.top_p[r] : 1.f;
    if (top_p > 0.f && top_p < 1.f && !sorted.empty()) {
      const double zmax = sorted[0];
      double total = 0;
      for (float v : sorted)
        if (v >= thr) total += std::exp(static_cast<double>(v) - zmax);
      double mass = 0;
      for (float v : sorted) {
        if (v < thr) break;
        mass += std::exp(static_cast<double>(v) - zmax);
        if (mass >= top_p * total) {
          thr = v;
          break;
        }
      }
    }
    for (int32_t i = 0; i < p.vocab; ++i) {
      const float v = z[static_cast<size_t>(i)];
      if (!(v >= thr)) continue;
      consider(v - std::log(-std::log(sample_uniform(p.seeds[r], static_cast<uint64_t>(i)))), i);
    }
    p.out_ids[r] = best_i < 0 ? 0 : best_i;
  }
}

}  // namespace frugal::ops::ref

namespace frugal::ops::ref {

// Indices of the k largest of v[0, n) in descending order, the lower index first on ties.
static void top_k_desc(const double* v, int32_t n, int32_t k, int32_t* out) {
  bool taken[kMoeMaxExperts] = {};
  for (int32_t j = 0; j < k; ++j) {
    int32_t best = -1;
    for (int32_t e = 0; e < n; ++e)
      if (!taken[e] && (best < 0 || v[e] > v[best])) best = e;
    taken[best] = true;
    out[j] = best;
  }
}

void moe_route(const MoeRouteParams& p) {
  const int32_t E = p.n_experts, K = p.top_k;
  FRUGAL_CHECK(E > 0 && E <= kMoeMaxExperts && K > 0 && K <= E && K <= kMoeMaxTopK);
  FRUGAL_CHECK(p.n_group > 0 && E % p.n_group == 0 && p.topk_group > 0 && p.topk_group <= p.n_group);
  double score[kMoeMaxExperts], choice[kMoeMaxExperts], group[kMoeMaxExperts];
  int32_t idx[kMoeMaxExperts];
  for (int64_t t = 0; t < p.n_tokens; ++t) {
    const float* l = p.logits + t * p.ld_logits;
    if (p.scoring == MoeScoring::kSoftmax) {
      double mx = l[0], sum = 0;
      for (int32_t e = 1; e < E; ++e) mx = std::max(mx, static_cast<double>(l[e]));
      for (int32_t e = 0; e < E; ++e) sum += score[e] = std::exp(static_cast<double>(l[e]) - mx);
      for (int32_t e = 0; e < E; ++e) score[e] /= sum;
    } else {
      for (int32_t e = 0; e < E; ++e) score[e] = 1.0 / (1.0 + std::exp(-static_cast<double>(l[e])));
    }
    for (int32_t e = 0; e < E; ++e) choice[e] = score[e] + (p.bias ? load(p.bias_dtype, p.bias, e) : 0.0);
    if (p.method != MoeTopk::kGreedy) {
      const int32_t G = p.n_group, per = E / G;
      for (int32_t g = 0; g < G; ++g) {
        const double* c = choice + g * per;
        if (p.method == MoeTopk::kGroupLimitedGreedy) {
          group[g] = *std::max_element(c, c + per);
        } else {
          int32_t top2[2] = {0, 0};
          top_k_desc(c, per, std::min(2, per), top2);
          group[g] = c[top2[0]] + (per > 1 ? c[top2[1]] : 0.0);
        }
      }
      int32_t keep[kMoeMaxExperts];
      top_k_desc(group, G, p.topk_group, keep);
      bool kept[kMoeMaxExperts] = {};
      for (int32_t j = 0; j < p.topk_group; ++j) kept[keep[j]] = true;
      for (int32_t e = 0; e < E; ++e)
        if (!kept[e / per]) choice[e] = 0.0;
    }
    top_k_desc(choice, E, K, idx);
    double w[kMoeMaxTopK], sum = 0;
    for (int32_t j = 0; j < K; ++j) sum += w[j] = p.method == MoeTopk::kNoauxTc ? score[idx[j]] : choice[idx[j]];
    if (p.dense_weight)
      for (int32_t e = 0; e < E; ++e) p.dense_weight[t * E + e] = 0.0f;
    for (int32_t j = 0; j < K; ++j) {
      if (p.norm_topk_prob) w[j] /= sum + 1e-20;
      const float wf = static_cast<float>(w[j] * p.routed_scaling_factor);
      p.topk_idx[t * K + j] = idx[j];
      p.topk_weight[t * K + j] = wf;
      if (p.dense_weight) p.dense_weight[t * E + idx[j]] = wf;
    }
  }
}

void scale_rows(const ScaleRowsParams& p) {
  for (int64_t t = 0; t < p.rows; ++t) {
    const double s = p.scale[t * p.ld_scale];
    for (int64_t j = 0; j < p.dim; ++j)
      store(p.act_dtype, p.x, t * p.ld_x + j, static_cast<float>(load(p.act_dtype, p.x, t * p.ld_x + j) * s));
  }
}

void batched_matmul(const BatchedMatmulParams& p) {
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t o = 0; o < p.n; ++o) {
        double acc = 0;
        for (int64_t j = 0; j < p.k; ++j)
          acc += static_cast<double>(load(p.x_dtype, p.x, b * p.stride_x + i * p.ld_x + j)) *
                 load(p.w_dtype, p.w, b * p.stride_w + o * p.k + j);
        store(p.y_dtype, p.y, b * p.stride_y + i * p.ld_y + o, static_cast<float>(acc));
      }
}

// Each token's top_k experts in k order (those this call holds), then the shared experts;
// double accumulation, no rounding of the gate and up dot products, h and hs rounded to the
// activation dtype, out rounded once (ops/params.h).
void moe_experts(const MoeExpertsParams& p) {
  std::vector<float> xr(static_cast<size_t>(p.hidden)), h(static_cast<size_t>(std::max(p.inter, p.shared_inter)));
  std::vector<double> acc(static_cast<size_t>(p.hidden));
  std::vector<uint8_t> round_buf(8);
  auto round_act = [&](double v) {
    store(p.act_dtype, round_buf.data(), 0, static_cast<float>(v));
    return load(p.act_dtype, round_buf.data(), 0);
  };
  auto x_at = [](const WeightView& w, int64_t j) { return w.format.act_order ? w.k_perm[j] : j; };
  // acc += wk * (act(silu(x . gate) * (x . up)) . down) for one gated MLP of `inter` channels
  // (each matrix in its own format: the shared experts' need not be the routed experts').
  auto mlp = [&](const WeightView& wg, const WeightView& wu, const WeightView& wd, int64_t inter, double wk) {
    const WeightElement eg = weight_element(wg.format), eu = weight_element(wu.format), ed = weight_element(wd.format);
    const QuantGeometry qg = quant_geometry(wg.format, inter, p.hidden), qu = quant_geometry(wu.format, inter, p.hidden),
                        qd = quant_geometry(wd.format, p.hidden, inter);
    for (int64_t o = 0; o < inter; ++o) {
      double gs = 0, us = 0;
      for (int64_t j = 0; j < p.hidden; ++j) {
        gs += static_cast<double>(xr[static_cast<size_t>(x_at(wg, j))]) * eg(wg, qg, p.hidden, o, j);
        us += static_cast<double>(xr[static_cast<size_t>(x_at(wu, j))]) * eu(wu, qu, p.hidden, o, j);
      }
      h[static_cast<size_t>(o)] = round_act(gs / (1.0 + std::exp(-gs)) * us);
    }
    for (int64_t i = 0; i < p.hidden; ++i) {
      double y = 0;
      for (int64_t j = 0; j < inter; ++j) y += static_cast<double>(h[static_cast<size_t>(x_at(wd, j))]) * ed(wd, qd, inter, i, j);
      acc[static_cast<size_t>(i)] += wk * y;
    }
  };
  for (int64_t t = 0; t < p.n_tokens; ++t) {
    for (int64_t j = 0; j < p.hidden; ++j) xr[static_cast<size_t>(j)] = load(p.act_dtype, p.x, t * p.ld_x + j);
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int32_t k = 0; k < p.top_k; ++k) {
      const int32_t g = p.topk_idx[t * p.top_k + k];
      FRUGAL_CHECK(g >= 0 && g < p.routed());
      const int32_t e = g - p.first_expert;
      if (e < 0 || e >= p.n_experts) continue;  // another rank's expert
      mlp(p.gate[e], p.up[e], p.down[e], p.inter, p.topk_weight[t * p.top_k + k]);
    }
    if (p.has_shared()) mlp(p.shared_gate, p.shared_up, p.shared_down, p.shared_inter, 1.0);
    for (int64_t i = 0; i < p.hidden; ++i)
      store(p.act_dtype, p.out, t * p.ld_out + i, static_cast<float>(load(p.act_dtype, p.out, t * p.ld_out + i) + acc[static_cast<size_t>(i)]));
  }
}

}  // namespace frugal::ops::ref
