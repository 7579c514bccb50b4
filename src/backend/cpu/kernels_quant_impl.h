// The generic body of the quantized-matmul kernels, written once against the vector traits
// `Vec` (simd_*.h); included by exactly one kernels_quant_<isa>.cpp each after it defines
// FRUGAL_CPU_ISA, FRUGAL_CPU_ISA_NAME and FRUGAL_QUANT_ISA_BITS (512, 256 or 0) and includes its
// simd header. Everything lives in frugal::cpu::<isa>::quantk so no copy merges across ISAs.
//
// GEMV: bandwidth bound, like the dense one (kernels_matmul_impl.h). Each 32-code block of a
// weight row is loaded once (16 bytes for 4-bit, 32 for 8-bit), decoded in registers to f32,
// multiplied by its group's scale, and FMA'd into per-token accumulators for up to 4 tokens while
// in L1. Zero points never touch the inner loop: W = s * c + offset, so the offset term is
// sum_g offset[g] * sum(x over group g), from the per-group x sums the dispatcher computed.
// Accumulation is fp32 (weights are exact in f32 after decoding; s * c rounds once).
//
// Decoding per ISA:
//  - 4-bit: a block's 16 bytes hold codes i (low nibble) and i + 16 (high nibble), so one load
//    and two masks give all 32 codes in order; identity codes convert int -> float, other code
//    books (NF4) go through a 16-entry table (AVX-512 permutexvar; AVX2 two permutevar8x32 and
//    a blend on bit 3).
//  - 8-bit int: sign-extend bytes to int32, convert.
//  - FP8 E4M3: exact bit manipulation, no table: normal numbers are (e, m) << 20 with the
//    exponent rebased by 120; subnormals (e = 0) are m * 2^-9; the sign goes back on last.

#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/cpu/kernels_quant.h"
#include "core/dtype.h"

#if FRUGAL_QUANT_ISA_BITS > 0
#include <immintrin.h>
#endif

namespace frugal::cpu::FRUGAL_CPU_ISA::quantk {

using quant::CodeKind;
using quant::QuantWeightView;
using F = Vec::F;
constexpr int kW = Vec::kWidth;
constexpr int kB = static_cast<int>(quant::kBlock);  // codes per block
constexpr int kVpb = kB / kW;                        // vectors per block

// ---------------------------------------------------------------- block decoders

inline void decode_q4_scalar(const uint8_t* p, const float* lut, float* out) {
  for (int i = 0; i < 16; ++i) {
    out[i] = lut[p[i] & 0xf];
    out[i + 16] = lut[p[i] >> 4];
  }
}

template <bool kIdentity>
inline void decode_q4(const uint8_t* p, const float* lut, F* out) {
#if FRUGAL_QUANT_ISA_BITS == 512
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i m = _mm_set1_epi8(0x0f);
  const __m512i lo = _mm512_cvtepu8_epi32(_mm_and_si128(b, m));
  const __m512i hi = _mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(b, 4), m));
  if constexpr (kIdentity) {
    out[0] = _mm512_cvtepi32_ps(lo);
    out[1] = _mm512_cvtepi32_ps(hi);
  } else {
    const __m512 t = _mm512_loadu_ps(lut);
    out[0] = _mm512_permutexvar_ps(lo, t);
    out[1] = _mm512_permutexvar_ps(hi, t);
  }
#elif FRUGAL_QUANT_ISA_BITS == 256
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i m = _mm_set1_epi8(0x0f);
  const __m128i lo = _mm_and_si128(b, m), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m);
  const __m256i c[4] = {_mm256_cvtepu8_epi32(lo), _mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)),
                        _mm256_cvtepu8_epi32(hi), _mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8))};
  if constexpr (kIdentity) {
    for (int v = 0; v < 4; ++v) out[v] = _mm256_cvtepi32_ps(c[v]);
  } else {
    const __m256 t0 = _mm256_loadu_ps(lut), t1 = _mm256_loadu_ps(lut + 8);
    for (int v = 0; v < 4; ++v) {
      const __m256 a = _mm256_permutevar8x32_ps(t0, c[v]), bb = _mm256_permutevar8x32_ps(t1, c[v]);
      out[v] = _mm256_blendv_ps(a, bb, _mm256_castsi256_ps(_mm256_slli_epi32(c[v], 28)));
    }
  }
#else
  float tmp[kB];
  decode_q4_scalar(p, lut, tmp);
  for (int v = 0; v < kVpb; ++v) out[v] = Vec::load(tmp + v * kW);
#endif
}

inline void decode_q8(const uint8_t* p, F* out) {
#if FRUGAL_QUANT_ISA_BITS == 512
  for (int v = 0; v < 2; ++v)
    out[v] = _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * v))));
#elif FRUGAL_QUANT_ISA_BITS == 256
  for (int v = 0; v < 4; ++v)
    out[v] = _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * v))));
#else
  float tmp[kB];
  for (int i = 0; i < kB; ++i) tmp[i] = static_cast<float>(static_cast<int8_t>(p[i]));
  for (int v = 0; v < kVpb; ++v) out[v] = Vec::load(tmp + v * kW);
#endif
}

inline void decode_f8(const uint8_t* p, F* out) {
#if FRUGAL_QUANT_ISA_BITS == 512
  for (int v = 0; v < 2; ++v) {
    const __m512i u = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * v)));
    const __m512i em = _mm512_and_si512(u, _mm512_set1_epi32(0x7f));
    const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(u, _mm512_set1_epi32(0x80)), 24);
    const __m512 norm = _mm512_castsi512_ps(
        _mm512_add_epi32(_mm512_slli_epi32(em, 20), _mm512_set1_epi32(120 << 23)));
    const __m512 sub = _mm512_mul_ps(_mm512_cvtepi32_ps(em), _mm512_set1_ps(1.0f / 512.0f));
    const __mmask16 is_sub = _mm512_cmpeq_epi32_mask(_mm512_and_si512(em, _mm512_set1_epi32(0x78)),
                                                     _mm512_setzero_si512());
    const __m512 mag = _mm512_mask_blend_ps(is_sub, norm, sub);
    out[v] = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(mag), sign));
  }
#elif FRUGAL_QUANT_ISA_BITS == 256
  for (int v = 0; v < 4; ++v) {
    const __m256i u = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * v)));
    const __m256i em = _mm256_and_si256(u, _mm256_set1_epi32(0x7f));
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x80)), 24);
    const __m256 norm = _mm256_castsi256_ps(
        _mm256_add_epi32(_mm256_slli_epi32(em, 20), _mm256_set1_epi32(120 << 23)));
    const __m256 sub = _mm256_mul_ps(_mm256_cvtepi32_ps(em), _mm256_set1_ps(1.0f / 512.0f));
    const __m256 is_sub = _mm256_castsi256_ps(
        _mm256_cmpeq_epi32(_mm256_and_si256(em, _mm256_set1_epi32(0x78)), _mm256_setzero_si256()));
    const __m256 mag = _mm256_blendv_ps(norm, sub, is_sub);
    out[v] = _mm256_castsi256_ps(_mm256_or_si256(_mm256_castps_si256(mag), sign));
  }
#else
  float tmp[kB];
  for (int i = 0; i < kB; ++i) tmp[i] = f8e4m3_to_f32(p[i]);
  for (int v = 0; v < kVpb; ++v) out[v] = Vec::load(tmp + v * kW);
#endif
}

// Decodes block b of internal row r to kVpb vectors of code values (scale not applied).
template <CodeKind K, bool kIdentity>
inline void decode_block(const QuantWeightView& w, int64_t r, int64_t b, F* out) {
  const uint8_t* row = w.q + r * w.ld_q;
  if constexpr (K == CodeKind::kQ4) decode_q4<kIdentity>(row + b * (kB / 2), w.lut, out);
  if constexpr (K == CodeKind::kQ8) decode_q8(row + b * kB, out);
  if constexpr (K == CodeKind::kF8) decode_f8(row + b * kB, out);
}

// Scales of internal row r: one per group (no divisions in the inner loops: blocks are walked
// group by group, blocks_per_group at a time; the last group may be shorter).
inline const float* scale_row(const QuantWeightView& w, int64_t r) {
  return w.scale + (r / w.row_block) * w.n_groups;
}
inline int64_t blocks_per_group(const QuantWeightView& w) {
  return w.group >= w.k ? w.k_pad / kB : w.group / kB;
}

// ---------------------------------------------------------------- GEMV

constexpr int rows_per_step(int m) {
  if (kW == 16) return m <= 2 ? 4 : 2;
  if (kW == 8) return m <= 2 ? 4 : 2;
  return 2;
}

// out[i][r] = dot(x_i, W_{r0 + r}) without offsets, for M tokens and R rows.
template <CodeKind K, bool kIdentity, int M, int R>
inline void gemv_tile(const QuantMatmulArgs& a, const float* x, int64_t r0, float (*out)[R]) {
  const QuantWeightView& w = a.w;
  F acc[M][R];
  for (int i = 0; i < M; ++i)
    for (int r = 0; r < R; ++r) acc[i][r] = Vec::zero();
  const int64_t n_blocks = w.k_pad / kB, bpg = blocks_per_group(w);
  const float* srow[R];
  for (int r = 0; r < R; ++r) srow[r] = scale_row(w, r0 + r);
  for (int64_t g = 0, b0 = 0; b0 < n_blocks; ++g, b0 += bpg) {
    const int64_t b1 = b0 + bpg < n_blocks ? b0 + bpg : n_blocks;
    F s[R];
    for (int r = 0; r < R; ++r) s[r] = Vec::set1(srow[r][g]);
    for (int64_t b = b0; b < b1; ++b) {
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        F wv[kVpb];
        decode_block<K, kIdentity>(w, r0 + r, b, wv);
#pragma GCC unroll 4
        for (int v = 0; v < kVpb; ++v) {
          const F ws = Vec::mul(wv[v], s[r]);
#pragma GCC unroll 4
          for (int i = 0; i < M; ++i)
            acc[i][r] = Vec::fma(Vec::load(x + i * a.ld_x + b * kB + v * kW), ws, acc[i][r]);
        }
      }
    }
  }
  for (int i = 0; i < M; ++i)
    for (int r = 0; r < R; ++r) out[i][r] = Vec::reduce_add(acc[i][r]);
}

template <int M, int R>
inline void gemv_store(const QuantMatmulArgs& a, const float* xsum, float* y, float (*dots)[R],
                       int64_t o0) {
  const QuantWeightView& w = a.w;
  for (int r = 0; r < R; ++r) {
    const int64_t o = o0 + r;
    const float b = a.bias ? a.bias[o] : 0.0f;
    for (int i = 0; i < M; ++i) {
      float v = dots[i][r];
      if (w.offset) {
        const float* off = w.offset + o * w.n_groups;
        const float* xs = xsum + i * w.n_groups;
        for (int64_t g = 0; g < w.n_groups; ++g) v += off[g] * xs[g];
      }
      float* dst = y + i * a.ld_y + o;
      *dst = v + b + (a.accumulate ? *dst : 0.0f);
    }
  }
}

template <CodeKind K, bool kIdentity, int M>
void gemv_rows(const QuantMatmulArgs& a, int64_t i0, int64_t n0, int64_t n1) {
  constexpr int R = rows_per_step(M);
  const float* x = a.x + i0 * a.ld_x;
  const float* xsum = a.xsum ? a.xsum + i0 * a.w.n_groups : nullptr;
  float* y = a.y + i0 * a.ld_y;
  int64_t o = n0;
  for (; o + R <= n1; o += R) {
    float dots[M][R];
    gemv_tile<K, kIdentity, M, R>(a, x, o, dots);
    gemv_store<M, R>(a, xsum, y, dots, o);
  }
  for (; o < n1; ++o) {
    float dots[M][1];
    gemv_tile<K, kIdentity, M, 1>(a, x, o, dots);
    gemv_store<M, 1>(a, xsum, y, dots, o);
  }
}

template <CodeKind K, bool kIdentity>
void gemv_typed(const QuantMatmulArgs& a, int64_t n0, int64_t n1) {
  constexpr int64_t kChunk = 4, kRows = 16;
  for (int64_t o0 = n0; o0 < n1; o0 += kRows) {
    const int64_t o1 = o0 + kRows < n1 ? o0 + kRows : n1;
    for (int64_t i0 = 0; i0 < a.m; i0 += kChunk) {
      switch (a.m - i0 < kChunk ? a.m - i0 : kChunk) {
        case 1: gemv_rows<K, kIdentity, 1>(a, i0, o0, o1); break;
        case 2: gemv_rows<K, kIdentity, 2>(a, i0, o0, o1); break;
        case 3: gemv_rows<K, kIdentity, 3>(a, i0, o0, o1); break;
        default: gemv_rows<K, kIdentity, 4>(a, i0, o0, o1); break;
      }
    }
  }
}

void gemv(const QuantMatmulArgs& a, int64_t n0, int64_t n1) {
  switch (a.w.kind) {
    case CodeKind::kQ4:
      if (a.w.lut_is_identity) return gemv_typed<CodeKind::kQ4, true>(a, n0, n1);
      return gemv_typed<CodeKind::kQ4, false>(a, n0, n1);
    case CodeKind::kQ8: return gemv_typed<CodeKind::kQ8, false>(a, n0, n1);
    case CodeKind::kF8: return gemv_typed<CodeKind::kF8, false>(a, n0, n1);
  }
}

// ---------------------------------------------------------------- dequantize rows (GEMM path)

template <CodeKind K, bool kIdentity>
void dequant_typed(const QuantWeightView& w, int64_t r0, int64_t r1, float* out) {
  const int64_t n_blocks = w.k_pad / kB, bpg = blocks_per_group(w);
  for (int64_t r = r0; r < r1; ++r) {
    float* dst = out + (r - r0) * w.k_pad;
    const float* srow = scale_row(w, r);
    for (int64_t g = 0, b0 = 0; b0 < n_blocks; ++g, b0 += bpg) {
      const int64_t b1 = b0 + bpg < n_blocks ? b0 + bpg : n_blocks;
      const F s = Vec::set1(srow[g]);
      const F off = Vec::set1(w.offset ? w.offset[r * w.n_groups + g] : 0.0f);
      for (int64_t b = b0; b < b1; ++b) {
        F wv[kVpb];
        decode_block<K, kIdentity>(w, r, b, wv);
        for (int v = 0; v < kVpb; ++v) Vec::store(dst + b * kB + v * kW, Vec::fma(wv[v], s, off));
      }
    }
  }
}

void dequant_rows(const QuantWeightView& w, int64_t r0, int64_t r1, float* out) {
  switch (w.kind) {
    case CodeKind::kQ4:
      if (w.lut_is_identity) return dequant_typed<CodeKind::kQ4, true>(w, r0, r1, out);
      return dequant_typed<CodeKind::kQ4, false>(w, r0, r1, out);
    case CodeKind::kQ8: return dequant_typed<CodeKind::kQ8, false>(w, r0, r1, out);
    case CodeKind::kF8: return dequant_typed<CodeKind::kF8, false>(w, r0, r1, out);
  }
}

// ---------------------------------------------------------------- int8-activation GEMV (VNNI)
#if FRUGAL_QUANT_ISA_BITS == 512
#define FRUGAL_VNNI __attribute__((target("avx512vnni")))

// 64 weight codes of blocks (2t, 2t+1) as bytes in x's order. Q8: |w| (u8) and the mask of
// negative w, whose sign moves onto x (vpdpbusd multiplies u8 by s8). Q4: codes are u8 already.
template <CodeKind K>
FRUGAL_VNNI inline __m512i pair_codes(const uint8_t* row, int64_t t, __mmask64* neg) {
  if constexpr (K == CodeKind::kQ8) {
    const __m512i w = _mm512_loadu_si512(row + t * 64);
    *neg = _mm512_movepi8_mask(w);
    return _mm512_abs_epi8(w);
  } else {
    // 32 bytes = blocks 2t, 2t+1; lanes of [lo | hi] are (B0 c0-15, B1 c0-15, B0 c16-31,
    // B1 c16-31); reorder the 128-bit lanes to B0 c0-31, B1 c0-31.
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + t * 32));
    const __m256i m = _mm256_set1_epi8(0x0f);
    const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(b, m)),
                                         _mm256_and_si256(_mm256_srli_epi16(b, 4), m), 1);
    *neg = 0;
    return _mm512_shuffle_i64x2(z, z, 0xd8);
  }
}

// Integer dot of one 32-code block (the odd last one) with token i's int8 x, times scales.
// Not inlined into the VNNI functions: GCC 12 auto-vectorized this loop there with an unsigned
// x signed dot product (vpdpbusd) for signed int8 weights, which read -20 as 236.
template <CodeKind K>
__attribute__((noinline)) float tail_block(const QuantWeightView& w, const QuantMatmulArgs& a, int64_t r, int64_t b, int64_t i) {
  const uint8_t* row = w.q + r * w.ld_q;
  const int8_t* xq = a.xq + i * a.ld_xq + b * kB;
  int32_t sum = 0;
  for (int j = 0; j < kB; ++j) {
    int c;
    if constexpr (K == CodeKind::kQ8) c = static_cast<int8_t>(row[b * kB + j]);
    else c = j < 16 ? (row[b * 16 + j] & 0xf) : (row[b * 16 + j - 16] >> 4);
    sum += c * xq[j];
  }
  // xd16 of the pair holding b: 8 copies of block 2t's scale then 8 of block 2t + 1's.
  const float dx = a.xd16[i * a.ld_xd16 + (b / 2) * 16 + (b % 2) * 8];
  return static_cast<float>(sum) * dx;
}

template <CodeKind K, int M>
FRUGAL_VNNI void gemv_i8_rows(const QuantMatmulArgs& a, int64_t i0, int64_t n0, int64_t n1) {
  const QuantWeightView& w = a.w;
  const int64_t n_blocks = w.k_pad / kB, n_pairs = n_blocks / 2, bpg = blocks_per_group(w);
  for (int64_t r = n0; r < n1; ++r) {
    const uint8_t* row = w.q + r * w.ld_q;
    const float* srow = scale_row(w, r);
    __m512 acc[M];
    for (int i = 0; i < M; ++i) acc[i] = _mm512_setzero_ps();
    int64_t g0 = 0, in_g = 0;  // group of block 2t and its position in the group
    for (int64_t t = 0; t < n_pairs; ++t) {
      const int64_t g1 = in_g + 1 == bpg ? g0 + 1 : g0;
      const __m512 sv = _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(srow[g0]), _mm512_set1_ps(srow[g1]));
      __mmask64 neg;
      const __m512i codes = pair_codes<K>(row, t, &neg);
      for (int i = 0; i < M; ++i) {
        __m512i xv = _mm512_loadu_si512(a.xq + (i0 + i) * a.ld_xq + t * 64);
        if constexpr (K == CodeKind::kQ8) xv = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);
        const __m512 d = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), codes, xv));
        const __m512 dx = _mm512_loadu_ps(a.xd16 + (i0 + i) * a.ld_xd16 + t * 16);
        acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(d, dx), sv, acc[i]);
      }
      // advance two blocks
      for (int step = 0; step < 2; ++step)
        if (++in_g == bpg) in_g = 0, ++g0;
    }
    float dots[M];
    for (int i = 0; i < M; ++i) dots[i] = _mm512_reduce_add_ps(acc[i]);
    if (n_blocks % 2 == 1)
      for (int i = 0; i < M; ++i) dots[i] += srow[g0] * tail_block<K>(w, a, r, n_blocks - 1, i0 + i);
    float out[M][1];
    for (int i = 0; i < M; ++i) out[i][0] = dots[i];
    gemv_store<M, 1>(a, a.xsum ? a.xsum + i0 * w.n_groups : nullptr, a.y + i0 * a.ld_y, out, r);
  }
}

template <CodeKind K>
void gemv_i8_typed(const QuantMatmulArgs& a, int64_t n0, int64_t n1) {
  constexpr int64_t kChunk = 4, kRows = 16;
  for (int64_t o0 = n0; o0 < n1; o0 += kRows) {
    const int64_t o1 = o0 + kRows < n1 ? o0 + kRows : n1;
    for (int64_t i0 = 0; i0 < a.m; i0 += kChunk) {
      switch (a.m - i0 < kChunk ? a.m - i0 : kChunk) {
        case 1: gemv_i8_rows<K, 1>(a, i0, o0, o1); break;
        case 2: gemv_i8_rows<K, 2>(a, i0, o0, o1); break;
        case 3: gemv_i8_rows<K, 3>(a, i0, o0, o1); break;
        default: gemv_i8_rows<K, 4>(a, i0, o0, o1); break;
      }
    }
  }
}

void gemv_i8(const QuantMatmulArgs& a, int64_t n0, int64_t n1) {
  if (a.w.kind == CodeKind::kQ8) return gemv_i8_typed<CodeKind::kQ8>(a, n0, n1);
  return gemv_i8_typed<CodeKind::kQ4>(a, n0, n1);
}

const QuantKernelTable& table_vnni() {
  static const QuantKernelTable t = {.isa = "avx512_vnni", .gemv = gemv, .dequant_rows = dequant_rows,
                                     .gemv_i8 = gemv_i8};
  return t;
}
#endif

const QuantKernelTable& table() {
  static const QuantKernelTable t = {.isa = FRUGAL_CPU_ISA_NAME, .gemv = gemv, .dequant_rows = dequant_rows,
                                     .gemv_i8 = nullptr};
  return t;
}

}  // namespace frugal::cpu::FRUGAL_CPU_ISA::quantk
