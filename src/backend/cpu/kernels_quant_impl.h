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

const QuantKernelTable& table() {
  static const QuantKernelTable t = {.isa = FRUGAL_CPU_ISA_NAME, .gemv = gemv, .dequant_rows = dequant_rows};
  return t;
}

}  // namespace frugal::cpu::FRUGAL_CPU_ISA::quantk
