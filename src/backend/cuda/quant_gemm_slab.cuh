// The slab GEMM's kernel (quant_gemm_slab.cu has the design) and the templates that pick one of
// its instantiations. Each (format, offsets) pair's 16 kernels are instantiated in a file of
// their own (quant_gemm_slab_<format>.cu), so the five compile in parallel: as one file they
// were the build's longest step by minutes. quant_gemm_slab.cu plans the launch and calls
// run_mt, declared extern below.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/quant_gemv.cuh"

namespace frugal::cuda::slab {

using namespace qmma;

constexpr int kSlabWarps = 8;
// The most shared memory a block asks for (H100 / H200 allow 227 KB per block, A100 163 KB:
// slab_smem_max() takes the smaller of this and the device's).
constexpr size_t kSlabSmemCap = 200 * 1024;

inline size_t slab_smem_max() { return std::min(kSlabSmemCap, quant_device().smem_per_block); }

struct QSlabArgs {
  QGemvArgs g;
  int quads_per_split;   // quads of k per grid.z slice (the shared-memory layout's stride)
  int groups_per_block;  // row groups per block along grid.x
  float* partials;       // [gridDim.z][m][n] when gridDim.z > 1
};

// Shared-memory bytes per quad of a slice: the x slab (stage_x_slab's layout) and, when the
// format needs them, the x sums of each of the TOK tokens.
constexpr size_t slab_quad_bytes(bool int4, int mt, bool need_x) {
  const size_t tok = 8 * static_cast<size_t>(mt);
  return tok * (int4 ? 128 : 64) * 2 + (need_x ? tok * 4 : 0);
}

// Two blocks an SM (<= 128 registers) where the shape allows it (MT <= 2, U <= 2), else one.
// CH: the mma chains a token tile's quad accumulates in (1: one chain of S dependent mma; 2: the
// even and the odd steps in two, added at the end; a different f32 summation order, so other
// bits, within the same bound). Nsight Compute (2026-12-05, H100) put the fixed-latency
// dependency first among the stalls at 2-3.5 warps a scheduler; two chains halve the longest.
template <QKind K, int W, int R, int U, int MT, bool kOffsets, int CH>
__global__ void __launch_bounds__(W * 32, MT <= 2 && U <= 2 ? 2 : 1) quant_gemm_slab_kernel(QSlabArgs sa) {
  constexpr int C = codes_per_chunk<K>();
  constexpr int S = C / 4;    // mma steps per chunk
  constexpr int XV = C / 8;   // 16-byte x units per chunk
  constexpr int UT = 4 * XV;  // 16-byte x units per token per quad
  constexpr int TOK = 8 * MT;
  constexpr bool kBias128 = K == QKind::kInt4;
  constexpr bool kNeedX = kOffsets || kBias128;
  constexpr uint32_t kOnes = 0x3F803F80u;  // bf16 (1, 1)
  extern __shared__ uint4 slab[];          // [quads_per_split][TOK * UT], then sums [quads_per_split][MT][8]
  const QGemvArgs& a = sa.g;
  const ops::MatmulParams& p = a.p;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, q = lane & 3;
  const int n_chunks = static_cast<int>(a.row_bytes / 16);
  const int n_quads = (n_chunks + 3) / 4;
  const int qb = static_cast<int>(blockIdx.z) * sa.quads_per_split;
  const int ks = min(sa.quads_per_split, n_quads - qb);  // > 0: the host leaves no slice empty
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * TOK;
  const int64_t n_groups = ceil_div(p.n, 16 * R);
  const int64_t g_first = static_cast<int64_t>(blockIdx.x) * sa.groups_per_block + warp;
  const int64_t g_end = min(n_groups, static_cast<int64_t>(blockIdx.x + 1) * sa.groups_per_block);
  const int my_groups = g_first < g_end ? static_cast<int>((g_end - g_first + W - 1) / W) : 0;
  // This warp's (group, quad) units, group-major, in batches of U quads of one group (a group's
  // last batch may be shorter), so a batch never straddles two groups' accumulators.
  const int batches_per_group = ks > 0 ? (ks + U - 1) / U : 0;
  const int n_batches = my_groups * batches_per_group;
  const float* scales = static_cast<const float*>(p.w.scales);
  const float* zeros = static_cast<const float*>(p.w.zeros);

  // Row tile r's row g (half 0) or g + 8 (half 1) of a group, clamped to the last row (loaded,
  // never stored).
  auto row_of = [&](int64_t group, int r, int half) {
    const int64_t row = group * 16 * R + 16 * r + gq + 8 * half;
    return row < p.n ? row : p.n - 1;
  };

  // The load cursor: the group and slice quad of the next batch whose codes are requested.
  int64_t lg = g_first;
  int lq = 0, loaded = 0;
  // kRowPtrs (one row tile a warp): the cursor group's two row pointers (chunk q of quad 0 of
  // rows a and b) are built once a group, not for every chunk (SASS, 2026-12-06: ~135 of the
  // ~1,060 instructions of a 2-quad batch at m = 16 rebuilt the clamped rows, both layouts'
  // addresses and the 64-bit products each batch). Two row tiles keep the per-chunk build: their
  // kernels are at 187-250 registers.
  constexpr bool kRowPtrs = R == 1;
  const int qs = quad_step16(a);
  const uint4* la = nullptr;
  const uint4* lb = nullptr;
  auto set_load_rows = [&](int64_t group) {  // clamped rows: any group gives valid pointers
    la = row_codes16(a, row_of(group, 0, 0)) + q;
    lb = row_codes16(a, row_of(group, 0, 1)) + q;
  };
  if constexpr (kRowPtrs) set_load_rows(lg);
  auto load_batch = [&](uint4 (&va)[U][R], uint4 (&vb)[U][R]) {
    const bool live = loaded < n_batches;
    const int len = min(U, ks - lq);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int quad = qb + lq + u, chunk = quad * 4 + q;
      const bool in = live && u < len && chunk < n_chunks;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if constexpr (kRowPtrs) {
          va[u][r] = in ? load_stream16(la + quad * qs) : make_uint4(0, 0, 0, 0);
          vb[u][r] = in ? load_stream16(lb + quad * qs) : make_uint4(0, 0, 0, 0);
        } else {
          va[u][r] = in ? load_stream16(row_codes16(a, row_of(lg, r, 0)) + quad * qs + q) : make_uint4(0, 0, 0, 0);
          vb[u][r] = in ? load_stream16(row_codes16(a, row_of(lg, r, 1)) + quad * qs + q) : make_uint4(0, 0, 0, 0);
        }
      }
    }
    ++loaded;
    lq += len;
    if (lq == ks) {
      lq = 0;
      lg += W;
      if constexpr (kRowPtrs) set_load_rows(lg);
    }
  };

  uint4 va[U][R], vb[U][R];
  load_batch(va, vb);  // before the wait: the codes need no earlier kernel
  pdl_wait();

  // The slice's x, every token of the pass, once for the whole block.
  for (int ql = 0; ql < ks; ++ql) stage_x_slab<K, TOK>(slab + ql * TOK * UT, p, m0, qb + ql, threadIdx.x, W * 32);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  const float* sums = reinterpret_cast<const float*>(slab + static_cast<int64_t>(sa.quads_per_split) * TOK * UT);
  if constexpr (kNeedX) {
    float* sums_w = reinterpret_cast<float*>(slab + static_cast<int64_t>(sa.quads_per_split) * TOK * UT);
    // The x sums of (quad, 8-token tile) pairs, warps in turn: the all-ones mma's c0 / c1 are the
    // sums of tokens 2q and 2q + 1 (every row alike), exactly the GEMV's xs.
    for (int it = warp; it < ks * MT; it += W) {
      const int ql = it / MT, t = it % MT;
      if (m0 + 8 * t >= p.m) continue;  // past m: never read
      uint4 xt[XV];
      x_frag<K>(slab + ql * TOK * UT, 8 * t + gq, q, xt);
      const uint32_t* xw = reinterpret_cast<const uint32_t*>(&xt[0]);
      float xs[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int s = 0; s < S; ++s) mma_bf16(xs, kOnes, kOnes, kOnes, kOnes, xw[x_word_lo<K>(s)], xw[x_word_hi<K>(s)]);
      if (gq == 0) {
        sums_w[(ql * MT + t) * 8 + 2 * q] = xs[0];
        sums_w[(ql * MT + t) * 8 + 2 * q + 1] = xs[1];
      }
    }
    __syncthreads();
  }

  // The compute cursor and the current group's scale (and offset) rows.
  int64_t cg = g_first;
  int cq = 0;
  const float* sa_p[R];
  const float* sb_p[R];
  const float* za_p[R];
  const float* zb_p[R];
  auto set_group = [&](int64_t group) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t ra = row_of(group, r, 0), rb = row_of(group, r, 1);
      sa_p[r] = scales + (ra / a.group_n) * a.groups_k;
      sb_p[r] = scales + (rb / a.group_n) * a.groups_k;
      za_p[r] = kOffsets ? zeros + ra * a.groups_k : nullptr;
      zb_p[r] = kOffsets ? zeros + rb * a.groups_k : nullptr;
    }
  };
  const bool split = gridDim.z > 1;
  float* part_out = split ? sa.partials + static_cast<int64_t>(blockIdx.z) * p.m * p.n : nullptr;
  float acc[R][MT][4] = {};
  // Each of this lane's outputs of a group: its accumulator, row and token (c0, c1: row g, tokens
  // 2q, 2q + 1 of the tile; c2, c3: row g + 8).
  auto each_output = [&](int64_t group, auto&& f) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int t = 0; t < MT; ++t)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          f(acc[r][t][i], group * 16 * R + 16 * r + gq + (i < 2 ? 0 : 8), m0 + 8 * t + 2 * q + (i & 1));
  };
  // Stores the group's outputs (y, or this slice's partials) and zeroes them for the next group.
  auto store_group = [&](int64_t group) {
    each_output(group, [&](float& a, int64_t row, int64_t tok) {
      const float v = a;
      a = 0.f;
      if (row >= p.n || tok >= p.m) return;
      if (split) {
        part_out[tok * p.n + row] = v;
      } else {
        store_y(p, row, tok, v);
      }
    });
  };
  if (n_batches > 0) set_group(cg);

  for (int b = 0; b < n_batches; ++b) {
    uint4 na[U][R], nb[U][R];
    load_batch(na, nb);  // the next batch's codes (zeros past the last)
    const int len = min(U, ks - cq);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (u >= len) break;  // warp-uniform
      uint32_t A[R][S][4];  // {row a lo, row b lo, row a hi, row b hi} per tile and step
      float sc_a[R], sc_b[R], of_a[R], of_b[R];
      const int ql = cq + u;  // the unit's quad in the slice
      const uint32_t g = quad_group(a, static_cast<uint32_t>(qb + ql));
      quad_operands<K, R, kOffsets>(va[u], vb[u], g, sa_p, sb_p, za_p, zb_p, A, sc_a, sc_b, of_a, of_b);
      const uint4* xq = slab + ql * TOK * UT;
#pragma unroll
      for (int t = 0; t < MT; ++t) {
        if (t > 0 && m0 + 8 * t >= p.m) break;  // warp-uniform: the tile is past m
        uint4 xt[XV];
        x_frag<K>(xq, 8 * t + gq, q, xt);
        const uint32_t* xw = reinterpret_cast<const uint32_t*>(&xt[0]);
        float part[R][4];
        quad_tile_mmas<K, CH>(A, xw, part);
        float x0 = 0.f, x1 = 0.f;
        if constexpr (kNeedX) {
          const float2 xs = *reinterpret_cast<const float2*>(sums + (ql * MT + t) * 8 + 2 * q);
          x0 = xs.x;
          x1 = xs.y;
        }
#pragma unroll
        for (int r = 0; r < R; ++r) fold_quad<kNeedX>(acc[r][t], part[r], sc_a[r], sc_b[r], of_a[r], of_b[r], x0, x1, x0, x1);
      }
    }
    cq += len;
    if (cq == ks) {  // the group's slice is done
      store_group(cg);
      cq = 0;
      cg += W;
      if (b + 1 < n_batches) set_group(cg);
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < R; ++r) {
        va[u][r] = na[u][r];
        vb[u][r] = nb[u][r];
      }
  }
}

// ---------------------------------------------------------------------------------------------
// Host side. Instantiated (U, R) pairs: at m <= 16 (MT 1, 2) (2, 1) (the default) and (4, 1);
// at 17..64 (MT 4, 8) (1, 2) (the default) and (2, 1). set_quant_gemm_tuning(u, r) or
// FRUGAL_QGEMM_W / FRUGAL_QGEMM_R pick another; FRUGAL_QSLAB_SMEM_KB caps the slice's shared memory.

struct SlabShape {
  int u = 2, r = 1, mt = 1, ch = 1;
  int qps = 1, splits = 1;  // quads per slice, slices
  int gpb = kSlabWarps;     // row groups per block
  int64_t gx = 1, gy = 1;
  size_t smem = 0;
};

enum class Op { kBlocksPerSm, kLaunch };
struct OpArgs {
  const QSlabArgs* sa;
  dim3 grid;
  size_t smem;
  cudaStream_t stream;
  int* out;
};

template <QKind K, int R, int U, int MT, bool kOffsets, int CH>
cudaError_t run_k(Op op, const OpArgs& o) {
  constexpr auto kernel = quant_gemm_slab_kernel<K, kSlabWarps, R, U, MT, kOffsets, CH>;
  const cudaError_t raised = raise_dynamic_smem_once<kernel>(slab_smem_max());
  if (op == Op::kBlocksPerSm) {
    // Registers and warps alone (shared memory is accounted for by the caller).
    *o.out = cached_blocks_per_sm<kernel>(kSlabWarps * 32, 0, 1);
    return raised;
  }
  if (raised != cudaSuccess) return raised;
  return launch_kernel(kernel, o.grid, dim3(kSlabWarps * 32), o.smem, o.stream, *o.sa);
}
template <QKind K, int MT, bool kOffsets, int CH>
cudaError_t run_ur(Op op, const OpArgs& o, int u, int r) {
  if constexpr (MT <= 2) {
    return u == 4 ? run_k<K, 1, 4, MT, kOffsets, CH>(op, o) : run_k<K, 1, 2, MT, kOffsets, CH>(op, o);
  } else {
    return r == 1 ? run_k<K, 1, 2, MT, kOffsets, CH>(op, o) : run_k<K, 2, 1, MT, kOffsets, CH>(op, o);
  }
}
template <QKind K, int MT, bool kOffsets>
cudaError_t run_ch(Op op, const OpArgs& o, const SlabShape& s) {
  return s.ch == 2 ? run_ur<K, MT, kOffsets, 2>(op, o, s.u, s.r) : run_ur<K, MT, kOffsets, 1>(op, o, s.u, s.r);
}
template <QKind K, bool kOffsets>
cudaError_t run_mt(Op op, const OpArgs& o, const SlabShape& s) {
  switch (s.mt) {
    case 1: return run_ch<K, 1, kOffsets>(op, o, s);
    case 2: return run_ch<K, 2, kOffsets>(op, o, s);
    case 4: return run_ch<K, 4, kOffsets>(op, o, s);
    default: return run_ch<K, 8, kOffsets>(op, o, s);
  }
}
// The warpgroup kernel (quant_gemm_wg.cu: int4 on sm_90a): blocks of two warpgroups, 64-row
// groups, NT = 16, 32 or 64 tokens a pass; a quad's x tile is NT tokens x 256 bytes in the
// 128-byte-swizzled K-major layout of wgmma.cuh, then the slice's x sums (a float a token).
constexpr int kWgWarps = 8;
constexpr int kWgRows = 64;
constexpr int wg_quad_x(int nt) { return nt * 256; }
constexpr size_t wg_quad_bytes(int nt) { return static_cast<size_t>(wg_quad_x(nt)) + static_cast<size_t>(nt) * 4; }
constexpr size_t kWgAlignSlack = 1024;  // the tiles start at the next 1024-byte boundary
template <int NT, bool kOffsets>
cudaError_t run_wg(Op op, const OpArgs& o);
extern template cudaError_t run_wg<16, false>(Op op, const OpArgs& o);
extern template cudaError_t run_wg<16, true>(Op op, const OpArgs& o);
extern template cudaError_t run_wg<32, false>(Op op, const OpArgs& o);
extern template cudaError_t run_wg<32, true>(Op op, const OpArgs& o);
extern template cudaError_t run_wg<48, false>(Op op, const OpArgs& o);
extern template cudaError_t run_wg<48, true>(Op op, const OpArgs& o);
extern template cudaError_t run_wg<64, false>(Op op, const OpArgs& o);
extern template cudaError_t run_wg<64, true>(Op op, const OpArgs& o);

// Instantiated in quant_gemm_slab_<format>.cu, one pair each.
extern template cudaError_t run_mt<QKind::kInt4, false>(Op op, const OpArgs& o, const SlabShape& s);
extern template cudaError_t run_mt<QKind::kInt4, true>(Op op, const OpArgs& o, const SlabShape& s);
extern template cudaError_t run_mt<QKind::kInt8, false>(Op op, const OpArgs& o, const SlabShape& s);
extern template cudaError_t run_mt<QKind::kInt8, true>(Op op, const OpArgs& o, const SlabShape& s);
extern template cudaError_t run_mt<QKind::kFp8, false>(Op op, const OpArgs& o, const SlabShape& s);

}  // namespace frugal::cuda::slab
