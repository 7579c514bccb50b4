// Device helpers shared by the weight-only quantized GEMV and GEMMs (quant_gemv.cu,
// quant_gemm_pipe.cu): the code -> bf16 conversions that feed mma.sync m16n8k16 as its A operand,
// which x words each step multiplies, the launch arguments and the quad -> scale group map.
// Conventions (quant_gemv.cu's header says more): a "chunk" is 16 bytes of one row's codes
// (32 int4 or 16 8-bit codes), a "quad" 4 consecutive chunks (64 bytes: 128 int4 / 64 8-bit
// codes), which lies in one scale group; lane (g, q) of a warp holds chunk q of rows g and g + 8
// of a 16-row tile. Included only by .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma.cuh"
#include "ops/params.h"
#include "ops/quant_element.h"

namespace frugal::cuda::qmma {

enum class QKind { kInt4, kInt8, kFp8 };

__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t as_u32(__nv_bfloat162 v) { return *reinterpret_cast<uint32_t*>(&v); }

// Codes per 16-byte chunk.
template <QKind K>
constexpr int codes_per_chunk() {
  return K == QKind::kInt4 ? 32 : 16;
}

// (a & b) | c in one instruction (LUT 0xEA). Written out because the compiler emits an AND and an
// OR for the C expression when both b and c are constants (SASS, 2026-12-05: 64 LOP3 a quad of
// int4 codes where 32 do).
__device__ __forceinline__ uint32_t and_or(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// The two bf16 pairs (k slots lo and hi of one mma step) of one row's chunk for step s, and
// which x words (bf16 pairs of the chunk's inputs) they multiply. A step's two x words are
// always adjacent (2j, 2j + 1), so they are the two halves of one 8-byte part of a 16-byte x
// load: mma.sync takes its B operand as a register pair, and words 8 apart (the layout before
// 2026-12-05) cost two register moves an mma (SASS: 32 of 235 instructions a quad).
//   int4: word i = bytes 4i..4i+3; byte b holds codes b (low nibble) and b + 16 (high).
//   byte_perm to [b0, 0, b1, 0] puts codes 4i and 4i + 1 in nibbles 0 and 4 (4i + 16, 4i + 17
//   one nibble up), [b2, 0, b3, 0] codes 4i + 2 and 4i + 3; masking a nibble of each half and
//   OR-ing 0x4300 (bf16 128.0, 7 mantissa bits) in one lop3 makes each 128 + code exactly.
//   Step s = 2i + h: h = 0 the low nibbles, lo = (4i, 4i+1), hi = (4i+2, 4i+3): x words 2i,
//   2i + 1; h = 1 the high nibbles (16 codes on): x words 8 + 2i, 9 + 2i. Steps 2i and 2i + 1
//   share the two byte_perms (8 instructions a word of 8 codes).
//   int8 / fp8: word i holds codes 4i..4i+3; step i: lo = (4i, 4i+1), hi = (4i+2, 4i+3): x words 2i, 2i + 1.
template <QKind K>
__device__ __forceinline__ void dequant_step(const uint4& v, int s, uint32_t& lo, uint32_t& hi) {
  const uint32_t* w = reinterpret_cast<const uint32_t*>(&v);
  if constexpr (K == QKind::kInt4) {
    const int sh = (s & 1) * 4;
    lo = and_or(__byte_perm(w[s >> 1], 0, 0x4140) >> sh, 0x000f000fu, 0x43004300u);
    hi = and_or(__byte_perm(w[s >> 1], 0, 0x4342) >> sh, 0x000f000fu, 0x43004300u);
  } else if constexpr (K == QKind::kInt8) {
    const uint32_t u = w[s] ^ 0x80808080u;  // code + 128 as unsigned bytes
    const float m = 8388736.0f;             // 2^23 + 128
    const float c0 = __int_as_float(__byte_perm(u, 0x4B000000u, 0x7440)) - m;
    const float c1 = __int_as_float(__byte_perm(u, 0x4B000000u, 0x7441)) - m;
    const float c2 = __int_as_float(__byte_perm(u, 0x4B000000u, 0x7442)) - m;
    const float c3 = __int_as_float(__byte_perm(u, 0x4B000000u, 0x7443)) - m;
    lo = as_u32(__floats2bfloat162_rn(c0, c1));
    hi = as_u32(__floats2bfloat162_rn(c2, c3));
  } else {
    const __half2_raw h01 = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w[s] & 0xffffu), __NV_E4M3);
    const __half2_raw h23 = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w[s] >> 16), __NV_E4M3);
    const float2 f01 = __half22float2(__half2(h01)), f23 = __half22float2(__half2(h23));
    lo = as_u32(__floats2bfloat162_rn(f01.x, f01.y));
    hi = as_u32(__floats2bfloat162_rn(f23.x, f23.y));
  }
}

template <QKind K>
__device__ __forceinline__ int x_word_lo(int s) {
  if constexpr (K == QKind::kInt4) return 2 * (s >> 1) + 8 * (s & 1);
  return 2 * s;
}
template <QKind K>
__device__ __forceinline__ int x_word_hi(int s) {
  return x_word_lo<K>(s) + 1;
}

struct QGemvArgs {
  ops::MatmulParams p;
  int64_t row_bytes;    // bytes per stored row (a multiple of 16)
  int64_t group_k;      // codes per scale group (k_pad when per channel)
  int64_t groups_k;     // scale groups per scale row
  int64_t group_n;      // rows per scale row
  int quad_shift;       // quad -> scale group as a shift when quads per group is a power of two, else -1
  uint32_t quads_per_group;
  SiluMulOut silu{};    // GEMV only: SwiGLU's gate_up epilogue when silu.out is set (kernels.h)
  int early = 0;        // lean GEMV only: its first codes are requested before pdl_wait()
  int l2 = 0;           // lean GEMV only: bytes of each of a block's rows asked of L2 at its start (0: none)
  int tiles8 = 0;       // the codes are in kOutInTiles8 (int4 / int8; ops/weight_format.h), else row-major
};

// Row `row`'s codes: the uint4 of chunk 0 of quad 0, and the uint4 step from a quad of the row to
// the next (row-major: 4; kOutInTiles8: 32, a quad of the tile's 8 rows is 512 bytes). Chunk q of
// quad t is at row_codes16(a, row) + t quad_step16(a) + q in both.
// `tiles8` a compile-time constant where a kernel is instantiated per layout (the lean GEMV).
__device__ __forceinline__ const uint4* row_codes16(const void* codes, int64_t row_bytes, int64_t row, bool tiles8) {
  const uint8_t* c = static_cast<const uint8_t*>(codes);
  return reinterpret_cast<const uint4*>(tiles8 ? c + (row >> 3) * 8 * row_bytes + (row & 7) * 64 : c + row * row_bytes);
}
__device__ __forceinline__ const uint4* row_codes16(const QGemvArgs& a, int64_t row) {
  return row_codes16(a.p.w.data, a.row_bytes, row, a.tiles8 != 0);
}
__device__ __forceinline__ int quad_step16(const QGemvArgs& a) { return a.tiles8 ? 32 : 4; }

// The scale group of a quad: a shift in the common cases (g32..g1024, per channel), a 32-bit
// division otherwise; never the 64-bit division the compiler emits for int64_t operands.
__device__ __forceinline__ uint32_t quad_group(const QGemvArgs& a, uint32_t quad) {
  return a.quad_shift >= 0 ? quad >> a.quad_shift : quad / a.quads_per_group;
}

// y[tok][row] = v (+ bias[row], + the y already there when accumulating).
__device__ __forceinline__ void store_y(const ops::MatmulParams& p, int64_t row, int64_t tok, float v) {
  if (p.bias) v += load_f(p.bias_dtype, p.bias, row);
  if (p.accumulate) v += load_f(p.y_dtype, p.y, tok * p.ld_y + row);
  store_f(p.y_dtype, p.y, tok * p.ld_y + row, v);
}

// The GEMMs' x slab of one quad in shared memory: TOK tokens x UT 16-byte units (8 codes each;
// UT = 16 for int4, 8 for 8-bit), unit u = chunk * XV + v of token tk at
// [tk][(v * 4 + chunk) ^ (tk odd ? 4 : 0)], so the B-fragment reads of x_frag (lane (g, q): token
// g, units v * 4 + q) are conflict-free. Zeros past m and past k (k % 8 == 0: a unit is in or out
// whole). Threads tid, tid + nthreads, ... each copy units by cp.async (the caller commits).
template <QKind K, int TOK>
__device__ __forceinline__ void stage_x_slab(uint4* slab, const ops::MatmulParams& p, int64_t m0, int quad, int tid,
                                             int nthreads) {
  constexpr int XV = codes_per_chunk<K>() / 8, UT = 4 * XV, QC = 4 * codes_per_chunk<K>();
  const __nv_bfloat16* x = static_cast<const __nv_bfloat16*>(p.x);
  for (int i = tid; i < TOK * UT; i += nthreads) {
    const int tk = i / UT, u = i % UT, chunk = u / XV, v = u % XV;
    const int64_t tok = m0 + tk, j = static_cast<int64_t>(quad) * QC + 8 * u;
    const bool valid = tok < p.m && j < p.k;
    cp_async16(&slab[tk * UT + ((v * 4 + chunk) ^ ((tk & 1) << 2))], valid ? x + tok * p.ld_x + j : x, valid);
  }
}

// Lane (g, q)'s x words for token tk of a staged slab: the XV units of its chunk q.
template <QKind K>
__device__ __forceinline__ void x_frag(const uint4* slab, int tk, int q, uint4 (&xt)[codes_per_chunk<K>() / 8]) {
  constexpr int XV = codes_per_chunk<K>() / 8, UT = 4 * XV;
#pragma unroll
  for (int v = 0; v < XV; ++v) xt[v] = slab[tk * UT + ((v * 4 + q) ^ ((tk & 1) << 2))];
}

inline QGemvArgs gemv_args(const ops::MatmulParams& p) {
  const ops::QuantGeometry g = ops::quant_geometry(p.w.format, p.n, p.k);
  const int64_t quad_codes = p.w.format.scheme == ops::WeightScheme::kInt4 ? 128 : 64;
  const int64_t qpg = g.group_k / quad_codes;  // quad_gemv_supported: group_k is a multiple of the quad
  int shift = -1;
  for (int s = 0; s < 31; ++s)
    if ((int64_t{1} << s) == qpg) shift = s;
  if (g.groups_k == 1 || qpg >= (int64_t{1} << 31)) shift = 31;  // per channel: every quad in group 0
  QGemvArgs a{p, g.row_bytes, g.group_k, g.groups_k, g.group_n, shift, static_cast<uint32_t>(std::min<int64_t>(qpg, UINT32_MAX)), SiluMulOut{}};
  a.tiles8 = p.w.format.layout == ops::WeightLayout::kOutInTiles8 ? 1 : 0;
  return a;
}

inline bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

// One token tile of one quad in the GEMMs: part[r] = the R row tiles' A fragments times the
// tile's x words over the quad's S mma steps (xw: the token tile's B fragments, x_frag).
// CH = 1: each row tile's S mma in one dependent chain; CH = 2: the even and the odd steps in two
// chains, added at the end (half the chain's latency, another f32 summation order).
template <QKind K, int CH = 1, int R, int S>
__device__ __forceinline__ void quad_tile_mmas(const uint32_t (&A)[R][S][4], const uint32_t* xw, float (&part)[R][4]) {
  static_assert(CH == 1 || CH == 2, "one or two mma chains");
  float odd[R][4];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < 4; ++i) part[r][i] = odd[r][i] = 0.f;
#pragma unroll
  for (int s = 0; s < S; ++s) {
    const uint32_t x0 = xw[x_word_lo<K>(s)], x1 = xw[x_word_hi<K>(s)];
#pragma unroll
    for (int r = 0; r < R; ++r)
      mma_bf16(CH == 2 && s % 2 ? odd[r] : part[r], A[r][s][0], A[r][s][1], A[r][s][2], A[r][s][3], x0, x1);
  }
  if constexpr (CH == 2) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int i = 0; i < 4; ++i) part[r][i] += odd[r][i];
  }
}

// acc += scale * part (+ offset * the token's x sum over the quad when kNeedX) for one row
// tile's accumulator fragment: rows a (c0, c1) and b (c2, c3); xa / xb: the x sums of the
// fragment's two token columns as seen from rows a and b.
template <bool kNeedX>
__device__ __forceinline__ void fold_quad(float (&acc)[4], const float (&part)[4], float sa, float sb, float oa,
                                          float ob, float xa0, float xa1, float xb0, float xb1) {
  acc[0] = fmaf(sa, part[0], acc[0]);
  acc[1] = fmaf(sa, part[1], acc[1]);
  acc[2] = fmaf(sb, part[2], acc[2]);
  acc[3] = fmaf(sb, part[3], acc[3]);
  if constexpr (kNeedX) {
    acc[0] = fmaf(oa, xa0, acc[0]);
    acc[1] = fmaf(oa, xa1, acc[1]);
    acc[2] = fmaf(ob, xb0, acc[2]);
    acc[3] = fmaf(ob, xb1, acc[3]);
  }
}

// The head of the GEMMs' per-quad math for a row group of R tiles: the codes' A fragments
// ({row a lo, row b lo, row a hi, row b hi} per tile and step), and group g's scales and offsets
// (int4's +128 bias folded into the offset) from each tile's scale and zero-point rows.
template <QKind K, int R, bool kOffsets>
__device__ __forceinline__ void quad_operands(const uint4 (&va)[R], const uint4 (&vb)[R], uint32_t g,
                                              const float* const* sa_p, const float* const* sb_p,
                                              const float* const* za_p, const float* const* zb_p,
                                              uint32_t (&A)[R][codes_per_chunk<K>() / 4][4], float (&sa)[R],
                                              float (&sb)[R], float (&oa)[R], float (&ob)[R]) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int s = 0; s < codes_per_chunk<K>() / 4; ++s) {
      dequant_step<K>(va[r], s, A[r][s][0], A[r][s][2]);
      dequant_step<K>(vb[r], s, A[r][s][1], A[r][s][3]);
    }
    sa[r] = __ldg(sa_p[r] + g);
    sb[r] = __ldg(sb_p[r] + g);
    oa[r] = kOffsets ? __ldg(za_p[r] + g) : 0.f;
    ob[r] = kOffsets ? __ldg(zb_p[r] + g) : 0.f;
    if constexpr (K == QKind::kInt4) {
      oa[r] -= 128.f * sa[r];
      ob[r] -= 128.f * sb[r];
    }
  }
}

}  // namespace frugal::cuda::qmma

namespace frugal::cuda {

// The block shape asked for by FRUGAL_QGEMM_W / FRUGAL_QGEMM_R or set_quant_gemm_tuning (0: the
// kernel's default), read by both GEMMs (quant_gemv.cu).
void quant_gemm_tuning(int* warps, int* row_tiles);

// The pipelined GEMM (quant_gemm_pipe.cu) behind launch_quant_gemm & co. when
// quant_gemm_kernel() is kPipe; `splits` is 1 (one block per tile) or the number of blocks.
int quant_gemm_pipe_splits(const ops::MatmulParams& p, int n_sms);
size_t quant_gemm_pipe_scratch_bytes(const ops::MatmulParams& p, int splits);
cudaError_t launch_quant_gemm_pipe(const ops::MatmulParams& p, int splits, void* partials, cudaStream_t stream);
cudaError_t prepare_quant_gemm_pipe();

// The slab GEMM (quant_gemm_slab.cu) behind launch_quant_gemm & co. when quant_gemm_kernel() is
// kSlab; `splits` is the number of k slices (1: the whole k in one, or the GEMV where one slice
// does not fit the shared memory). reduce false: the partials are left for the caller (splits > 1).
int quant_gemm_slab_splits(const ops::MatmulParams& p, int n_sms);
size_t quant_gemm_slab_scratch_bytes(const ops::MatmulParams& p, int splits);
cudaError_t launch_quant_gemm_slab(const ops::MatmulParams& p, int splits, void* partials, cudaStream_t stream,
                                   bool reduce = true);

// An integer from the environment (tuning knobs of the quantized kernels), `fallback` when unset.
inline int env_int(const char* name, int fallback = 0) {
  const char* e = std::getenv(name);
  return e ? std::atoi(e) : fallback;
}

// The current device's limits the quantized kernels size their launches by (queried once per
// device): compute capability major, SMs, the shared memory a block may opt in to and an SM's.
struct QuantDevice {
  int major = 0, sms = 1;
  size_t smem_per_block = 48 * 1024, smem_per_sm = 100 * 1024;
};
const QuantDevice& quant_device();

// The bulk GEMV's launch (quant_gemv_bulk.cu; launch_quant_gemv takes it where
// quant_gemv_bulk_ok says so).
cudaError_t launch_quant_gemv_bulk(const qmma::QGemvArgs& a, cudaStream_t stream);

// y = the sum of `splits` f32 partials [splits][m][n] in split order (+ bias, + y when
// accumulating): the second kernel of the split GEMMs (quant_gemv.cu).
cudaError_t launch_quant_gemm_reduce(const ops::MatmulParams& p, const float* partials, int splits, cudaStream_t stream);

}  // namespace frugal::cuda
