// Matmul kernels y[m, n] = x[m, k] @ w[n, k]^T (+ bias) (+ y), generic over Vec; part of
// kernels_impl.h (same namespace, same one-TU-per-ISA rule).
//
// These are the dense-format kernels (WeightScheme::kDense), one instantiation per storage type L;
// the KernelTable lists them and cpu_backend.cpp picks one per call.
//
// GEMV (decode, m <= kGemvMaxTokens): bandwidth bound. Weights stream from memory once, converted
// from bf16/f16 in registers; every token is computed from them while they are in L1.
// GEMM (prefill): compute bound. Weight blocks of kGemmBlockN x kGemmBlockK are converted to f32
// once and packed as panels [k][kNR] so an MR x kNR register tile (broadcast x, vector w) runs
// at FMA rate; every packed block is reused by all m tokens.

namespace frugal::cpu::FRUGAL_CPU_ISA {

// GEMV rows per step by token count: as many accumulators as registers allow
// (32 vector registers with AVX-512, 16 with AVX2).
constexpr int gemv_rows_per_step(int m) {
  if (kW == 16) return m <= 2 ? 8 : 4;
  if (kW == 8) return m <= 2 ? 4 : 2;
  return 4;
}

// out[i][r] = dot(x_i, w_r) over k for M tokens and R weight rows (row stride k).
template <class L, int M, int R>
inline void gemv_tile(const float* x, int64_t ld_x, const typename L::T* w, int64_t k,
                      float (*out)[R]) {
  F acc[M][R];
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[i][r] = Vec::zero();
  int64_t j = 0;
  for (; j + kW <= k; j += kW) {
    F wv[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) wv[r] = L::vec(w + r * k + j);
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      const F xv = Vec::load(x + i * ld_x + j);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[i][r] = Vec::fma(xv, wv[r], acc[i][r]);
    }
  }
  for (int i = 0; i < M; ++i)
    for (int r = 0; r < R; ++r) out[i][r] = Vec::reduce_add(acc[i][r]);
  for (; j < k; ++j)
    for (int r = 0; r < R; ++r) {
      const float wj = L::one(w + r * k + j);
      for (int i = 0; i < M; ++i) out[i][r] += x[i * ld_x + j] * wj;
    }
}

// y[i, o0 + r] = dots[i][r] + bias + (accumulate ? y : 0).
template <int M, int R>
inline void gemv_store(const ops::MatmulParams& p, float* y, const float (*dots)[R], int64_t o0) {
  for (int r = 0; r < R; ++r) {
    const float b = p.bias ? one_f32(p.bias_dtype, p.bias, o0 + r) : 0.0f;
    for (int i = 0; i < M; ++i) {
      float* dst = y + i * p.ld_y + o0 + r;
      *dst = dots[i][r] + b + (p.accumulate ? *dst : 0.0f);
    }
  }
}

template <class L, int M>
void gemv_rows(const ops::MatmulParams& p, const float* x, float* y, int64_t n0, int64_t n1) {
  constexpr int R = gemv_rows_per_step(M);
  const auto* w = static_cast<const typename L::T*>(p.w.data);
  int64_t o = n0;
  for (; o + R <= n1; o += R) {
    float dots[M][R];
    gemv_tile<L, M, R>(x, p.ld_x, w + o * p.k, p.k, dots);
    gemv_store<M, R>(p, y, dots, o);
  }
  for (; o < n1; ++o) {
    float dots[M][1];
    gemv_tile<L, M, 1>(x, p.ld_x, w + o * p.k, p.k, dots);
    gemv_store<M, 1>(p, y, dots, o);
  }
}

// Tokens go in chunks of up to 4 (4 tokens x 4 rows of accumulators fill the registers). With
// more tokens, every chunk reuses a 16-row block of weights from L1 rather than re-streaming it
// from memory, and each chunk's x rows stay small enough for L1.
template <class L>
void gemv_typed(const ops::MatmulParams& p, int64_t n0, int64_t n1) {
  constexpr int64_t kChunk = 4, kRows = 16;
  for (int64_t o0 = n0; o0 < n1; o0 += kRows) {
    const int64_t o1 = o0 + kRows < n1 ? o0 + kRows : n1;
    for (int64_t i0 = 0; i0 < p.m; i0 += kChunk) {
      const float* x = static_cast<const float*>(p.x) + i0 * p.ld_x;
      float* y = static_cast<float*>(p.y) + i0 * p.ld_y;
      switch (p.m - i0 < kChunk ? p.m - i0 : kChunk) {
        case 1: gemv_rows<L, 1>(p, x, y, o0, o1); break;
        case 2: gemv_rows<L, 2>(p, x, y, o0, o1); break;
        case 3: gemv_rows<L, 3>(p, x, y, o0, o1); break;
        default: gemv_rows<L, 4>(p, x, y, o0, o1); break;
      }
    }
  }
}

// ---------------------------------------------------------------- GEMM

constexpr int kNR = 2 * kW;                // output columns (weight rows) per register tile
constexpr int kMR = kW == 16 ? 8 : 6;      // tokens per register tile: 2 * kMR accumulators
static_assert(kGemmBlockN % (2 * 16) == 0, "GEMM block must hold whole panels");

// C[MR x kNR] (row stride ldc) += x[MR x kb] (row stride ld_x) @ panel[kb x kNR].
template <int MR>
inline void gemm_micro(const float* x, int64_t ld_x, const float* panel, int64_t kb, float* c,
                       int64_t ldc) {
  F acc0[MR], acc1[MR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    acc0[i] = Vec::load(c + i * ldc);
    acc1[i] = Vec::load(c + i * ldc + kW);
  }
  for (int64_t kk = 0; kk < kb; ++kk) {
    const F b0 = Vec::load(panel + kk * kNR), b1 = Vec::load(panel + kk * kNR + kW);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const F a = Vec::set1(x[i * ld_x + kk]);
      acc0[i] = Vec::fma(a, b0, acc0[i]);
      acc1[i] = Vec::fma(a, b1, acc1[i]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    Vec::store(c + i * ldc, acc0[i]);
    Vec::store(c + i * ldc + kW, acc1[i]);
  }
}

inline void gemm_micro_any(int mr, const float* x, int64_t ld_x, const float* panel, int64_t kb,
                           float* c, int64_t ldc) {
  switch (mr) {
    case 1: return gemm_micro<1>(x, ld_x, panel, kb, c, ldc);
    case 2: return gemm_micro<2>(x, ld_x, panel, kb, c, ldc);
    case 3: return gemm_micro<3>(x, ld_x, panel, kb, c, ldc);
    case 4: return gemm_micro<4>(x, ld_x, panel, kb, c, ldc);
    case 5: return gemm_micro<5>(x, ld_x, panel, kb, c, ldc);
    case 6: return gemm_micro<kMR >= 6 ? 6 : 1>(x, ld_x, panel, kb, c, ldc);
    case 7: return gemm_micro<kMR >= 7 ? 7 : 1>(x, ld_x, panel, kb, c, ldc);
    default: return gemm_micro<kMR>(x, ld_x, panel, kb, c, ldc);
  }
}

// Converts weight rows [row0, row0 + rows) x k [kb0, kb0 + kbw) to f32 panels of kNR rows laid
// out [kbw][kNR]; rows past `rows` are zero so partial panels compute harmlessly. kW x kW tiles
// are transposed in registers: scalar transposition cost a third of the GEMM time at m = 64.
template <class L>
void gemm_pack(const typename L::T* w, int64_t k, int64_t row0, int64_t rows, int64_t kb0,
               int64_t kbw, float* pack) {
  const int64_t n_panels = (rows + kNR - 1) / kNR;
  const int64_t kb_vec = kbw / kW * kW;
  for (int64_t pi = 0; pi < n_panels; ++pi) {
    float* dst = pack + pi * kbw * kNR;
    for (int half = 0; half < 2; ++half) {
      const int64_t r0 = pi * kNR + half * kW;  // first of this half's kW rows
      for (int64_t kk = 0; kk < kb_vec; kk += kW) {
        F t[kW];
        for (int r = 0; r < kW; ++r)
          t[r] = r0 + r < rows ? L::vec(w + (row0 + r0 + r) * k + kb0 + kk) : Vec::zero();
        Vec::transpose(t);
        for (int j = 0; j < kW; ++j) Vec::store(dst + (kk + j) * kNR + half * kW, t[j]);
      }
    }
    for (int r = 0; r < kNR; ++r) {
      const int64_t row = pi * kNR + r;
      for (int64_t kk = kb_vec; kk < kbw; ++kk)
        dst[kk * kNR + r] = row < rows ? L::one(w + (row0 + row) * k + kb0 + kk) : 0.0f;
    }
  }
}

// One packed block: C columns [nb0, nb0 + nbw) of all m tokens += x[:, kb0:kb0+kbw] @ block^T.
inline void gemm_block(const ops::MatmulParams& p, const float* pack, int64_t nb0, int64_t nbw,
                       int64_t kb0, int64_t kbw) {
  const float* x = static_cast<const float*>(p.x);
  float* y = static_cast<float*>(p.y);
  const int64_t n_panels = (nbw + kNR - 1) / kNR;
  for (int64_t pi = 0; pi < n_panels; ++pi) {
    const float* panel = pack + pi * kbw * kNR;
    const int64_t cols = nbw - pi * kNR < kNR ? nbw - pi * kNR : kNR;
    for (int64_t m0 = 0; m0 < p.m; m0 += kMR) {
      const int mr = static_cast<int>(p.m - m0 < kMR ? p.m - m0 : kMR);
      const float* xa = x + m0 * p.ld_x + kb0;
      float* c = y + m0 * p.ld_y + nb0 + pi * kNR;
      if (cols == kNR) {
        gemm_micro_any(mr, xa, p.ld_x, panel, kbw, c, p.ld_y);
        continue;
      }
      // Partial panel at the right edge: compute into a full tile, copy back valid columns.
      float tile[kMR * kNR] = {};
      for (int i = 0; i < mr; ++i)
        for (int64_t j = 0; j < cols; ++j) tile[i * kNR + j] = c[i * p.ld_y + j];
      gemm_micro_any(mr, xa, p.ld_x, panel, kbw, tile, kNR);
      for (int i = 0; i < mr; ++i)
        for (int64_t j = 0; j < cols; ++j) c[i * p.ld_y + j] = tile[i * kNR + j];
    }
  }
}

template <class L>
void gemm_typed(const ops::MatmulParams& p, int64_t n0, int64_t n1, float* pack) {
  const auto* w = static_cast<const typename L::T*>(p.w.data);
  float* y = static_cast<float*>(p.y);
  // y starts as 0 (or its old value when accumulating); k blocks add into it; bias goes last.
  if (!p.accumulate)
    for (int64_t i = 0; i < p.m; ++i)
      std::memset(y + i * p.ld_y + n0, 0, static_cast<size_t>(n1 - n0) * sizeof(float));
  for (int64_t nb0 = n0; nb0 < n1; nb0 += kGemmBlockN) {
    const int64_t nbw = n1 - nb0 < kGemmBlockN ? n1 - nb0 : kGemmBlockN;
    for (int64_t kb0 = 0; kb0 < p.k; kb0 += kGemmBlockK) {
      const int64_t kbw = p.k - kb0 < kGemmBlockK ? p.k - kb0 : kGemmBlockK;
      gemm_pack<L>(w, p.k, nb0, nbw, kb0, kbw, pack);
      gemm_block(p, pack, nb0, nbw, kb0, kbw);
    }
  }
  if (p.bias)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t o = n0; o < n1; ++o) y[i * p.ld_y + o] += one_f32(p.bias_dtype, p.bias, o);
}

}  // namespace frugal::cpu::FRUGAL_CPU_ISA
