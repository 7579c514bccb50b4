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

// 64 int8 weight codes of blocks (2t, 2t+1): |w| (u8) and the mask of negative w, whose sign
// moves onto x (vpdpbusd multiplies u8 by s8).
FRUGAL_VNNI inline __m512i pair_codes_q8(const uint8_t* row, int64_t t, __mmask64* neg) {
  const __m512i w = _mm512_loadu_si512(row + t * 64);
  *neg = _mm512_movepi8_mask(w);
  return _mm512_abs_epi8(w);
}
// Lanes (floats of xd16) holding block 2t + 1's scale within a pair: the upper 8.
constexpr __mmask16 kOddBlockLanes = 0xff00;

// Integer dot of one 32-code block (a last block outside the pairs / quads) with token i's int8
// x, times x's block scale (QuantMatmulArgs::xd). Not inlined into the VNNI functions: GCC 12
// auto-vectorized this loop there with an unsigned x signed dot product (vpdpbusd) for signed
// int8 weights, which read -20 as 236.
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
  return static_cast<float>(sum) * a.xd[i * a.ld_xd + b];
}

// ga[i] += (integer dot of pair t with token i0 + i) * x's block scales, per lane.
template <int M>
FRUGAL_VNNI inline void gemv_q8_pair(const QuantMatmulArgs& a, const uint8_t* row, int64_t i0, int64_t t, __m512* ga) {
  __mmask64 neg;
  const __m512i codes = pair_codes_q8(row, t, &neg);
  for (int i = 0; i < M; ++i) {
    __m512i xv = _mm512_loadu_si512(a.xq + (i0 + i) * a.ld_xq + t * 64);
    xv = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);
    const __m512 d = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), codes, xv));
    ga[i] = _mm512_fmadd_ps(d, _mm512_loadu_ps(a.xd16 + (i0 + i) * a.ld_xd16 + t * 16), ga[i]);
  }
}

// How many rows ahead the int8-activation GEMV prefetches its weight bytes (measured on the
// 2-core EPYC, docs/perf/2026-12-02-cpu-quant-gemm.md: int8 4, int4 8 rows).
template <CodeKind K>
constexpr int64_t prefetch_rows() { return K == CodeKind::kQ8 ? 4 : 8; }
template <int M>
FRUGAL_VNNI void gemv_q8_pairs(const QuantMatmulArgs& a, int64_t i0, int64_t n0, int64_t n1) {
  const QuantWeightView& w = a.w;
  const int64_t n_blocks = w.k_pad / kB, n_pairs = n_blocks / 2, bpg = blocks_per_group(w);
  for (int64_t r = n0; r < n1; ++r) {
    const uint8_t* row = w.q + r * w.ld_q;
    const float* srow = scale_row(w, r);
    __m512 acc[M];
    for (int i = 0; i < M; ++i) acc[i] = _mm512_setzero_ps();
    int64_t g0 = 0, in_g = 0;  // group of block 2t and its position in the group
    if (w.n_groups == 1 || bpg % 2 == 0) {
      // No pair straddles two groups: sum a group's pairs times x's block scales in two
      // alternating accumulators per token (short dependency chains), then one FMA with the
      // group's scale; no per-pair scale blend or multiply.
      const int64_t ppg = w.n_groups == 1 ? n_pairs : bpg / 2;
      for (int64_t g = 0, t0 = 0; t0 < n_pairs; ++g, t0 += ppg) {
        const int64_t t1 = t0 + ppg < n_pairs ? t0 + ppg : n_pairs;
        __m512 ga0[M], ga1[M];
        for (int i = 0; i < M; ++i) ga0[i] = ga1[i] = _mm512_setzero_ps();
        int64_t t = t0;
        for (; t + 1 < t1; t += 2) {
          // Rows stream from DRAM: ask for the same bytes of a row prefetch_rows ahead.
          const char* ahead = reinterpret_cast<const char*>(row + prefetch_rows<CodeKind::kQ8>() * w.ld_q + t * 64);
          _mm_prefetch(ahead, _MM_HINT_T0);
          _mm_prefetch(ahead + 64, _MM_HINT_T0);
          gemv_q8_pair<M>(a, row, i0, t, ga0);
          gemv_q8_pair<M>(a, row, i0, t + 1, ga1);
        }
        if (t < t1) gemv_q8_pair<M>(a, row, i0, t, ga0);
        const __m512 sv = _mm512_set1_ps(srow[g]);
        for (int i = 0; i < M; ++i) acc[i] = _mm512_fmadd_ps(_mm512_add_ps(ga0[i], ga1[i]), sv, acc[i]);
      }
      g0 = (n_blocks - 1) / bpg;  // the group of the odd tail block, if any
    } else
    for (int64_t t = 0; t < n_pairs; ++t) {
      const int64_t g1 = in_g + 1 == bpg ? g0 + 1 : g0;
      const __m512 sv = _mm512_mask_blend_ps(kOddBlockLanes, _mm512_set1_ps(srow[g0]), _mm512_set1_ps(srow[g1]));
      __mmask64 neg;
      const __m512i codes = pair_codes_q8(row, t, &neg);
      for (int i = 0; i < M; ++i) {
        __m512i xv = _mm512_loadu_si512(a.xq + (i0 + i) * a.ld_xq + t * 64);
        xv = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);
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
      for (int i = 0; i < M; ++i) dots[i] += srow[g0] * tail_block<CodeKind::kQ8>(w, a, r, n_blocks - 1, i0 + i);
    float out[M][1];
    for (int i = 0; i < M; ++i) out[i][0] = dots[i];
    gemv_store<M, 1>(a, a.xsum ? a.xsum + i0 * w.n_groups : nullptr, a.y + i0 * a.ld_y, out, r);
  }
}

// 4-bit codes, a quad of blocks (4q .. 4q + 3) at a time: the quad's 64 code bytes hold codes
// 0-15 of each block in their low nibbles and codes 16-31 in their high ones, so one load, one
// AND, one shift and one AND give two 64-byte operands whose 16-byte lanes are the quad's four
// blocks. x is stored in the same order (QuantMatmulArgs, kQ4 quad order), so both integer
// dots add into one int32 vector whose lanes 4h .. 4h + 3 hold block 4q + h: one conversion and
// one scale multiply per 128 codes (the pair kernel above needs two of each plus two unpacks).
// sv: the weight's scale per lane (one group's scale everywhere when a group spans whole quads).
template <int M>
FRUGAL_VNNI inline void q4_quad(const QuantMatmulArgs& a, const uint8_t* row, int64_t i0, int64_t q, __m512* acc, __m512 sv) {
  _mm_prefetch(reinterpret_cast<const char*>(row + prefetch_rows<CodeKind::kQ4>() * a.w.ld_q + q * 64), _MM_HINT_T0);
  const __m512i low = _mm512_set1_epi8(0x0f);
  const __m512i v = _mm512_loadu_si512(row + q * 64);
  const __m512i lo = _mm512_and_si512(v, low), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
  for (int i = 0; i < M; ++i) {
    const int8_t* xq = a.xq + (i0 + i) * a.ld_xq + q * 128;
    __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_loadu_si512(xq));
    s = _mm512_dpbusd_epi32(s, hi, _mm512_loadu_si512(xq + 64));
    const __m512 dx = _mm512_loadu_ps(a.xd16 + (i0 + i) * a.ld_xd16 + q * 16);
    acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dx, sv), acc[i]);
  }
}
template <int M>
FRUGAL_VNNI void gemv_q4_quads(const QuantMatmulArgs& a, int64_t i0, int64_t n0, int64_t n1) {
  const QuantWeightView& w = a.w;
  const int64_t n_blocks = w.k_pad / kB, n_quads = n_blocks / 4, bpg = blocks_per_group(w);
  const bool per_group = w.n_groups == 1 || bpg % 4 == 0;
  const int64_t qpg = w.n_groups == 1 ? n_quads : bpg / 4;  // quads per group (per_group)
  // Lane l of a quad reads the scale of block 4q + l / 4.
  const __m512i lane_block = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  for (int64_t r = n0; r < n1; ++r) {
    const uint8_t* row = w.q + r * w.ld_q;
    const float* srow = scale_row(w, r);
    __m512 acc0[M], acc1[M];
    for (int i = 0; i < M; ++i) acc0[i] = acc1[i] = _mm512_setzero_ps();
    float dots[M];
    for (int i = 0; i < M; ++i) dots[i] = 0;
    if (per_group) {
      int64_t q = 0;
      for (; q + 1 < n_quads; q += 2) {
        q4_quad<M>(a, row, i0, q, acc0, _mm512_set1_ps(srow[q / qpg]));
        q4_quad<M>(a, row, i0, q + 1, acc1, _mm512_set1_ps(srow[(q + 1) / qpg]));
      }
      if (q < n_quads) q4_quad<M>(a, row, i0, q, acc0, _mm512_set1_ps(srow[q / qpg]));
    } else {
      for (int64_t q = 0; q < n_quads; ++q) {
        // The scales of the quad's 4 blocks (groups of 32: 4 groups; of 64: 2; else any), spread
        // over the lanes; loads stay inside the row's scales.
        __m128 s4;
        if (bpg == 1) s4 = _mm_loadu_ps(srow + q * 4);
        else if (bpg == 2) s4 = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(srow + q * 2)));
        else s4 = _mm_setr_ps(srow[4 * q / bpg], srow[(4 * q + 1) / bpg], srow[(4 * q + 2) / bpg], srow[(4 * q + 3) / bpg]);
        const __m512i idx = bpg == 2 ? _mm512_srli_epi32(lane_block, 1) : lane_block;
        const __m512 sv = _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(s4));
        if (q % 2 == 0) q4_quad<M>(a, row, i0, q, acc0, sv);
        else q4_quad<M>(a, row, i0, q, acc1, sv);
      }
    }
    for (int i = 0; i < M; ++i) dots[i] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[i], acc1[i]));
    for (int64_t b = n_quads * 4; b < n_blocks; ++b)  // the last 1-3 blocks
      for (int i = 0; i < M; ++i) dots[i] += srow[b / bpg < w.n_groups ? b / bpg : w.n_groups - 1] * tail_block<CodeKind::kQ4>(w, a, r, b, i0 + i);
    float out[M][1];
    for (int i = 0; i < M; ++i) out[i][0] = dots[i];
    gemv_store<M, 1>(a, a.xsum ? a.xsum + i0 * w.n_groups : nullptr, a.y + i0 * a.ld_y, out, r);
  }
}

template <CodeKind K, int M>
FRUGAL_VNNI void gemv_i8_kind(const QuantMatmulArgs& a, int64_t i0, int64_t n0, int64_t n1) {
  if constexpr (K == CodeKind::kQ4) gemv_q4_quads<M>(a, i0, n0, n1);
  else gemv_q8_pairs<M>(a, i0, n0, n1);
}

template <CodeKind K>
void gemv_i8_typed(const QuantMatmulArgs& a, int64_t n0, int64_t n1) {
  constexpr int64_t kChunk = 4, kRows = 16;
  for (int64_t o0 = n0; o0 < n1; o0 += kRows) {
    const int64_t o1 = o0 + kRows < n1 ? o0 + kRows : n1;
    for (int64_t i0 = 0; i0 < a.m; i0 += kChunk) {
      switch (a.m - i0 < kChunk ? a.m - i0 : kChunk) {
        case 1: gemv_i8_kind<K, 1>(a, i0, o0, o1); break;
        case 2: gemv_i8_kind<K, 2>(a, i0, o0, o1); break;
        case 3: gemv_i8_kind<K, 3>(a, i0, o0, o1); break;
        default: gemv_i8_kind<K, 4>(a, i0, o0, o1); break;
      }
    }
  }
}

void gemv_i8(const QuantMatmulArgs& a, int64_t n0, int64_t n1) {
  if (a.w.kind == CodeKind::kQ8) return gemv_i8_typed<CodeKind::kQ8>(a, n0, n1);
  return gemv_i8_typed<CodeKind::kQ4>(a, n0, n1);
}

#endif

// ---------------------------------------------------------------- int8 activations for the GEMM

// One row of x -> int8 per 32-block (see QuantKernelTable::quantize_x): f32 amax, 127 / amax,
// round to nearest even. The GEMM and the dispatcher's gemv_i8 preparation both use it, so a
// token is quantized alike on both paths.
void quantize_x(const float* x, int64_t k_pad, int8_t* xq, float* xd, int32_t* xc) {
  const int64_t n_blocks = k_pad / kB;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float* src = x + b * kB;
    int8_t* dst = xq + b * kB;
#if FRUGAL_QUANT_ISA_BITS == 512
    const __m512 v0 = _mm512_loadu_ps(src), v1 = _mm512_loadu_ps(src + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float inv = amax > 0 ? 127.0f / amax : 0.0f;
    const __m512 vi = _mm512_set1_ps(inv), lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v0, vi), lo), hi));
    const __m512i q1 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v1, vi), lo), hi));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 16), _mm512_cvtepi32_epi8(q1));
    xc[b] = -128 * _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
#elif FRUGAL_QUANT_ISA_BITS == 256
    __m256 v[4];
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm256_loadu_ps(src + 8 * j);
      m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[j]));
    }
    const float amax = Vec::reduce_max(m);
    const float inv = amax > 0 ? 127.0f / amax : 0.0f;
    const __m256 vi = _mm256_set1_ps(inv), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    __m256i q[4];
    for (int j = 0; j < 4; ++j)
      q[j] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v[j], vi), lo), hi));
    // 32 x i32 -> 32 x i8 in order: packs work per 128-bit lane, so fix the order afterwards.
    const __m256i w01 = _mm256_packs_epi32(q[0], q[1]), w23 = _mm256_packs_epi32(q[2], q[3]);
    const __m256i b8 = _mm256_packs_epi16(w01, w23);
    const __m256i ordered = _mm256_permutevar8x32_epi32(b8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), ordered);
    const __m256i s32 = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1));
    xc[b] = -128 * _mm_cvtsi128_si32(t);
#else
    float amax = 0;
    for (int j = 0; j < kB; ++j) amax = std::fmax(amax, std::fabs(src[j]));
    const float inv = amax > 0 ? 127.0f / amax : 0.0f;
    int32_t sum = 0;
    for (int j = 0; j < kB; ++j) {
      float v = src[j] * inv;
      v = v < -127.0f ? -127.0f : v > 127.0f ? 127.0f : v;
      dst[j] = static_cast<int8_t>(std::nearbyint(v));
      sum += dst[j];
    }
    xc[b] = -128 * sum;
#endif
    xd[b] = amax / 127.0f;
  }
}

// ---------------------------------------------------------------- int8-activation GEMM
//
// A panel of kPanel weight rows is unpacked once into bytes laid out [k / 4][kPanel][4] (the
// 4-byte groups an integer dot product sums per lane), and its scales and offsets into [g][kPanel];
// then every kMR tokens run through the whole panel: per 4 k, kNV vector loads of codes, kMR
// broadcasts of 4 x bytes and kMR x kNV integer dot products. At the end of each 32-block the
// exact int32 sums are converted and FMA'd into f32 accumulators times x's block scale (and the
// group's scale when there are several groups; one per-channel scale is applied last). Offsets
// add offset[g] * sum(x over g) at each group's end, from the sums of the rounded x (so that the
// error is sum_j W_j * dx_j, as if the dequantized weight met the rounded x), as the GEMV does.
//
// Operands: VNNI's vpdpbusd multiplies unsigned bytes by signed ones. 4-bit codes are unsigned
// already; int8 codes are stored XOR 0x80 (= w + 128, unsigned) and each block's sum starts at
// -128 * sum(xq) (QuantMatmulArgs::xc), which makes it exact. AVX2 has no vpdpbusd: vpmaddubsw
// (u8 x s8 -> pairs summed in saturating s16) and vpmaddwd against ones; 4-bit codes times |x| <=
// 127 cannot saturate (2 * 15 * 127), and int8 weights go as |w| times x with w's sign
// (2 * 128 * 127 < 32767), so the integer sums are exact on every ISA.
#if FRUGAL_QUANT_ISA_BITS > 0
#if FRUGAL_QUANT_ISA_BITS == 512
#define FRUGAL_I8GEMM __attribute__((target("avx512vnni")))
using IV = __m512i;
constexpr int kLanes = 16;
constexpr int kGemmMR = 4;  // 8 int32 + 8 f32 accumulators (6 measured no faster)
constexpr bool kBiasedQ8 = true;
#else
#define FRUGAL_I8GEMM
using IV = __m256i;
constexpr int kLanes = 8;
constexpr int kGemmMR = 2;  // 4 + 4 accumulators, |w| copies and temporaries in 16 registers
constexpr bool kBiasedQ8 = false;
#endif
constexpr int kGemmNV = 2;
constexpr int kPanel = kGemmNV * kLanes;  // weight rows per panel
constexpr int kChunk = 4 * kLanes;        // codes per row transposed at once (kLanes dwords)

inline IV iload(const void* p) {
#if FRUGAL_QUANT_ISA_BITS == 512
  return _mm512_loadu_si512(p);
#else
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
#endif
}
inline IV iset1(int32_t v) {
#if FRUGAL_QUANT_ISA_BITS == 512
  return _mm512_set1_epi32(v);
#else
  return _mm256_set1_epi32(v);
#endif
}
inline F cvt(IV v) {
#if FRUGAL_QUANT_ISA_BITS == 512
  return _mm512_cvtepi32_ps(v);
#else
  return _mm256_cvtepi32_ps(v);
#endif
}

// kChunk codes of row r from code position k0, as bytes in k order (kQ8 biased by 128 for VNNI),
// reinterpreted as kLanes floats for the in-register dword transpose.
template <CodeKind K>
inline F chunk_codes(const QuantWeightView& w, int64_t r, int64_t k0) {
  const uint8_t* row = w.q + r * w.ld_q;
#if FRUGAL_QUANT_ISA_BITS == 512
  if constexpr (K == CodeKind::kQ8) {
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_loadu_si512(row + k0), _mm512_set1_epi8(static_cast<char>(0x80))));
  } else {
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + k0 / 2));
    const __m256i m = _mm256_set1_epi8(0x0f);
    const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(b, m)),
                                         _mm256_and_si256(_mm256_srli_epi16(b, 4), m), 1);
    return _mm512_castsi512_ps(_mm512_shuffle_i64x2(z, z, 0xd8));
  }
#else
  if constexpr (K == CodeKind::kQ8) {
    return _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + k0)));
  } else {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k0 / 2));
    const __m128i m = _mm_set1_epi8(0x0f);
    return _mm256_castsi256_ps(_mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m)));
  }
#endif
}

template <CodeKind K>
inline uint8_t code_byte(const QuantWeightView& w, int64_t r, int64_t j) {
  const uint8_t* row = w.q + r * w.ld_q;
  if constexpr (K == CodeKind::kQ8) return kBiasedQ8 ? static_cast<uint8_t>(row[j] ^ 0x80) : row[j];
  const uint8_t byte = row[(j / kB) * 16 + (j % kB) % 16];
  return (j % kB) < 16 ? (byte & 0xf) : (byte >> 4);
}

// Rows [r0, r0 + rows) (rows <= kPanel; missing rows get zero scales) into the panel layout.
template <CodeKind K>
void pack_panel(const QuantWeightView& w, int64_t r0, int rows, uint8_t* codes, float* ps, float* po) {
  const int64_t kp = w.k_pad, kvec = kp / kChunk * kChunk;
  for (int half = 0; half < kGemmNV; ++half) {
    for (int64_t k0 = 0; k0 < kvec; k0 += kChunk) {
      F t[kLanes];
      for (int l = 0; l < kLanes; ++l) {
        const int r = half * kLanes + l;
        t[l] = r < rows ? chunk_codes<K>(w, r0 + r, k0) : Vec::zero();
      }
      Vec::transpose(t);
      for (int j = 0; j < kLanes; ++j)
        Vec::store(reinterpret_cast<float*>(codes + ((k0 / 4 + j) * kPanel + half * kLanes) * 4), t[j]);
    }
  }
  for (int64_t j = kvec; j < kp; ++j)
    for (int r = 0; r < kPanel; ++r)
      codes[((j / 4) * kPanel + r) * 4 + j % 4] = r < rows ? code_byte<K>(w, r0 + r, j) : 0;
  for (int64_t g = 0; g < w.n_groups; ++g)
    for (int r = 0; r < kPanel; ++r) {
      ps[g * kPanel + r] = r < rows ? scale_row(w, r0 + r)[g] : 0.0f;
      if (po) po[g * kPanel + r] = r < rows ? w.offset[(r0 + r) * w.n_groups + g] : 0.0f;
    }
}

// acc += 4-byte dot products of codes (per lane) with x's 4 bytes (broadcast); `absw` is |codes|
// for AVX2 int8 (unused otherwise).
template <CodeKind K>
FRUGAL_I8GEMM inline IV dot4(IV acc, IV codes, IV absw, IV xb) {
#if FRUGAL_QUANT_ISA_BITS == 512
  (void)absw;
  return _mm512_dpbusd_epi32(acc, codes, xb);
#else
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (K == CodeKind::kQ8)
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(absw, _mm256_sign_epi8(xb, codes)), ones));
  (void)absw;
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(codes, xb), ones));
#endif
}

// out[i][c] for tokens i0 .. i0 + kMR and the panel's kPanel rows (per-channel scale applied).
template <CodeKind K, bool kGrouped, bool kOffsets>
FRUGAL_I8GEMM void gemm_i8_tile(const QuantMatmulArgs& a, int64_t i0, const uint8_t* codes, const float* ps,
                                const float* po, float (*out)[kPanel]) {
  const QuantWeightView& w = a.w;
  const int64_t n_blocks = w.k_pad / kB, bpg = blocks_per_group(w);
  F facc[kGemmMR][kGemmNV];
  for (int i = 0; i < kGemmMR; ++i)
    for (int v = 0; v < kGemmNV; ++v) facc[i][v] = Vec::zero();
  const int8_t* xr[kGemmMR];
  for (int i = 0; i < kGemmMR; ++i) xr[i] = a.xq + (i0 + i) * a.ld_xq;
  const float* xd = a.xd + i0 * a.ld_xd;
  const int32_t* xc = a.xc + i0 * a.ld_xd;
  F sv[kGemmNV];
  for (int v = 0; v < kGemmNV; ++v) sv[v] = Vec::load(ps + v * kLanes);
  int64_t g = 0, in_g = 0;
  for (int64_t b = 0; b < n_blocks; ++b) {
    IV acc[kGemmMR][kGemmNV];
    for (int i = 0; i < kGemmMR; ++i) {
      const IV init = K == CodeKind::kQ8 && kBiasedQ8 ? iset1(xc[i * a.ld_xd + b]) : iset1(0);
      for (int v = 0; v < kGemmNV; ++v) acc[i][v] = init;
    }
    const uint8_t* cb = codes + b * (kB / 4) * kPanel * 4;
#pragma GCC unroll 8
    for (int q = 0; q < kB / 4; ++q) {
      IV wv[kGemmNV], aw[kGemmNV];
      for (int v = 0; v < kGemmNV; ++v) {
        wv[v] = iload(cb + (q * kPanel + v * kLanes) * 4);
#if FRUGAL_QUANT_ISA_BITS == 256
        aw[v] = K == CodeKind::kQ8 ? _mm256_abs_epi8(wv[v]) : wv[v];
#else
        aw[v] = wv[v];
#endif
      }
#pragma GCC unroll 8
      for (int i = 0; i < kGemmMR; ++i) {
        int32_t x4;
        std::memcpy(&x4, xr[i] + b * kB + q * 4, 4);
        const IV xb = iset1(x4);
#pragma GCC unroll 4
        for (int v = 0; v < kGemmNV; ++v) acc[i][v] = dot4<K>(acc[i][v], wv[v], aw[v], xb);
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < kGemmMR; ++i) {
      const F d = Vec::set1(xd[i * a.ld_xd + b]);
#pragma GCC unroll 4
      for (int v = 0; v < kGemmNV; ++v)
        facc[i][v] = Vec::fma(cvt(acc[i][v]), kGrouped ? Vec::mul(d, sv[v]) : d, facc[i][v]);
    }
    if (++in_g == bpg || b + 1 == n_blocks) {
      if constexpr (!kGrouped)  // one group: its end is the last block; scale the code sums once
        for (int i = 0; i < kGemmMR; ++i)
          for (int v = 0; v < kGemmNV; ++v) facc[i][v] = Vec::mul(facc[i][v], sv[v]);
      if constexpr (kOffsets) {
        for (int i = 0; i < kGemmMR; ++i) {
          const F xs = Vec::set1(a.xsum[(i0 + i) * w.n_groups + g]);
          for (int v = 0; v < kGemmNV; ++v)
            facc[i][v] = Vec::fma(Vec::load(po + g * kPanel + v * kLanes), xs, facc[i][v]);
        }
      }
      in_g = 0;
      if (++g < w.n_groups && kGrouped)
        for (int v = 0; v < kGemmNV; ++v) sv[v] = Vec::load(ps + g * kPanel + v * kLanes);
    }
  }
  for (int i = 0; i < kGemmMR; ++i)
    for (int v = 0; v < kGemmNV; ++v) Vec::store(out[i] + v * kLanes, facc[i][v]);
}

template <CodeKind K, bool kGrouped, bool kOffsets>
void gemm_i8_panels(const QuantMatmulArgs& a, int64_t p0, int64_t p1, uint8_t* scratch) {
  const QuantWeightView& w = a.w;
  // 64-byte aligned codes, then scales and offsets.
  uint8_t* codes = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
  float* ps = reinterpret_cast<float*>(codes + kPanel * w.k_pad);
  float* po = kOffsets ? ps + kPanel * w.n_groups : nullptr;
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t r0 = p * kPanel;
    const int rows = static_cast<int>(w.n - r0 < kPanel ? w.n - r0 : kPanel);
    pack_panel<K>(w, r0, rows, codes, ps, po);
    for (int64_t i0 = 0; i0 < a.m; i0 += kGemmMR) {
      float out[kGemmMR][kPanel];
      gemm_i8_tile<K, kGrouped, kOffsets>(a, i0, codes, ps, po, out);
      for (int i = 0; i < kGemmMR && i0 + i < a.m; ++i) {
        float* y = a.y + (i0 + i) * a.ld_y + r0;
        for (int c = 0; c < rows; ++c) {
          const float bias = a.bias ? a.bias[r0 + c] : 0.0f;
          y[c] = out[i][c] + bias + (a.accumulate ? y[c] : 0.0f);
        }
      }
    }
  }
}

void gemm_i8(const QuantMatmulArgs& a, int64_t p0, int64_t p1, uint8_t* scratch) {
  const bool grouped = a.w.n_groups > 1, offsets = a.w.offset != nullptr;
  if (a.w.kind == CodeKind::kQ8) {
    if (grouped) return offsets ? gemm_i8_panels<CodeKind::kQ8, true, true>(a, p0, p1, scratch)
                                : gemm_i8_panels<CodeKind::kQ8, true, false>(a, p0, p1, scratch);
    return offsets ? gemm_i8_panels<CodeKind::kQ8, false, true>(a, p0, p1, scratch)
                   : gemm_i8_panels<CodeKind::kQ8, false, false>(a, p0, p1, scratch);
  }
  if (grouped) return offsets ? gemm_i8_panels<CodeKind::kQ4, true, true>(a, p0, p1, scratch)
                              : gemm_i8_panels<CodeKind::kQ4, true, false>(a, p0, p1, scratch);
  return offsets ? gemm_i8_panels<CodeKind::kQ4, false, true>(a, p0, p1, scratch)
                 : gemm_i8_panels<CodeKind::kQ4, false, false>(a, p0, p1, scratch);
}
#endif  // FRUGAL_QUANT_ISA_BITS > 0

#if FRUGAL_QUANT_ISA_BITS == 512
const QuantKernelTable& table_vnni() {
  static const QuantKernelTable t = {.isa = "avx512_vnni", .gemv = gemv, .dequant_rows = dequant_rows,
                                     .gemv_i8 = gemv_i8, .gemm_i8 = gemm_i8, .gemm_i8_panel = kPanel,
                                     .gemm_i8_mr = kGemmMR, .quantize_x = quantize_x};
  return t;
}
#endif

const QuantKernelTable& table() {
  // AVX2 has the integer GEMM (vpmaddubsw); AVX-512 without VNNI and scalar dequantize for it.
#if FRUGAL_QUANT_ISA_BITS == 256
  static const QuantKernelTable t = {.isa = FRUGAL_CPU_ISA_NAME, .gemv = gemv, .dequant_rows = dequant_rows,
                                     .gemv_i8 = nullptr, .gemm_i8 = gemm_i8, .gemm_i8_panel = kPanel,
                                     .gemm_i8_mr = kGemmMR, .quantize_x = quantize_x};
#else
  static const QuantKernelTable t = {.isa = FRUGAL_CPU_ISA_NAME, .gemv = gemv, .dequant_rows = dequant_rows,
                                     .gemv_i8 = nullptr, .gemm_i8 = nullptr, .gemm_i8_panel = 0,
                                     .gemm_i8_mr = 0, .quantize_x = quantize_x};
#endif
  return t;
}

}  // namespace frugal::cpu::FRUGAL_CPU_ISA::quantk
