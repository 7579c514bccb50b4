// The generic body of every CPU kernel, written once against a vector-traits type `Vec`
// (simd_avx512.h, simd_avx2.h, simd_scalar.h). Included by exactly one kernels_<isa>.cpp each,
// after it defines FRUGAL_CPU_ISA (the namespace) and includes its simd header; everything here
// lives in that namespace so copies built with different -m flags never merge at link time.
// Parameters were validated by cpu_backend.cpp; kernels only compute.
// Accumulation is fp32 throughout (activations are never rounded below f32).

#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/cpu/kernels.h"
#include "ops/kv_quant.h"

namespace frugal::cpu::FRUGAL_CPU_ISA {

using F = Vec::F;
constexpr int kW = Vec::kWidth;

inline float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return bits_to_float(sign);
    int e = -1;  // subnormal: normalize
    do { ++e; mant <<= 1; } while ((mant & 0x400u) == 0);
    return bits_to_float(sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13);
  }
  if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | mant << 13);
  return bits_to_float(sign | (exp + 127 - 15) << 23 | mant << 13);
}

// Element loaders by storage type: a whole vector (converted in registers) or one value.
struct LoadF32 {
  using T = float;
  static F vec(const float* p) { return Vec::load(p); }
  static float one(const float* p) { return *p; }
};
struct LoadBF16 {
  using T = uint16_t;
  static F vec(const uint16_t* p) { return Vec::load_bf16(p); }
  static float one(const uint16_t* p) { return bits_to_float(static_cast<uint32_t>(*p) << 16); }
};
struct LoadF16 {
  using T = uint16_t;
  static F vec(const uint16_t* p) { return Vec::load_f16(p); }
  static float one(const uint16_t* p) { return half_to_float(*p); }
};

// exp for a vector: Cephes-style range reduction x = n ln2 + r, degree-6 polynomial on r.
// Relative error ~2 ulp over the clamped range; exp(x < -87) returns ~1e-38 (not 0), which is
// harmless for softmax weights and silu.
inline F vexp(F x) {
  x = Vec::min(Vec::max(x, Vec::set1(-87.0f)), Vec::set1(88.3f));
  const F n = Vec::round(Vec::mul(x, Vec::set1(1.44269504088896341f)));
  F r = Vec::fnma(n, Vec::set1(0.693359375f), x);
  r = Vec::fnma(n, Vec::set1(-2.12194440e-4f), r);
  F y = Vec::set1(1.9875691500e-4f);
  y = Vec::fma(y, r, Vec::set1(1.3981999507e-3f));
  y = Vec::fma(y, r, Vec::set1(8.3334519073e-3f));
  y = Vec::fma(y, r, Vec::set1(4.1665795894e-2f));
  y = Vec::fma(y, r, Vec::set1(1.6666665459e-1f));
  y = Vec::fma(y, r, Vec::set1(5.0000001201e-1f));
  y = Vec::fma(y, Vec::mul(r, r), Vec::add(r, Vec::set1(1.0f)));
  return Vec::mul(y, Vec::pow2i(n));
}

// Loads n (< kW) floats zero-padded; stores the first n lanes. Tails of every vector loop.
inline F load_tail(const float* p, int64_t n) {
  float tmp[kW] = {};
  for (int64_t i = 0; i < n; ++i) tmp[i] = p[i];
  return Vec::load(tmp);
}
inline void store_tail(float* p, F v, int64_t n) {
  float tmp[kW];
  Vec::store(tmp, v);
  for (int64_t i = 0; i < n; ++i) p[i] = tmp[i];
}
// The float storage dtypes kernels convert in registers; validate.cpp refuses the rest before any
// kernel runs, so the other cases of the switches below are unreachable.
#define FRUGAL_CPU_NON_FLOAT_DTYPES                                                                 \
  case DType::kF8E4M3: case DType::kI8: case DType::kI4: case DType::kI32: case DType::kI64: \
  case DType::kU8: case DType::kBool: case DType::kF64

inline float one_f32(DType t, const void* base, int64_t i) {
  switch (t) {
    case DType::kBF16: return LoadBF16::one(static_cast<const uint16_t*>(base) + i);
    case DType::kF16: return LoadF16::one(static_cast<const uint16_t*>(base) + i);
    case DType::kF32: return static_cast<const float*>(base)[i];
    FRUGAL_CPU_NON_FLOAT_DTYPES: break;
  }
  unreachable_dtype("one_f32", t);
}

// ---------------------------------------------------------------- conversions

template <class L>
void to_f32_typed(const typename L::T* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + kW <= n; i += kW) Vec::store(dst + i, L::vec(src + i));
  for (; i < n; ++i) dst[i] = L::one(src + i);
}

void to_f32(DType t, const void* src, float* dst, int64_t n) {
  switch (t) {
    case DType::kBF16: return to_f32_typed<LoadBF16>(static_cast<const uint16_t*>(src), dst, n);
    case DType::kF16: return to_f32_typed<LoadF16>(static_cast<const uint16_t*>(src), dst, n);
    case DType::kF32: return to_f32_typed<LoadF32>(static_cast<const float*>(src), dst, n);
    FRUGAL_CPU_NON_FLOAT_DTYPES: break;
  }
  unreachable_dtype("to_f32", t);
}

// ---------------------------------------------------------------- rms_norm

template <class L>
void rms_norm_typed(const ops::RmsNormParams& p, const typename L::T* w, int64_t r0, int64_t r1) {
  const int64_t d = p.dim;
  for (int64_t r = r0; r < r1; ++r) {
    const float* x = static_cast<const float*>(p.x) + r * p.ld_x;
    // With a residual, normalize the stored sum (x + residual), as the reference does.
    const float* src = x;
    if (p.residual) {
      float* res = static_cast<float*>(p.residual) + r * p.ld_res;
      int64_t j = 0;
      for (; j + kW <= d; j += kW) Vec::store(res + j, Vec::add(Vec::load(x + j), Vec::load(res + j)));
      for (; j < d; ++j) res[j] = x[j] + res[j];
      src = res;
    }
    F ss = Vec::zero();
    int64_t j = 0;
    for (; j + kW <= d; j += kW) ss = Vec::fma(Vec::load(src + j), Vec::load(src + j), ss);
    float sum = Vec::reduce_add(ss);
    for (; j < d; ++j) sum += src[j] * src[j];
    const F inv = Vec::set1(1.0f / std::sqrt(sum / static_cast<float>(d) + p.eps));
    float* y = static_cast<float*>(p.y) + r * p.ld_y;
    j = 0;
    for (; j + kW <= d; j += kW) Vec::store(y + j, Vec::mul(Vec::mul(Vec::load(src + j), inv), L::vec(w + j)));
    const float inv_s = 1.0f / std::sqrt(sum / static_cast<float>(d) + p.eps);
    for (; j < d; ++j) y[j] = src[j] * inv_s * L::one(w + j);
  }
}

void rms_norm(const ops::RmsNormParams& p, int64_t r0, int64_t r1) {
  switch (p.weight_dtype) {
    case DType::kBF16: return rms_norm_typed<LoadBF16>(p, static_cast<const uint16_t*>(p.weight), r0, r1);
    case DType::kF16: return rms_norm_typed<LoadF16>(p, static_cast<const uint16_t*>(p.weight), r0, r1);
    case DType::kF32: return rms_norm_typed<LoadF32>(p, static_cast<const float*>(p.weight), r0, r1);
    FRUGAL_CPU_NON_FLOAT_DTYPES: break;
  }
  unreachable_dtype("rms_norm", p.weight_dtype);
}

// ---------------------------------------------------------------- silu_mul

inline F silu_mul_vec(F g, F u) {
  const F e = vexp(Vec::sub(Vec::zero(), g));
  return Vec::mul(Vec::div(g, Vec::add(Vec::set1(1.0f), e)), u);
}

void silu_mul(const ops::SiluMulParams& p, int64_t t0, int64_t t1) {
  for (int64_t t = t0; t < t1; ++t) {
    const float* g = static_cast<const float*>(p.gate) + t * p.ld_gate;
    const float* u = static_cast<const float*>(p.up) + t * p.ld_up;
    float* o = static_cast<float*>(p.out) + t * p.ld_out;
    int64_t j = 0;
    for (; j + kW <= p.dim; j += kW) Vec::store(o + j, silu_mul_vec(Vec::load(g + j), Vec::load(u + j)));
    if (j < p.dim) {
      const int64_t n = p.dim - j;
      store_tail(o + j, silu_mul_vec(load_tail(g + j, n), load_tail(u + j, n)), n);
    }
  }
}

// ---------------------------------------------------------------- rope

// Interleaved pairs (2i, 2i + 1): DeepSeek's small rope part, scalar.
inline void rope_heads_interleaved(float* base, int64_t ld, int n_heads, int64_t t, int head_dim, int half,
                                   const float* cs, const float* sn) {
  for (int h = 0; h < n_heads; ++h) {
    float* v = base + t * ld + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const float x0 = v[2 * i], x1 = v[2 * i + 1];
      v[2 * i] = x0 * cs[i] - x1 * sn[i];
      v[2 * i + 1] = x1 * cs[i] + x0 * sn[i];
    }
  }
}

inline void rope_heads(float* base, int64_t ld, int n_heads, int64_t t, int head_dim, int half,
                       const float* cs, const float* sn) {
  for (int h = 0; h < n_heads; ++h) {
    float* v = base + t * ld + static_cast<int64_t>(h) * head_dim;
    int i = 0;
    for (; i + kW <= half; i += kW) {
      const F x0 = Vec::load(v + i), x1 = Vec::load(v + i + half);
      const F c = Vec::load(cs + i), s = Vec::load(sn + i);
      Vec::store(v + i, Vec::fnma(x1, s, Vec::mul(x0, c)));
      Vec::store(v + i + half, Vec::fma(x0, s, Vec::mul(x1, c)));
    }
    for (; i < half; ++i) {
      const float x0 = v[i], x1 = v[i + half];
      v[i] = x0 * cs[i] - x1 * sn[i];
      v[i + half] = x1 * cs[i] + x0 * sn[i];
    }
  }
}

void rope(const ops::RopeParams& p, int64_t t0, int64_t t1) {
  // Angles in double: at position 1e5, a float product pos * inv_freq is off by ~4e-3 rad.
  const int half = p.rotary_dim / 2;
  float cs[512], sn[512];  // half <= 512 is checked by the dispatcher
  for (int64_t t = t0; t < t1; ++t) {
    const double pos = p.positions[t];
    for (int i = 0; i < half; ++i) {
      const double a = pos * static_cast<double>(p.inv_freq[i]);
      cs[i] = static_cast<float>(std::cos(a) * p.attention_factor);
      sn[i] = static_cast<float>(std::sin(a) * p.attention_factor);
    }
    const auto heads = p.interleaved ? rope_heads_interleaved : rope_heads;
    if (p.q) heads(static_cast<float*>(p.q), p.ld_q, p.n_head, t, p.head_dim, half, cs, sn);
    if (p.k) heads(static_cast<float*>(p.k), p.ld_k, p.n_head_kv, t, p.head_dim, half, cs, sn);
  }
}

// ---------------------------------------------------------------- kv_write

inline void store_row(DType t, void* dst, const float* src, int64_t n) {
  if (t == DType::kF32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  auto* d = static_cast<uint16_t*>(dst);
  int64_t j = 0;
  for (; j + kW <= n; j += kW) Vec::store_bf16(d + j, Vec::load(src + j));
  if (j < n) {
    uint16_t tmp[kW];
    Vec::store_bf16(tmp, load_tail(src + j, n - j));
    for (int64_t i = 0; i < n - j; ++i) d[j + i] = tmp[i];
  }
}

// One kv head's row into a quantized cache (fp8 e4m3 or int8), exactly as ops/kv_quant.h says.
inline void store_quantized_row(const ops::KvCacheLayer& c, void* cache, float* scales, float layer_scale,
                                const float* src, int64_t slot, int h) {
  const int64_t dst = (slot * c.n_head_kv + h) * c.head_dim;
  if (c.cache_dtype == DType::kI8) {
    float amax = 0.0f;
    for (int e = 0; e < c.head_dim; ++e) amax = std::fmax(amax, std::fabs(src[e]));
    const float scale = ops::kv_int8_scale(amax);
    scales[slot * c.n_head_kv + h] = scale;
    auto* q = static_cast<int8_t*>(cache) + dst;
    for (int e = 0; e < c.head_dim; ++e) q[e] = ops::kv_int8_quantize(src[e], scale);
    return;
  }
  auto* q = static_cast<uint8_t*>(cache) + dst;
  for (int e = 0; e < c.head_dim; ++e) q[e] = ops::kv_f32_to_e4m3(src[e] / layer_scale);
}

void kv_write(const ops::KvWriteParams& p, int64_t t0, int64_t t1) {
  const auto& c = p.cache;
  const int64_t row = static_cast<int64_t>(c.n_head_kv) * c.head_dim;
  int64_t esize = 0;
  switch (c.cache_dtype) {
    case DType::kF32: esize = 4; break;
    case DType::kBF16: esize = 2; break;  // store_row writes bf16 for every cache dtype but f32
    case DType::kF8E4M3:
    case DType::kI8: {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t slot = p.slot_mapping[t];
        if (slot < 0) continue;
        const float* k = static_cast<const float*>(p.k) + t * p.ld_k;
        const float* v = static_cast<const float*>(p.v) + t * p.ld_v;
        for (int h = 0; h < c.n_head_kv; ++h) {
          store_quantized_row(c, c.k_cache, c.k_scales, c.k_scale, k + static_cast<int64_t>(h) * c.head_dim, slot, h);
          store_quantized_row(c, c.v_cache, c.v_scales, c.v_scale, v + static_cast<int64_t>(h) * c.head_dim, slot, h);
        }
      }
      return;
    }
    case DType::kF16: case DType::kI4: case DType::kI32: case DType::kI64: case DType::kU8: case DType::kBool:
    case DType::kF64:
      unreachable_dtype("kv_write", c.cache_dtype);
  }
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t slot = p.slot_mapping[t];
    if (slot < 0) continue;
    store_row(c.cache_dtype, static_cast<char*>(c.k_cache) + slot * row * esize,
              static_cast<const float*>(p.k) + t * p.ld_k, row);
    store_row(c.cache_dtype, static_cast<char*>(c.v_cache) + slot * row * esize,
              static_cast<const float*>(p.v) + t * p.ld_v, row);
  }
}

}  // namespace frugal::cpu::FRUGAL_CPU_ISA

#include "backend/cpu/kernels_matmul_impl.h"
#include "backend/cpu/kernels_attention_impl.h"

namespace frugal::cpu::FRUGAL_CPU_ISA {

const KernelTable& table() {
  static const KernelTable t = {
      .isa = FRUGAL_CPU_ISA_NAME,
      .dense_f32 = {.gemv = gemv_typed<LoadF32>, .gemm = kW > 1 ? gemm_typed<LoadF32> : nullptr},
      .dense_bf16 = {.gemv = gemv_typed<LoadBF16>, .gemm = kW > 1 ? gemm_typed<LoadBF16> : nullptr},
      .dense_f16 = {.gemv = gemv_typed<LoadF16>, .gemm = kW > 1 ? gemm_typed<LoadF16> : nullptr},
      .rms_norm = rms_norm,
      .silu_mul = silu_mul,
      .rope = rope,
      .kv_write = kv_write,
      .attention = attention,
      .to_f32 = to_f32,
  };
  return t;
}

}  // namespace frugal::cpu::FRUGAL_CPU_ISA
