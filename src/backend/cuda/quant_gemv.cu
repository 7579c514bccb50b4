// Weight-only quantized GEMV for decode (W4A16 int4, W8A16 int8, W8A16 fp8), m = 1..8 per
// token tile (grid.y tiles larger m, re-reading the weight once per 8 tokens).
//
// Bandwidth-bound design: the internal layout (ops/weight_format.h) already stores each row as
// 16-byte chunks of 32 int4 / 16 int8-fp8 codes, so no re-layout is needed for coalescing: a
// warp owns a 16-row tile and, per "quad" of 4 consecutive chunks (64 contiguous bytes of
// every row, 128 int4 / 64 8-bit codes), lane (g, q) loads chunk q of rows g and g + 8 with
// one 16-byte streaming load each. The codes are turned into bf16 pairs in registers (int4:
// two byte_perms a word of 8 codes, one lop3 a pair, 128 + code exactly, no conversion; int8: the
// 2^23 float trick; fp8: the hardware e4m3x2 -> f16x2 convert) and fed as the A operand of
// mma.sync m16n8k16 with x (the tile's 8 tokens) as B and f32 accumulators. A quad lies in one
// scale group (group_k a multiple of the quad, or per channel), so the group scale and offset
// are applied once per quad to the f32 partial: y += s * P + o * X, where X (the sum of x over
// the quad) comes from a second mma with an all-ones A; int4's +128 bias folds into o. The
// dequantized values are exact in bf16, so the only rounding is the f32 accumulation.
// U quads are loaded before any is used (bytes in flight), and the warps of a block split k;
// their partial tiles are summed through shared memory.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/quant_gemv.cuh"

namespace frugal::cuda {
namespace {

using namespace qmma;

// The GEMV's end (both tile kernels): the W warps' partial tiles summed through shared memory in
// warp order, then warp 0 stores them: y (+ bias, + y when accumulating), or with the silu epilogue
// out = silu(gate) * up. c0, c1: row a, tokens 2q, 2q + 1 of the tile; c2, c3: row b.
template <int W, int MT, bool kSilu>
__device__ __forceinline__ void gemv_finish(const QGemvArgs& a, float (&acc)[MT][4], float (*red)[32][4 * MT], int warp,
                                            int lane, int64_t row_a, int64_t row_b, int64_t m0) {
  const ops::MatmulParams& p = a.p;
  const int q = lane & 3;
  const int64_t half = p.n / 2;
  if constexpr (W > 1) {
    if (warp > 0) {
#pragma unroll
      for (int t = 0; t < MT; ++t)
#pragma unroll
        for (int i = 0; i < 4; ++i) red[warp - 1][lane][4 * t + i] = acc[t][i];
    }
    __syncthreads();
    if (warp > 0) return;
#pragma unroll
    for (int w = 0; w < W - 1; ++w)
#pragma unroll
      for (int t = 0; t < MT; ++t)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[t][i] += red[w][lane][4 * t + i];
  }
  if constexpr (kSilu) {
#pragma unroll
    for (int t = 0; t < MT; ++t)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int64_t tok = m0 + 8 * t + 2 * q + i;
        if (row_a >= half || tok >= p.m) continue;
        float g = acc[t][i], u = acc[t][2 + i];
        if (p.bias) {
          g += load_f(p.bias_dtype, p.bias, row_a);
          u += load_f(p.bias_dtype, p.bias, row_b);
        }
        store_f(p.y_dtype, a.silu.out, tok * a.silu.ld_out + row_a, silu_mul_f(round_to(p.y_dtype, g), round_to(p.y_dtype, u)));
      }
    return;
  }
#pragma unroll
  for (int t = 0; t < MT; ++t)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t row = i < 2 ? row_a : row_b;
      const int64_t tok = m0 + 8 * t + 2 * q + (i & 1);
      if (row >= p.n || tok >= p.m) continue;
      store_y(p, row, tok, acc[t][i]);
    }
}

// W warps per block, all on one 16-row tile, splitting the quads of k; U quads per warp per
// iteration, double-buffered in registers: the next iteration's U quads are in flight while this
// one's are dequantized and multiplied, so a warp never waits for a load it issued just before
// (the single-buffered loop stalled on L1TEX scoreboard for 42% of its cycles, ncu 2026-12-02).
// MT tiles of 8 tokens per pass over the weight (the dequantized A fragments of a quad are
// reused for every tile). x is loaded when used (L1 hits), not with the weights: preloading it
// for U quads cost 64 registers and half the occupancy (measured: int4 gate at 38% of the copy
// ceiling with it). Lanes whose token is past m multiply zeros; token tiles wholly past m are
// skipped (a warp-uniform test).
// kSilu: the silu epilogue (a.silu.out set; MT == 1 only).
template <QKind K, int W, int U, int MT, bool kOffsets, bool kSilu>
__global__ void __launch_bounds__(W * 32) quant_gemv_kernel(QGemvArgs a) {
  constexpr int C = codes_per_chunk<K>();
  constexpr int S = C / 4;        // mma steps per chunk
  constexpr int XV = C / 8;       // 16-byte x loads (8 bf16) per chunk
  constexpr bool kBias128 = K == QKind::kInt4;
  constexpr bool kNeedX = kOffsets || kBias128;
  __shared__ float red[W > 1 ? W - 1 : 1][32][4 * MT];
  pdl_wait();
  const ops::MatmulParams& p = a.p;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, q = lane & 3;
  // The tile's rows g and g + 8; with the silu epilogue, gate channel c = 8 blockIdx.x + g and its
  // up row c + n / 2, so one lane holds both for its tokens.
  const int64_t half = p.n / 2;
  const int64_t row_a = static_cast<int64_t>(blockIdx.x) * (kSilu ? 8 : 16) + gq, row_b = row_a + (kSilu ? half : 8);
  const int64_t n_a = kSilu ? half : p.n;  // rows row_a may store
  const int64_t ra = row_a < n_a ? row_a : n_a - 1, rb = row_b < p.n ? row_b : p.n - 1;  // clamp: loaded, never stored
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * 8 * MT;
  const uint4* wa = row_codes16(a, ra) + q;  // chunk q of quad 0; quad t at + t qs
  const uint4* wb = row_codes16(a, rb) + q;
  const int qs = quad_step16(a);
  const __nv_bfloat16* x = static_cast<const __nv_bfloat16*>(p.x);
  const float* sa_ptr = static_cast<const float*>(p.w.scales) + (ra / a.group_n) * a.groups_k;
  const float* sb_ptr = static_cast<const float*>(p.w.scales) + (rb / a.group_n) * a.groups_k;
  const float* za_ptr = kOffsets ? static_cast<const float*>(p.w.zeros) + ra * a.groups_k : nullptr;
  const float* zb_ptr = kOffsets ? static_cast<const float*>(p.w.zeros) + rb * a.groups_k : nullptr;
  const int n_chunks = static_cast<int>(a.row_bytes / 16);
  const int n_quads = (n_chunks + 3) / 4;
  constexpr uint32_t kOnes = 0x3F803F80u;  // bf16 (1, 1)
  // This lane's x rows: token m0 + 8t + gq of each tile, or null past m (zeros are multiplied).
  const __nv_bfloat16* xrow[MT];
#pragma unroll
  for (int t = 0; t < MT; ++t) {
    const int64_t tok = m0 + 8 * t + gq;
    xrow[t] = tok < p.m ? x + tok * p.ld_x : nullptr;
  }
  auto load_codes = [&](int base, uint4 (&va)[U], uint4 (&vb)[U]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int quad = base + u * W;
      const bool in = quad * 4 + q < n_chunks;  // also false for quads past the row
      va[u] = in ? load_stream16(wa + static_cast<int64_t>(quad) * qs) : make_uint4(0, 0, 0, 0);
      vb[u] = in ? load_stream16(wb + static_cast<int64_t>(quad) * qs) : make_uint4(0, 0, 0, 0);
    }
  };

  float acc[MT][4];
#pragma unroll
  for (int t = 0; t < MT; ++t)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[t][i] = 0.f;
  uint4 va[U], vb[U];
  load_codes(warp, va, vb);
  for (int base = warp; base < n_quads; base += W * U) {
    uint4 na[U], nb[U];
    load_codes(base + W * U, na, nb);  // the next iteration's codes (zeros past the row)
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int quad = base + u * W;
      if (quad >= n_quads) break;  // warp-uniform
      const int chunk = quad * 4 + q;
      const bool in = chunk < n_chunks;
      uint32_t A[S][4];  // the mma A fragments of this quad: {row a lo, row b lo, row a hi, row b hi}
#pragma unroll
      for (int s = 0; s < S; ++s) {
        dequant_step<K>(va[u], s, A[s][0], A[s][2]);
        dequant_step<K>(vb[u], s, A[s][1], A[s][3]);
      }
      const uint32_t g = quad_group(a, static_cast<uint32_t>(quad));
      const float sa = __ldg(sa_ptr + g), sb = __ldg(sb_ptr + g);
      float oa = 0.f, ob = 0.f;
      if constexpr (kOffsets) {
        oa = __ldg(za_ptr + g);
        ob = __ldg(zb_ptr + g);
      }
      if constexpr (kBias128) {
        oa -= 128.f * sa;
        ob -= 128.f * sb;
      }
#pragma unroll
      for (int t = 0; t < MT; ++t) {
        if (t > 0 && m0 + 8 * t >= p.m) break;  // warp-uniform: the tile is past m
        uint4 xt[XV];  // L1 hits: x is small and every warp of the SM reads it
#pragma unroll
        for (int v = 0; v < XV; ++v) {
          const int64_t j = static_cast<int64_t>(chunk) * C + 8 * v;
          xt[v] = in && xrow[t] && j < p.k ? __ldg(reinterpret_cast<const uint4*>(xrow[t] + j)) : make_uint4(0, 0, 0, 0);
        }
        const uint32_t* xw = reinterpret_cast<const uint32_t*>(&xt[0]);
        float part[4] = {0.f, 0.f, 0.f, 0.f}, xs[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int s = 0; s < S; ++s) {
          const uint32_t x0 = xw[x_word_lo<K>(s)], x1 = xw[x_word_hi<K>(s)];
          mma_bf16(part, A[s][0], A[s][1], A[s][2], A[s][3], x0, x1);
          if constexpr (kNeedX) mma_bf16(xs, kOnes, kOnes, kOnes, kOnes, x0, x1);
        }
        fold_quad<kNeedX>(acc[t], part, sa, sb, oa, ob, xs[0], xs[1], xs[2], xs[3]);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      va[u] = na[u];
      vb[u] = nb[u];
    }
  }
  gemv_finish<W, MT, kSilu>(a, acc, red, warp, lane, row_a, row_b, m0);
}

// The lean GEMV's L2 request (QGemvArgs::l2): before the PDL wait (weights and their scales are
// written by no kernel of a step), warp 0's lane i < 16 asks L2 for the first a.l2 bytes of the
// codes of lane (i % 8)'s row a (i < 8) or row b, with one bulk prefetch, and lane 16 + i for
// that row's scale (and zero-point) lines. The block's warps then load from L2 what the DRAM is
// already streaming: the bytes in flight are no longer bounded by the registers that hold them
// (session 39's accounting), and no register, shared memory or instruction of the loop changes.
// Measured slower at every size (H100, docs/perf/2026-12-05-session43.md): opt-in.
template <bool kSilu, bool kOffsets>
__device__ __forceinline__ void l2_rows(const QGemvArgs& a) {
  const ops::MatmulParams& p = a.p;
  const int i = threadIdx.x & 15, g = i & 7;
  const int64_t half = p.n / 2;
  const int64_t ra = static_cast<int64_t>(blockIdx.x) * (kSilu ? 8 : 16) + g;
  const int64_t row = i < 8 ? ra : ra + (kSilu ? half : 8);
  if (row >= (i < 8 && kSilu ? half : p.n)) return;
  if (threadIdx.x < 16) {
    prefetch_l2(static_cast<const uint8_t*>(p.w.data) + row * a.row_bytes, static_cast<uint32_t>(a.l2));
    return;
  }
  const uint32_t sbytes = static_cast<uint32_t>(a.groups_k * sizeof(float));
  prefetch_l2_lines(static_cast<const float*>(p.w.scales) + (row / a.group_n) * a.groups_k, sbytes);
  if constexpr (kOffsets) prefetch_l2_lines(static_cast<const float*>(p.w.zeros) + row * a.groups_k, sbytes);
}

// The lean GEMV (QuantGemvKernel::kLean) for m <= 8: the tile kernel's blocks, warps, quads,
// arithmetic and order, so the same bits, with the per-quad bookkeeping taken out of the loop
// (Nsight Compute, 2026-12-03: the tile kernel issued ~300 instructions a warp-quad with half the
// issue slots busy and the ALU the busiest pipe). Quads that lie wholly inside k (all but the last
// when k % 128 != 0 for int4, 64 for 8-bit) need no checks: code, scale and x addresses come from
// per-lane base pointers, and a lane whose token is past m reads the last token's x row (its columns are never
// stored) instead of branching to zeros. The next group of U quads' codes loads while this one's
// are used (a second register set, copied over at the iteration's end: swapping the two by
// unrolling the loop by two cost 6 more registers, ptxas 13.0); each step's A fragments are made
// just before its mma. The quads at the end of k run the tile kernel's checked code, on addresses
// rebuilt after the loop (keeping its own alive through the loop cost 6 registers: int4 66
// against 72, the tile GEMV's 62; a 64-register cap spills). The
// dequantization (8 ALU instructions per 32-bit word of codes) is the same as the tile kernel's,
// so the saving is the loop's bookkeeping: 181 PTX instructions a quad against 225 (int4, m <= 8).
// kTM: int4 / int8 codes in kOutInTiles8 (ops/weight_format.h; the CUDA backend re-lays them so
// when it places them): a quad of 8 rows is 512 contiguous bytes, lane (g, q)'s chunk at 16 l, so
// each 16-byte load instruction of a warp reads 512 contiguous bytes (row-major: 8 rows x 64
// bytes). Only whole quads (tiles8_fits), no L2 request (launch_quant_gemv).
// D > 0: the codes come through a ring of D quads a warp in shared memory instead of registers
// (quant_gemv_ring_depth: the default for int4 and int8): each lane copies its two 16-byte chunks of a quad with
// cp.async and reads back only what it copied itself, so a warp needs no barrier, only its own
// cp.async.wait_group. D - 1 quads a warp are in flight while one is multiplied, and they hold no
// register (the register double buffer caps the lean GEMV's bytes in flight at about a quad a
// warp: session 43's profile, long-scoreboard stalls the top reason, DRAM at 45%). Quads, order
// and arithmetic are the register path's: the same bits. U is 1 there. Measured (H100,
// 2026-12-06): 7B int4 batch 1 +5.8%, but the gate kernel alone only -1.5% (the loop's
// instruction issue, not its loads in flight, is what bounds it now) and down alone +20%; in the
// step graph (PDL, its copies in flight while the previous kernel drains) down gains the most
// (session 48: -83 us a step of kernel time).
template <QKind K, int W, int U, bool kOffsets, bool kSilu, bool kTM = false, int D = 0>
__global__ void __launch_bounds__(W * 32) quant_gemv_lean_kernel(QGemvArgs a) {
  constexpr int C = codes_per_chunk<K>();
  constexpr int S = C / 4;   // mma steps per chunk
  constexpr int XV = C / 8;  // 16-byte x loads (8 bf16) per chunk
  constexpr bool kBias128 = K == QKind::kInt4;
  constexpr bool kNeedX = kOffsets || kBias128;
  constexpr uint32_t kOnes = 0x3F803F80u;  // bf16 (1, 1)
  __shared__ float red[W > 1 ? W - 1 : 1][32][4];
  if (a.l2 > 0 && threadIdx.x < 32) l2_rows<kSilu, kOffsets>(a);
  if (!a.early) pdl_wait();
  const ops::MatmulParams& p = a.p;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, q = lane & 3;
  const int64_t half = p.n / 2;
  const int64_t row_a = static_cast<int64_t>(blockIdx.x) * (kSilu ? 8 : 16) + gq, row_b = row_a + (kSilu ? half : 8);
  const int64_t n_a = kSilu ? half : p.n;
  const int64_t ra = row_a < n_a ? row_a : n_a - 1, rb = row_b < p.n ? row_b : p.n - 1;  // clamp: loaded, never stored
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * 8;
  const int64_t tok = m0 + gq < p.m ? m0 + gq : p.m - 1;  // clamp: read, never stored
  // Chunk q of quad 0 of this lane's rows, and its x (addresses only: nothing is read before the
  // first codes, which depend on no earlier kernel).
  const uint4* wa = row_codes16(p.w.data, a.row_bytes, ra, kTM) + q;
  const uint4* wb = row_codes16(p.w.data, a.row_bytes, rb, kTM) + q;
  constexpr int kQuadStride = kTM ? 32 : 4;  // uint4s from one quad's codes of a lane to the next's
  const __nv_bfloat16* xq = static_cast<const __nv_bfloat16*>(p.x) + tok * p.ld_x + q * C;
  const float* sa_ptr = static_cast<const float*>(p.w.scales) + (ra / a.group_n) * a.groups_k;
  const float* sb_ptr = static_cast<const float*>(p.w.scales) + (rb / a.group_n) * a.groups_k;
  const float* za_ptr = kOffsets ? static_cast<const float*>(p.w.zeros) + ra * a.groups_k : nullptr;
  const float* zb_ptr = kOffsets ? static_cast<const float*>(p.w.zeros) + rb * a.groups_k : nullptr;
  const int n_chunks = static_cast<int>(a.row_bytes / 16);
  const int n_quads = (n_chunks + 3) / 4;
  const int n_full = static_cast<int>(p.k / (4 * C));  // quads wholly inside k (so inside the row)

  // One quad's codes, this lane's chunk of its two rows (the group's scales are loaded when used,
  // L1 hits after a row's first quad: prefetching them too cost the registers of 8 warps an SM).
  struct Quad {
    uint4 va, vb;
  };
  auto load_quad = [&](Quad& d, int quad) {
    d.va = load_stream16(wa + kQuadStride * quad);
    d.vb = load_stream16(wb + kQuadStride * quad);
  };
  auto group_params = [&](int quad, float& sa, float& sb, float& za, float& zb) {
    const uint32_t g = quad_group(a, static_cast<uint32_t>(quad));
    sa = __ldg(sa_ptr + g);
    sb = __ldg(sb_ptr + g);
    za = kOffsets ? __ldg(za_ptr + g) : 0.f;
    zb = kOffsets ? __ldg(zb_ptr + g) : 0.f;
  };
  float acc[1][4] = {{0.f, 0.f, 0.f, 0.f}};
  // The tile kernel's per-quad math on codes va / vb and x units xt: part over the S mma steps,
  // folded with the group's scale and offset (same statements, same bits).
  auto quad_math = [&](const uint4& va, const uint4& vb, float sa, float sb, float za, float zb, const uint4 (&xt)[XV]) {
    float oa = 0.f, ob = 0.f;
    if constexpr (kOffsets) {
      oa = za;
      ob = zb;
    }
    if constexpr (kBias128) {
      oa -= 128.f * sa;
      ob -= 128.f * sb;
    }
    const uint32_t* xw = reinterpret_cast<const uint32_t*>(&xt[0]);
    float part[4] = {0.f, 0.f, 0.f, 0.f}, xs[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int s = 0; s < S; ++s) {  // each step's fragments made just before its mma: 4 registers live, not 4 S
      uint32_t a0, a1, a2, a3;
      dequant_step<K>(va, s, a0, a2);
      dequant_step<K>(vb, s, a1, a3);
      const uint32_t x0 = xw[x_word_lo<K>(s)], x1 = xw[x_word_hi<K>(s)];
      mma_bf16(part, a0, a1, a2, a3, x0, x1);
      if constexpr (kNeedX) mma_bf16(xs, kOnes, kOnes, kOnes, kOnes, x0, x1);
    }
    fold_quad<kNeedX>(acc[0], part, sa, sb, oa, ob, xs[0], xs[1], xs[2], xs[3]);
  };
  // Use group `cur` (quads base + u W) while group `nxt` (base + W U on) loads.
  auto step = [&](Quad (&cur)[U], Quad (&nxt)[U], int base) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int quad = base + W * U + u * W;
      if (quad < n_full) load_quad(nxt[u], quad);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int quad = base + u * W;
      if (quad >= n_full) break;  // warp-uniform
      uint4 xt[XV];  // L1 hits: x is small and every warp of the SM reads it
      const uint4* xv = reinterpret_cast<const uint4*>(xq + static_cast<int64_t>(quad) * 4 * C);
#pragma unroll
      for (int v = 0; v < XV; ++v) xt[v] = __ldg(xv + v);
      float sa, sb, za, zb;
      group_params(quad, sa, sb, za, zb);
      quad_math(cur[u].va, cur[u].vb, sa, sb, za, zb, xt);
    }
  };
  if constexpr (D > 0) {
    static_assert(D >= 3 && U == 1, "a ring of at least 3 quads, one quad an iteration");
    __shared__ uint4 ring[W][D][2][32];  // [warp][slot][row a / b][lane]: a warp's 512-byte reads are conflict-free
    uint4(*const mine)[2][32] = ring[warp];
    // Quad `quad`'s chunks into slot `slot` as one group (an empty group past the full quads, so
    // every iteration waits for the same count). The "memory" clobbers keep the compiler from
    // moving shared-memory reads across the copies and the wait.
    auto issue = [&](int slot, int quad) {
      if (quad < n_full) {
        cp_async16_l2<256>(&mine[slot][0][lane], wa + kQuadStride * quad, true);
        cp_async16_l2<256>(&mine[slot][1][lane], wb + kQuadStride * quad, true);
      }
      asm volatile("cp.async.commit_group;" ::: "memory");
    };
#pragma unroll
    for (int d = 0; d < D - 1; ++d) issue(d, warp + d * W);
    if (a.early) pdl_wait();  // as below: the first codes are in flight under the previous kernel's tail
    int slot = 0;
    for (int quad = warp; quad < n_full; quad += W) {
      asm volatile("cp.async.wait_group %0;" ::"n"(D - 2) : "memory");  // this quad's group has landed
      const uint4 va = mine[slot][0][lane], vb = mine[slot][1][lane];
      // Refill the slot the previous iteration read (its values are already used) with the quad
      // D - 1 ahead.
      issue(slot == 0 ? D - 1 : slot - 1, quad + (D - 1) * W);
      slot = slot == D - 1 ? 0 : slot + 1;
      uint4 xt[XV];
      const uint4* xv = reinterpret_cast<const uint4*>(xq + static_cast<int64_t>(quad) * 4 * C);
#pragma unroll
      for (int v = 0; v < XV; ++v) xt[v] = __ldg(xv + v);
      float sa, sb, za, zb;
      group_params(quad, sa, sb, za, zb);
      quad_math(va, vb, sa, sb, za, zb, xt);
    }
    asm volatile("cp.async.wait_group 0;" ::: "memory");  // nothing of this block's in flight at its end
  } else {
    Quad b0[U], b1[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int quad = warp + u * W;
      if (quad < n_full) load_quad(b0[u], quad);
    }
    // Early (a.early): the first U quads' codes are in flight while the previous kernel drains
    // (weights are written by no kernel of the step); x, scales and y only after the wait.
    if (a.early) pdl_wait();
    for (int base = warp; base < n_full; base += W * U) {
      step(b0, b1, base);
#pragma unroll
      for (int u = 0; u < U; ++u) b0[u] = b1[u];
    }
  }

  // The quads at the end of k (this warp's, after its full ones, as in the tile kernel): checked.
  // Only when k leaves a partial quad (never for the models' shapes); its addresses are rebuilt
  // here from the kernel's arguments, so nothing of it is live in the loop above.
  if (!kTM && n_full < n_quads) {
    int row_t = gq;
    asm volatile("" : "+r"(row_t));  // opaque: the rebuilt addresses are not the loop's values kept alive
    const int64_t ra_t = min(static_cast<int64_t>(blockIdx.x) * (kSilu ? 8 : 16) + row_t, n_a - 1);
    const int64_t rb_t = min(static_cast<int64_t>(blockIdx.x) * (kSilu ? 8 : 16) + row_t + (kSilu ? half : 8), p.n - 1);
    const uint4* wa_t = reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(p.w.data) + ra_t * a.row_bytes);
    const uint4* wb_t = reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(p.w.data) + rb_t * a.row_bytes);
    const __nv_bfloat16* xrow = m0 + row_t < p.m ? static_cast<const __nv_bfloat16*>(p.x) + (m0 + row_t) * p.ld_x : nullptr;
    for (int quad = n_full + ((warp - n_full % W) % W + W) % W; quad < n_quads; quad += W) {
      const int chunk = quad * 4 + q;
      const bool in = chunk < n_chunks;
      const uint4 va = in ? load_stream16(wa_t + chunk) : make_uint4(0, 0, 0, 0);
      const uint4 vb = in ? load_stream16(wb_t + chunk) : make_uint4(0, 0, 0, 0);
      float sa, sb, za, zb;
      group_params(quad, sa, sb, za, zb);
      uint4 xt[XV];
#pragma unroll
      for (int v = 0; v < XV; ++v) {
        const int64_t j = static_cast<int64_t>(chunk) * C + 8 * v;
        xt[v] = in && xrow && j < p.k ? __ldg(reinterpret_cast<const uint4*>(xrow + j)) : make_uint4(0, 0, 0, 0);
      }
      quad_math(va, vb, sa, sb, za, zb, xt);
    }
  }
  gemv_finish<W, 1, kSilu>(a, acc, red, warp, lane, row_a, row_b, m0);
}

// ---------------------------------------------------------------------------------------------
// The quantized GEMM for 8 < m <= kQuantGemvMaxM. The GEMV above gives every warp its own
// quads of k, so each warp loads the x of its quads for itself, lane by lane from L1: at m = 64
// one 16-byte load per lane touches 16 cache lines and the kernel is L1-bound (ncu 2026-12-03:
// L1/TEX 80%, 9% of the copy ceiling on the 7B gate). Here the W warps of a block own
// different row tiles (R tiles of 16 rows each) and walk the same quads: the block stages each
// quad's x slab (every token of the pass, 128 int4 / 64 8-bit codes wide) once into shared
// memory with coalesced cp.async copies, double-buffered (the next quad's slab is in flight
// while this one is multiplied), and every warp reads its B fragments from there, conflict-free
// (16-byte units stored chunk-major, the halves swapped on odd token rows). The per-quad math is
// the GEMV's: exact bf16 codes as A, the group scale and offset applied to the f32 partial, the
// offset's sum of x from an all-ones mma, here shared by the R row tiles of a warp.
// Blocks split k over grid.z when the row tiles alone do not fill the GPU: each split writes its
// f32 partial tile to scratch [splits][m][n] and a second kernel adds them in split order (plus
// bias and the accumulated y); one split writes y directly.
struct QGemmArgs {
  QGemvArgs g;
  int quads_per_split;  // quads of k per grid.z split
  float* partials;      // [gridDim.z][m][n] when gridDim.z > 1
};

template <QKind K, int W, int R, int MT, bool kOffsets>
__global__ void __launch_bounds__(W * 32) quant_gemm_kernel(QGemmArgs ga) {
  constexpr int C = codes_per_chunk<K>();
  constexpr int S = C / 4;         // mma steps per chunk
  constexpr int XV = C / 8;        // 16-byte x units per chunk
  constexpr int UT = 4 * XV;       // 16-byte x units per token per quad
  constexpr int TOK = 8 * MT;      // tokens per pass
  constexpr bool kBias128 = K == QKind::kInt4;
  constexpr bool kNeedX = kOffsets || kBias128;
  __shared__ uint4 slab[2][TOK * UT];
  pdl_wait();
  const QGemvArgs& a = ga.g;
  const ops::MatmulParams& p = a.p;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, q = lane & 3;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * TOK;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * W + warp) * 16 * R;
  const int n_chunks = static_cast<int>(a.row_bytes / 16);
  const int n_quads = (n_chunks + 3) / 4;
  const int qb = static_cast<int>(blockIdx.z) * ga.quads_per_split;
  const int qe = min(qb + ga.quads_per_split, n_quads);
  constexpr uint32_t kOnes = 0x3F803F80u;  // bf16 (1, 1)

  const uint4* wa[R];
  const uint4* wb[R];
  const float* sa_ptr[R];
  const float* sb_ptr[R];
  const float* za_ptr[R];
  const float* zb_ptr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t row_a = row0 + 16 * r + gq, row_b = row_a + 8;
    const int64_t ra = row_a < p.n ? row_a : p.n - 1, rb = row_b < p.n ? row_b : p.n - 1;  // clamp: loaded, never stored
    wa[r] = reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(p.w.data) + ra * a.row_bytes);
    wb[r] = reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(p.w.data) + rb * a.row_bytes);
    sa_ptr[r] = static_cast<const float*>(p.w.scales) + (ra / a.group_n) * a.groups_k;
    sb_ptr[r] = static_cast<const float*>(p.w.scales) + (rb / a.group_n) * a.groups_k;
    za_ptr[r] = kOffsets ? static_cast<const float*>(p.w.zeros) + ra * a.groups_k : nullptr;
    zb_ptr[r] = kOffsets ? static_cast<const float*>(p.w.zeros) + rb * a.groups_k : nullptr;
  }
  // x slab of one quad (stage_x_slab's layout).
  auto stage = [&](int buf, int quad) {
    stage_x_slab<K, TOK>(slab[buf], p, m0, quad, threadIdx.x, W * 32);
    cp_async_commit();
  };
  auto load_codes = [&](int quad, uint4 (&va)[R], uint4 (&vb)[R]) {
    const int chunk = quad * 4 + q;
    const bool in = quad < qe && chunk < n_chunks;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      va[r] = in ? load_stream16(wa[r] + chunk) : make_uint4(0, 0, 0, 0);
      vb[r] = in ? load_stream16(wb[r] + chunk) : make_uint4(0, 0, 0, 0);
    }
  };

  float acc[R][MT][4];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < MT; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[r][t][i] = 0.f;
  uint4 va[R], vb[R];
  if (qb < qe) stage(0, qb);
  load_codes(qb, va, vb);
  for (int quad = qb; quad < qe; ++quad) {
    const int buf = (quad - qb) & 1;
    cp_async_wait<0>();
    __syncthreads();  // this slab is visible to all, and every warp is done with the other buffer
    if (quad + 1 < qe) stage(buf ^ 1, quad + 1);
    uint4 na[R], nb[R];
    load_codes(quad + 1, na, nb);
    uint32_t A[R][S][4];
    float sa[R], sb[R], oa[R], ob[R];
    const uint32_t g = quad_group(a, static_cast<uint32_t>(quad));
    quad_operands<K, R, kOffsets>(va, vb, g, sa_ptr, sb_ptr, za_ptr, zb_ptr, A, sa, sb, oa, ob);
#pragma unroll
    for (int t = 0; t < MT; ++t) {
      if (t > 0 && m0 + 8 * t >= p.m) break;  // warp-uniform: the tile is past m
      const int tk = 8 * t + gq;
      uint4 xt[XV];
      x_frag<K>(slab[buf], tk, q, xt);
      const uint32_t* xw = reinterpret_cast<const uint32_t*>(&xt[0]);
      float part[R][4], xs[4] = {0.f, 0.f, 0.f, 0.f};
      quad_tile_mmas<K>(A, xw, part);
      if constexpr (kNeedX) {
#pragma unroll
        for (int s = 0; s < S; ++s) mma_bf16(xs, kOnes, kOnes, kOnes, kOnes, xw[x_word_lo<K>(s)], xw[x_word_hi<K>(s)]);
      }
#pragma unroll
      for (int r = 0; r < R; ++r)
        fold_quad<kNeedX>(acc[r][t], part[r], sa[r], sb[r], oa[r], ob[r], xs[0], xs[1], xs[2], xs[3]);
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      va[r] = na[r];
      vb[r] = nb[r];
    }
  }
  // c0, c1: row g, tokens 2q, 2q + 1 of the tile; c2, c3: row g + 8.
  const bool split = gridDim.z > 1;
  float* part_out = split ? ga.partials + static_cast<int64_t>(blockIdx.z) * p.m * p.n : nullptr;
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < MT; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t row = row0 + 16 * r + gq + (i < 2 ? 0 : 8);
        const int64_t tok = m0 + 8 * t + 2 * q + (i & 1);
        if (row >= p.n || tok >= p.m) continue;
        float v = acc[r][t][i];
        if (split) {
          part_out[tok * p.n + row] = v;
          continue;
        }
        store_y(p, row, tok, v);
      }
}

// y = sum of the splits' partials in split order (+ bias, + y when accumulating).
__global__ void quant_gemm_reduce_kernel(ops::MatmulParams p, const float* partials, int splits) {
  pdl_wait();
  const int64_t total = p.m * p.n;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t tok = e / p.n, row = e % p.n;
    float v = partials[e];
    for (int z = 1; z < splits; ++z) v += partials[static_cast<int64_t>(z) * total + e];
    store_y(p, row, tok, v);
  }
}

// The same sums, four rows of one token a thread (n % 4 == 0: a float4 never straddles two
// tokens), the partials read once and streamed past L1 / out of L2 (__ldcs): each element's
// slices still added in slice order, so the same bits as the scalar kernel.
__global__ void quant_gemm_reduce4_kernel(ops::MatmulParams p, const float4* partials, int splits) {
  pdl_wait();
  const int64_t total4 = p.m * p.n / 4;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total4;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float4 v = __ldcs(partials + e);
    for (int z = 1; z < splits; ++z) {
      const float4 w = __ldcs(partials + static_cast<int64_t>(z) * total4 + e);
      v.x += w.x;
      v.y += w.y;
      v.z += w.z;
      v.w += w.w;
    }
    const int64_t tok = 4 * e / p.n, row = 4 * e % p.n;
    store_y(p, row, tok, v.x);
    store_y(p, row + 1, tok, v.y);
    store_y(p, row + 2, tok, v.z);
    store_y(p, row + 3, tok, v.w);
  }
}

// Tuning knobs for the benchmark (FRUGAL_QGEMV_U=1|2|4 quads per warp per iteration, twice that
// in flight with the double buffer, m <= 8;
// FRUGAL_QGEMV_W=4|8 warps per tile; 0 = the default rule below); set_quant_gemv_tuning wins.
int g_tune_u = -1, g_tune_w = -1;
QuantGemvKernel g_gemv_kernel = QuantGemvKernel::kDefault;

// The default at m <= 8 (measured, cuda_kernel_bench --quant, 2026-12-03): many row tiles (the
// fused gate/up, >= 1024 tiles) 1 quad per iteration on 4 warps (int8: 8), the grid itself keeps
// bytes in flight; fewer tiles (q, o, down) 8 warps and 2 quads; very few (k, v: < 64 tiles) 8 warps and 4.
// 16-row tiles, or 8 gate channels with their up rows (the silu epilogue).
int64_t row_tiles(const QGemvArgs& a) { return a.silu.out ? ceil_div(a.p.n / 2, 8) : ceil_div(a.p.n, 16); }
template <QKind K, int W, bool kOffsets, bool kSilu, bool kTM>
cudaError_t launch_lean_u(const QGemvArgs& a, int u, dim3 grid, cudaStream_t stream) {
  if (const int d = quant_gemv_ring_depth(K == QKind::kFp8, kSilu ? 1 : a.p.k > a.p.n ? 2 : 4); d > 0) {
    if (d >= 5) return launch_kernel(quant_gemv_lean_kernel<K, W, 1, kOffsets, kSilu, kTM, 5>, grid, dim3(W * 32), 0, stream, a);
    return launch_kernel(quant_gemv_lean_kernel<K, W, 1, kOffsets, kSilu, kTM, 3>, grid, dim3(W * 32), 0, stream, a);
  }
  if (u == 4) return launch_kernel(quant_gemv_lean_kernel<K, W, 4, kOffsets, kSilu, kTM>, grid, dim3(W * 32), 0, stream, a);
  if (u == 1) return launch_kernel(quant_gemv_lean_kernel<K, W, 1, kOffsets, kSilu, kTM>, grid, dim3(W * 32), 0, stream, a);
  return launch_kernel(quant_gemv_lean_kernel<K, W, 2, kOffsets, kSilu, kTM>, grid, dim3(W * 32), 0, stream, a);
}
template <QKind K, int W, int MT, bool kOffsets>
cudaError_t launch_k(const QGemvArgs& a, int64_t tiles, bool lean, cudaStream_t stream) {
  static const int u_env0 = env_int("FRUGAL_QGEMV_U");
  const int u_env = g_tune_u >= 0 ? g_tune_u : u_env0;
  const int u = u_env > 0 ? u_env : tiles >= 1024 ? 1 : tiles < 64 ? 4 : 2;
  const dim3 grid(static_cast<unsigned>(row_tiles(a)), static_cast<unsigned>(ceil_div(a.p.m, 8 * MT)));
  if constexpr (MT == 1) {
    if (lean) {
      if constexpr (K != QKind::kFp8) {  // kOutInTiles8: int4 and int8
        if (a.tiles8)
          return a.silu.out ? launch_lean_u<K, W, kOffsets, true, true>(a, u, grid, stream)
                            : launch_lean_u<K, W, kOffsets, false, true>(a, u, grid, stream);
      }
      return a.silu.out ? launch_lean_u<K, W, kOffsets, true, false>(a, u, grid, stream)
                        : launch_lean_u<K, W, kOffsets, false, false>(a, u, grid, stream);
    }
    if (a.silu.out) {
      if (u == 4) return launch_kernel(quant_gemv_kernel<K, W, 4, 1, kOffsets, true>, grid, dim3(W * 32), 0, stream, a);
      if (u == 1) return launch_kernel(quant_gemv_kernel<K, W, 1, 1, kOffsets, true>, grid, dim3(W * 32), 0, stream, a);
      return launch_kernel(quant_gemv_kernel<K, W, 2, 1, kOffsets, true>, grid, dim3(W * 32), 0, stream, a);
    }
    if (u == 4) return launch_kernel(quant_gemv_kernel<K, W, 4, 1, kOffsets, false>, grid, dim3(W * 32), 0, stream, a);
    if (u == 1) return launch_kernel(quant_gemv_kernel<K, W, 1, 1, kOffsets, false>, grid, dim3(W * 32), 0, stream, a);
    return launch_kernel(quant_gemv_kernel<K, W, 2, 1, kOffsets, false>, grid, dim3(W * 32), 0, stream, a);
  } else {
    if (a.silu.out) return cudaErrorInvalidValue;  // the silu epilogue is instantiated for m <= 8
    return launch_kernel(quant_gemv_kernel<K, W, 1, MT, kOffsets, false>, grid, dim3(W * 32), 0, stream, a);
  }
}

template <QKind K, int MT, bool kOffsets>
cudaError_t launch_w(const QGemvArgs& a, bool lean, cudaStream_t stream) {
  static const int w_env0 = env_int("FRUGAL_QGEMV_W");
  const int w_env = g_tune_w >= 0 ? g_tune_w : w_env0;
  const int64_t tiles = row_tiles(a) * ceil_div(a.p.m, 8 * MT);
  // Few row tiles (small n): 8 warps split k to keep bytes in flight. int8 keeps 8 on many tiles
  // too (gate 18944x3584 at m 1: 24.3 us against 26.2 with 4 warps; int4 and fp8 are faster with 4).
  const bool eight = w_env == 8 || (w_env != 4 && (tiles < 1024 || K == QKind::kInt8));
  return eight ? launch_k<K, 8, MT, kOffsets>(a, tiles, lean, stream) : launch_k<K, 4, MT, kOffsets>(a, tiles, lean, stream);
}

// Token tiles per pass: one pass over the weight for m <= 64 (more tiles cost registers and
// tensor-core issue, fewer passes save weight bytes).
template <QKind K, bool kOffsets>
cudaError_t launch_mt(const QGemvArgs& a, bool lean, cudaStream_t stream) {
  if (a.p.m <= 8) return launch_w<K, 1, kOffsets>(a, lean, stream);
  if (a.p.m <= 16) return launch_w<K, 2, kOffsets>(a, false, stream);
  if (a.p.m <= 32) return launch_w<K, 4, kOffsets>(a, false, stream);
  return launch_w<K, 8, kOffsets>(a, false, stream);
}

// The GEMM's launch shape. Token tiles per pass as the GEMV's; warps per block and row tiles
// per warp: 4 x 2 at 8 token tiles (measured fastest at m = 64 on the 7B q, gate and down:
// 23.4 / 106.2 / 101.8 us against 25.9 / 116.8 / 110.5 with 8 x 1; cuda_kernel_bench --quant,
// 2026-12-03), else 8 x 1, unless set_quant_gemm_tuning says otherwise.
int g_gemm_w = -1, g_gemm_r = -1, g_gemm_min_m = -1;
QuantGemmKernel g_gemm_kernel = QuantGemmKernel::kDefault;

struct GemmShape {
  int w, r, mt;
  int64_t gx, gy;
  int n_quads;
};

GemmShape gemm_shape(const ops::MatmulParams& p) {
  GemmShape s{};
  s.mt = p.m <= 16 ? 2 : p.m <= 32 ? 4 : 8;
  int w = 0, r = 0;
  quant_gemm_tuning(&w, &r);
  const bool def = w != 4 && w != 8 && r != 1 && r != 2;
  s.w = def ? (s.mt == 8 ? 4 : 8) : w == 4 ? 4 : 8;
  s.r = def ? (s.mt == 8 ? 2 : 1) : r == 2 ? 2 : 1;
  if (s.r == 2) s.w = 4;  // the instantiated pairs: 4 x 1, 8 x 1, 4 x 2
  s.gx = ceil_div(p.n, 16 * s.w * s.r);
  s.gy = ceil_div(p.m, 8 * s.mt);
  const int64_t chunks = ops::quant_geometry(p.w.format, p.n, p.k).row_bytes / 16;
  s.n_quads = static_cast<int>((chunks + 3) / 4);
  return s;
}

template <QKind K, int W, int R, int MT, bool kOffsets>
cudaError_t launch_gemm_k(const QGemmArgs& ga, dim3 grid, cudaStream_t stream) {
  return launch_kernel(quant_gemm_kernel<K, W, R, MT, kOffsets>, grid, dim3(W * 32), 0, stream, ga);
}

template <QKind K, int MT, bool kOffsets>
cudaError_t launch_gemm_wr(const QGemmArgs& ga, const GemmShape& s, dim3 grid, cudaStream_t stream) {
  if (s.r == 2) return launch_gemm_k<K, 4, 2, MT, kOffsets>(ga, grid, stream);
  if (s.w == 4) return launch_gemm_k<K, 4, 1, MT, kOffsets>(ga, grid, stream);
  return launch_gemm_k<K, 8, 1, MT, kOffsets>(ga, grid, stream);
}

template <QKind K, bool kOffsets>
cudaError_t launch_gemm_mt(const QGemmArgs& ga, const GemmShape& s, dim3 grid, cudaStream_t stream) {
  if (s.mt == 2) return launch_gemm_wr<K, 2, kOffsets>(ga, s, grid, stream);
  if (s.mt == 4) return launch_gemm_wr<K, 4, kOffsets>(ga, s, grid, stream);
  return launch_gemm_wr<K, 8, kOffsets>(ga, s, grid, stream);
}

}  // namespace

const QuantDevice& quant_device() {
  static QuantDevice cache[64];
  static bool done[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) dev = 0;
  if (!done[dev]) {
    int v = 0;
    QuantDevice d;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess) d.major = v;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && v > 0) d.sms = v;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) == cudaSuccess && v > 0)
      d.smem_per_block = static_cast<size_t>(v);
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev) == cudaSuccess && v > 0)
      d.smem_per_sm = static_cast<size_t>(v);
    cache[dev] = d;
    done[dev] = true;
  }
  return cache[dev];
}

void set_quant_gemv_kernel(QuantGemvKernel k) { g_gemv_kernel = k; }

QuantGemvKernel quant_gemv_kernel_choice(QuantGemvKernel over) {
  static const QuantGemvKernel env = [] {
    const char* e = std::getenv("FRUGAL_QGEMV_KERNEL");
    if (e && std::strcmp(e, "bulk") == 0) return QuantGemvKernel::kBulk;
    if (e && std::strcmp(e, "tile") == 0) return QuantGemvKernel::kTile;
    return QuantGemvKernel::kLean;
  }();
  if (over != QuantGemvKernel::kDefault) return over;
  return g_gemv_kernel != QuantGemvKernel::kDefault ? g_gemv_kernel : env;
}

int g_gemv_l2 = -1;
int quant_gemv_l2() {
  static const int env = std::max(0, env_int("FRUGAL_QGEMV_L2", 0));
  return g_gemv_l2 >= 0 ? g_gemv_l2 : env;
}
void set_quant_gemv_l2(int bytes) { g_gemv_l2 = bytes; }

int g_gemv_ring = -1;
// The default (measured on the 7B, H100, docs/perf/2026-12-06-session47.md): int4 and int8 through
// the ring of 3 (batch-1 decode +5.8% / +1.8%, 4 and 8 sequences +3.4% / +2.9% int4), fp8 on the
// registers (-6.3% with the ring). fp8's register loop already streams the gate at 92% of copy in
// the kernel bench (int4 70%), so there is little load latency for the ring to hide, and its
// shared-memory stores and reads are instructions the loop did not have. Per class (session 48's
// run 1, int4 batch 1): down alone +2.8%, q/k/v and o alone +1.8%, gate/up alone neutral, all
// +5.2%; int8's gain is all down's. Every class keeps it.
int quant_gemv_ring_depth(bool fp8, int gemv_class) {
  static const int env = env_int("FRUGAL_QGEMV_RING", -1);
  static const int classes = env_int("FRUGAL_QGEMV_RING_ON", 7);
  const int d = g_gemv_ring >= 0 ? g_gemv_ring : env >= 0 ? env : fp8 ? 0 : 3;
  return (classes & gemv_class) ? d : 0;
}
void set_quant_gemv_ring(int depth) { g_gemv_ring = depth; }

int g_gemv_early = -1;
bool quant_gemv_early() {
  static const int env = env_int("FRUGAL_QGEMV_EARLY", 1);
  return (g_gemv_early >= 0 ? g_gemv_early : env) != 0;
}
void set_quant_gemv_early(int early) { g_gemv_early = early; }

void set_quant_gemv_tuning(int quads_per_iteration, int warps) {
  g_tune_u = quads_per_iteration;
  g_tune_w = warps;
}

bool quant_gemv_supported(const ops::MatmulParams& p) {
  const ops::WeightFormat& f = p.w.format;
  const bool int4 = f.scheme == ops::WeightScheme::kInt4, int8 = f.scheme == ops::WeightScheme::kInt8,
             fp8 = f.scheme == ops::WeightScheme::kFp8;
  if (!(int4 || int8 || fp8) || f.act_order || p.x_dtype != DType::kBF16) return false;
  if (f.scale_dtype != DType::kF32 || (f.zero == ops::ZeroPoint::kOffset && (fp8 || f.zero_dtype != DType::kF32))) return false;
  const int64_t quad_codes = int4 ? 128 : 64;
  if (f.group_k != 0 && f.group_k % quad_codes != 0) return false;
  return p.m >= 1 && p.k % 8 == 0 && p.ld_x % 8 == 0 && aligned16(p.x) && aligned16(p.w.data);
}

cudaError_t launch_quant_gemv(const ops::MatmulParams& p, cudaStream_t stream, const SiluMulOut* silu,
                              QuantGemvKernel over) {
  if (p.m * p.n == 0) return cudaSuccess;
  if (silu && (p.n % 2 != 0 || p.accumulate)) return cudaErrorInvalidValue;
  QGemvArgs a = gemv_args(p);
  if (silu) a.silu = *silu;
  a.early = quant_gemv_early() ? 1 : 0;
  // Whole 16-byte units, within the row; none in kOutInTiles8 (a row is not one piece there).
  a.l2 = a.tiles8 ? 0 : static_cast<int>(std::min<int64_t>(a.row_bytes, quant_gemv_l2() / 16 * 16));
  if (quant_gemv_bulk_ok(p, over)) return launch_quant_gemv_bulk(a, stream);
  const bool offsets = p.w.format.zero == ops::ZeroPoint::kOffset;
  const bool lean = quant_gemv_kernel_choice(over) == QuantGemvKernel::kLean;
  switch (p.w.format.scheme) {
    case ops::WeightScheme::kInt4:
      return offsets ? launch_mt<QKind::kInt4, true>(a, lean, stream) : launch_mt<QKind::kInt4, false>(a, lean, stream);
    case ops::WeightScheme::kInt8:
      return offsets ? launch_mt<QKind::kInt8, true>(a, lean, stream) : launch_mt<QKind::kInt8, false>(a, lean, stream);
    case ops::WeightScheme::kFp8: return launch_mt<QKind::kFp8, false>(a, lean, stream);
    default: break;
  }
  return cudaErrorInvalidValue;
}

}  // namespace frugal::cuda

namespace frugal::cuda {

void quant_gemm_tuning(int* warps, int* row_tiles) {
  static const int w_env = env_int("FRUGAL_QGEMM_W"), r_env = env_int("FRUGAL_QGEMM_R");
  *warps = g_gemm_w > 0 ? g_gemm_w : w_env;
  *row_tiles = g_gemm_r > 0 ? g_gemm_r : r_env;
}

void set_quant_gemm_tuning(int warps, int row_tiles) {
  g_gemm_w = warps;
  g_gemm_r = row_tiles;
}

void set_quant_gemm_kernel(QuantGemmKernel k) { g_gemm_kernel = k; }

QuantGemmKernel quant_gemm_kernel(QuantGemmKernel over) {
  if (over != QuantGemmKernel::kDefault) return over;
  static const QuantGemmKernel env = [] {
    const char* e = std::getenv("FRUGAL_QGEMM_KERNEL");
    if (e && std::strcmp(e, "pipe") == 0) return QuantGemmKernel::kPipe;
    if (e && std::strcmp(e, "quad") == 0) return QuantGemmKernel::kQuad;
    return QuantGemmKernel::kSlab;  // measured fastest from 9 tokens (H200, 2026-12-05)
  }();
  return g_gemm_kernel != QuantGemmKernel::kDefault ? g_gemm_kernel : env;
}

void set_quant_gemm_min_m(int m) { g_gemm_min_m = m; }

int64_t quant_gemm_min_m(QuantGemmKernel over, int over_min_m) {
  static const int env = [] {
    const char* e = std::getenv("FRUGAL_QGEMM_MIN_M");
    return e ? std::atoi(e) : -1;
  }();
  const int m = over_min_m >= 0 ? over_min_m : g_gemm_min_m >= 0 ? g_gemm_min_m : env;
  if (m >= 0) return m == 0 ? INT64_MAX : m;
  switch (quant_gemm_kernel(over)) {
    case QuantGemmKernel::kPipe: return kQuantGemmPipeMinM;
    case QuantGemmKernel::kSlab: return kQuantGemmSlabMinM;
    default: return kQuantGemmMinM;
  }
}

// The pipelined GEMM only when it is the configured one (its launches raise their own limits
// otherwise, once each); the slab GEMM always: it also runs the weights in kOutInTiles8 whatever
// GEMM is configured.
cudaError_t prepare_quant_gemm() {
  if (quant_gemm_kernel() == QuantGemmKernel::kPipe)
    if (const cudaError_t e = prepare_quant_gemm_pipe(); e != cudaSuccess) return e;
  return prepare_quant_gemm_slab();
}

namespace {
// The GEMM a call runs: the configured one, but the slab GEMM for codes in kOutInTiles8 (the
// only GEMM that reads that layout).
QuantGemmKernel gemm_kernel_for(const ops::MatmulParams& p, QuantGemmKernel over) {
  return p.w.format.layout == ops::WeightLayout::kOutInTiles8 ? QuantGemmKernel::kSlab : quant_gemm_kernel(over);
}
}  // namespace

// The first GEMM: splits of k, enough blocks for two per SM, at least 4 quads per split, no
// empty split. The pipelined one: quant_gemm_pipe_splits.
int quant_gemm_splits(const ops::MatmulParams& p, int n_sms, QuantGemmKernel over) {
  if (gemm_kernel_for(p, over) == QuantGemmKernel::kPipe) return quant_gemm_pipe_splits(p, n_sms);
  if (gemm_kernel_for(p, over) == QuantGemmKernel::kSlab) return quant_gemm_slab_splits(p, n_sms);
  const GemmShape s = gemm_shape(p);
  const int64_t blocks = s.gx * s.gy, target = 2 * static_cast<int64_t>(n_sms);
  int64_t ks = std::clamp<int64_t>(ceil_div(target, blocks), 1, std::max(1, s.n_quads / 4));
  const int64_t qps = ceil_div(s.n_quads, ks);
  return static_cast<int>(ceil_div(s.n_quads, qps));
}

size_t quant_gemm_scratch_bytes(const ops::MatmulParams& p, int splits, QuantGemmKernel over) {
  if (gemm_kernel_for(p, over) == QuantGemmKernel::kPipe) return quant_gemm_pipe_scratch_bytes(p, splits);
  if (gemm_kernel_for(p, over) == QuantGemmKernel::kSlab) return quant_gemm_slab_scratch_bytes(p, splits);
  return splits > 1 ? static_cast<size_t>(splits) * static_cast<size_t>(p.m * p.n) * sizeof(float) : 0;
}

bool quant_gemm_partials_ok(const ops::MatmulParams& p, QuantGemmKernel over) {
  return gemm_kernel_for(p, over) == QuantGemmKernel::kSlab;
}

cudaError_t launch_quant_gemm_partials(const ops::MatmulParams& p, int splits, void* partials, cudaStream_t stream,
                                       QuantGemmKernel over) {
  if (!quant_gemm_partials_ok(p, over) || splits < 2 || partials == nullptr) return cudaErrorInvalidValue;
  return launch_quant_gemm_slab(p, splits, partials, stream, /*reduce=*/false);
}

cudaError_t launch_quant_gemm(const ops::MatmulParams& p, int splits, void* partials, cudaStream_t stream,
                              QuantGemmKernel over) {
  if (p.m * p.n == 0) return cudaSuccess;
  if (gemm_kernel_for(p, over) == QuantGemmKernel::kPipe) return launch_quant_gemm_pipe(p, splits, partials, stream);
  if (gemm_kernel_for(p, over) == QuantGemmKernel::kSlab) return launch_quant_gemm_slab(p, splits, partials, stream);
  if (p.w.format.layout != ops::WeightLayout::kOutIn) return cudaErrorInvalidValue;  // row-major codes only
  const GemmShape s = gemm_shape(p);
  if (splits < 1 || (splits > 1 && partials == nullptr)) return cudaErrorInvalidValue;
  const int qps = static_cast<int>(ceil_div(s.n_quads, splits));
  const QGemmArgs ga{gemv_args(p), qps, static_cast<float*>(partials)};
  const dim3 grid(static_cast<unsigned>(s.gx), static_cast<unsigned>(s.gy), static_cast<unsigned>(splits));
  const bool offsets = p.w.format.zero == ops::ZeroPoint::kOffset;
  cudaError_t err = cudaErrorInvalidValue;
  switch (p.w.format.scheme) {
    case ops::WeightScheme::kInt4:
      err = offsets ? launch_gemm_mt<QKind::kInt4, true>(ga, s, grid, stream) : launch_gemm_mt<QKind::kInt4, false>(ga, s, grid, stream);
      break;
    case ops::WeightScheme::kInt8:
      err = offsets ? launch_gemm_mt<QKind::kInt8, true>(ga, s, grid, stream) : launch_gemm_mt<QKind::kInt8, false>(ga, s, grid, stream);
      break;
    case ops::WeightScheme::kFp8: err = launch_gemm_mt<QKind::kFp8, false>(ga, s, grid, stream); break;
    default: break;
  }
  if (err != cudaSuccess || splits == 1) return err;
  return launch_quant_gemm_reduce(p, static_cast<const float*>(partials), splits, stream);
}

cudaError_t launch_quant_gemm_reduce(const ops::MatmulParams& p, const float* partials, int splits, cudaStream_t stream) {
  const int64_t total = p.m * p.n;
  static const bool vec_env = env_int("FRUGAL_QGEMM_REDUCE4", 1) != 0;
  if (vec_env && p.n % 4 == 0 && reinterpret_cast<uintptr_t>(partials) % 16 == 0) {
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(total / 4, 256), 132 * 8));
    return launch_kernel(quant_gemm_reduce4_kernel, blocks, 256, 0, stream, p, reinterpret_cast<const float4*>(partials), splits);
  }
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(total, 256), 132 * 8));
  return launch_kernel(quant_gemm_reduce_kernel, blocks, 256, 0, stream, p, partials, splits);
}

}  // namespace frugal::cuda
