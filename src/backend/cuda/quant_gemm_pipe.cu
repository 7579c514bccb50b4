// The pipelined weight-only quantized GEMM (W4A16 int4, W8A16 int8 / fp8) for decode batches of
// 9..64 tokens: quant_gemv.cu's per-quad math (exact bf16 codes as the A operand of mma.sync
// m16n8k16, the group scale and offset applied once per quad to the f32 partial) fed by a
// multi-stage cp.async pipeline instead of the one-quad-deep double buffer of the first GEMM.
//
// Why (docs/perf/2026-12-03-quant-gemm-decode-mma.md): the first GEMM keeps one quad of x and the
// next quad's codes in flight per block and waits for both at a barrier every 128 codes, so every
// quad exposes a memory round trip; gate 18944 x 3584 at m = 64 runs at 82 TFLOP/s.
//
// Accounting (H200: ~4 TB/s, ~1.8 GHz, 132 SMs, 128 B/clk of shared memory per SM). A k step is
// one quad (64 bytes of every row: 128 int4 / 64 8-bit codes). Per k step a block of W warps x R
// row tiles (BN = 16 W R rows) needs BN x 64 B of codes, TOK x 256 B of x (int4; 128 B for 8-bit)
// and BN x 4 B of scales (+ offsets).
//  - Bytes in flight: covering ~1.3k cycles of DRAM latency at 4 TB/s needs ~16-32 KB of codes
//    per SM. The codes go through shared memory by cp.async (Marlin style) rather than to
//    registers: STAGES - 2 quads ahead cost no registers (the accumulators and one quad of
//    dequantized A fragments already take ~130 of them at R 2, MT 8), and BN = 128 rows x 64 B x
//    2..3 quads ahead x 2-3 blocks per SM = 32-72 KB in flight.
//  - x stays in shared memory for all W x R row tiles of a block; B fragments are read with the
//    conflict-free 16-byte loads of the first GEMM (ldmatrix gives no more bytes per instruction,
//    and would need another weight layout). Shared-memory reads per mma: 2 KB of x per (quad,
//    8-token tile) feed 8 R mmas: at R = 1 the SM would need ~170 B/clk for the mma rate, at R = 2
//    ~85 (fits 128), so the default block is 4 warps x 2 row tiles.
//  - Tensor work: int4's +128 bias and zero points need the sum of x per quad and token; the
//    first GEMM takes it from an all-ones mma in every warp (1/R more mmas). Here one warp per
//    8-token tile computes it once per block and k step, with the same mma on the same
//    operands (the same value bit for bit), into shared memory. It is computed one stage ahead
//    (stage i + 1 must have landed at iteration i), so no extra barrier is needed: one barrier
//    per k step, after ~4 x 128 mmas per warp at m = 64.
//  - Waves: a block per (row block, k split) leaves a partial wave (gate at m 64: 148 row
//    blocks of 128 on 264 resident slots). The blocks here split the (row block, k step) units
//    evenly in a stream-K fashion: block b takes units [b U / P, (b + 1) U / P) of U =
//    tiles x k steps, walked row block by row block with the pipeline running across tile
//    boundaries. A tile wholly inside one block is stored directly; the first or last tile of a
//    block that another block shares goes to the scratch as an f32 partial (at most two per
//    block) and a second kernel adds each tile's partials in block order (deterministic for a
//    given P). P = resident blocks (occupancy x SMs), fewer when a block would get under
//    FRUGAL_QGEMM_UNITS (default 4) k steps; one block per tile (no partials) when the backend
//    has no scratch for them (inside a capture).
// Predicted (int4 7B, kernel alone): m 64 compute-bound at ~0.5 mma/clk per SM: gate ~25 us,
// down ~25 us, q ~7 us (the first GEMM: 106 / 102 / 23); m 16 bandwidth-bound: gate and down
// ~11-13 us, q ~5-6 us (the GEMV: 39 / 35 / 10).
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/quant_gemv.cuh"

namespace frugal::cuda {
namespace {

using namespace qmma;

// 16 bytes global -> shared, asking L2 to fetch the 256-byte segment around it (the next quads of
// the same row follow in the next stages).
__device__ __forceinline__ void cp_async16_pf256(void* smem, const void* gmem, bool valid) {
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" ::"r"(dst), "l"(gmem), "r"(valid ? 16 : 0));
}

// Shared-memory layout of one stage and the pipeline depth per block shape.
template <QKind K, int W, int R, int MT, bool kOffsets>
struct Pipe {
  static constexpr int C = codes_per_chunk<K>();
  static constexpr int S = C / 4;    // mma steps per chunk
  static constexpr int XV = C / 8;   // 16-byte x units per chunk
  static constexpr int UT = 4 * XV;  // 16-byte x units per token per quad
  static constexpr int TOK = 8 * MT;
  static constexpr int BN = 16 * W * R;
  static constexpr bool kNeedX = kOffsets || K == QKind::kInt4;
  // Deeper at small m, where shared memory is cheap and the kernel is bandwidth-bound.
  static constexpr int kStages = MT <= 2 ? 5 : 4;
  static constexpr int kLag = kNeedX ? 1 : 0;  // stage i + 1 must have landed at iteration i (x sums)
  static constexpr int kCodeBytes = BN * 64;  // [BN][4 chunks]
  static constexpr int kXBytes = TOK * UT * 16;
  static constexpr int kScaleBytes = BN * 4 * (kOffsets ? 2 : 1);  // scales [BN], offsets [BN]
  static constexpr int kStageBytes = kCodeBytes + kXBytes + kScaleBytes;
  static constexpr int kXsumBytes = kNeedX ? kStages * TOK * 4 : 0;
  static constexpr int kSmem = kStages * kStageBytes + kXsumBytes;
  static_assert(kStages - 2 - kLag >= 0 && kStageBytes % 16 == 0, "pipeline shape");
};

struct QPipeArgs {
  QGemvArgs g;
  int gx;          // row blocks (tiles per token pass)
  int nk;          // k steps (quads) per tile
  int units;       // tiles x nk
  int blocks;      // P: the grid
  float* partials; // [P][2][TOK][BN] when some block shares a tile
};

// The block that owns unit u: the b with floor(b U / P) <= u < floor((b + 1) U / P).
__host__ __device__ __forceinline__ int owner_block(int64_t u, int64_t units, int64_t blocks) {
  return static_cast<int>(((u + 1) * blocks - 1) / units);
}

template <QKind K, int W, int R, int MT, bool kOffsets>
__global__ void __launch_bounds__(W * 32, 1) quant_gemm_pipe_kernel(QPipeArgs pa) {
  using G = Pipe<K, W, R, MT, kOffsets>;
  constexpr int S = G::S, XV = G::XV, TOK = G::TOK, BN = G::BN, ST = G::kStages;
  constexpr bool kBias128 = K == QKind::kInt4;
  constexpr uint32_t kOnes = 0x3F803F80u;  // bf16 (1, 1)
  extern __shared__ __align__(16) unsigned char smem[];
  pdl_wait();
  const QGemvArgs& a = pa.g;
  const ops::MatmulParams& p = a.p;
  const int ub = static_cast<int>(static_cast<int64_t>(blockIdx.x) * pa.units / pa.blocks);
  const int ue = static_cast<int>(static_cast<int64_t>(blockIdx.x + 1) * pa.units / pa.blocks);
  if (ub >= ue) return;
  const int n_units = ue - ub;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, q = lane & 3;
  const int n_chunks = static_cast<int>(a.row_bytes / 16);
  const uint8_t* codes = static_cast<const uint8_t*>(p.w.data);
  const float* scales = static_cast<const float*>(p.w.scales);
  const float* zeros = static_cast<const float*>(p.w.zeros);
  auto codes_at = [&](int slot) { return reinterpret_cast<uint4*>(smem + slot * G::kStageBytes); };
  auto x_at = [&](int slot) { return reinterpret_cast<uint4*>(smem + slot * G::kStageBytes + G::kCodeBytes); };
  auto scale_at = [&](int slot) {
    return reinterpret_cast<float*>(smem + slot * G::kStageBytes + G::kCodeBytes + G::kXBytes);
  };
  auto xsum_at = [&](int slot) { return reinterpret_cast<float*>(smem + ST * G::kStageBytes) + slot * TOK; };

  // Stage unit u (tile u / nk, quad u % nk) into slot: the codes of the tile's BN rows, the x slab
  // of its token pass, the rows' scales (and offsets) of the quad's group.
  auto load = [&](int u, int slot) {
    const int tile = u / pa.nk, quad = u - tile * pa.nk;
    const int64_t row0 = static_cast<int64_t>(tile % pa.gx) * BN, m0 = static_cast<int64_t>(tile / pa.gx) * TOK;
    uint4* cs = codes_at(slot);
    for (int i = threadIdx.x; i < BN * 4; i += W * 32) {
      const int64_t row = row0 + (i >> 2);
      const int chunk = quad * 4 + (i & 3);
      const bool valid = row < p.n && chunk < n_chunks;
      cp_async16_pf256(cs + i, valid ? codes + row * a.row_bytes + static_cast<int64_t>(chunk) * 16 : codes, valid);
    }
    stage_x_slab<K, TOK>(x_at(slot), p, m0, quad, threadIdx.x, W * 32);
    float* sc = scale_at(slot);
    const uint32_t g = quad_group(a, static_cast<uint32_t>(quad));
    for (int i = threadIdx.x; i < BN; i += W * 32) {
      const uint32_t row = static_cast<uint32_t>(row0 + i < p.n ? row0 + i : p.n - 1);  // clamped: loaded, never stored
      cp_async<4>(sc + i, scales + static_cast<int64_t>(row / static_cast<uint32_t>(a.group_n)) * a.groups_k + g, true);
      if constexpr (kOffsets) cp_async<4>(sc + BN + i, zeros + static_cast<int64_t>(row) * a.groups_k + g, true);
    }
  };
  // The sums of x over the quad of the slab in slot, per token: one warp per 8-token tile, the
  // all-ones mma of the first GEMM (the same value bit for bit); lanes 0..3 hold tokens 2q, 2q + 1.
  auto x_sums = [&](int slot) {
    const uint4* xs = x_at(slot);
    float* out = xsum_at(slot);
    for (int t = warp; t < MT; t += W) {
      uint4 xt[XV];
      x_frag<K>(xs, 8 * t + gq, q, xt);
      const uint32_t* xw = reinterpret_cast<const uint32_t*>(&xt[0]);
      float s4[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int s = 0; s < S; ++s) mma_bf16(s4, kOnes, kOnes, kOnes, kOnes, xw[x_word_lo<K>(s)], xw[x_word_hi<K>(s)]);
      if (gq == 0) {
        out[8 * t + 2 * q] = s4[0];
        out[8 * t + 2 * q + 1] = s4[1];
      }
    }
  };

  float acc[R][MT][4];
  auto clear = [&] {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int t = 0; t < MT; ++t)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[r][t][i] = 0.f;
  };
  // One quad of k for this warp's R row tiles and every token tile of the pass.
  auto compute = [&](int slot, int64_t m0) {
    const uint4* cs = codes_at(slot);
    const uint4* xs = x_at(slot);
    const float* sc = scale_at(slot);
    const float* xsum = xsum_at(slot);
    uint32_t A[R][S][4];
    float sa[R], sb[R], oa[R], ob[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int ra = (warp * R + r) * 16 + gq, rb = ra + 8;
      const uint4 va = cs[ra * 4 + q], vb = cs[rb * 4 + q];
#pragma unroll
      for (int s = 0; s < S; ++s) {
        dequant_step<K>(va, s, A[r][s][0], A[r][s][2]);
        dequant_step<K>(vb, s, A[r][s][1], A[r][s][3]);
      }
      sa[r] = sc[ra];
      sb[r] = sc[rb];
      oa[r] = kOffsets ? sc[BN + ra] : 0.f;
      ob[r] = kOffsets ? sc[BN + rb] : 0.f;
      if constexpr (kBias128) {
        oa[r] -= 128.f * sa[r];
        ob[r] -= 128.f * sb[r];
      }
    }
#pragma unroll
    for (int t = 0; t < MT; ++t) {
      if (t > 0 && m0 + 8 * t >= p.m) break;  // block-uniform: the tile is past m
      uint4 xt[XV];
      x_frag<K>(xs, 8 * t + gq, q, xt);
      float part[R][4];
      quad_tile_mmas<K>(A, reinterpret_cast<const uint32_t*>(&xt[0]), part);
      float x0s = 0.f, x1s = 0.f;
      if constexpr (G::kNeedX) {
        x0s = xsum[8 * t + 2 * q];
        x1s = xsum[8 * t + 2 * q + 1];
      }
#pragma unroll
      for (int r = 0; r < R; ++r)
        fold_quad<G::kNeedX>(acc[r][t], part[r], sa[r], sb[r], oa[r], ob[r], x0s, x1s, x0s, x1s);
    }
  };
  // The end of a segment (this block's quads of one tile): y directly when the block did the
  // whole tile, else an f32 partial in the block's slot 0 (its first tile, begun by another
  // block) or 1 (the tile it leaves to the next block).
  auto finish = [&](int tile, bool whole, int part_slot) {
    const int64_t row0 = static_cast<int64_t>(tile % pa.gx) * BN, m0 = static_cast<int64_t>(tile / pa.gx) * TOK;
    float* out = whole ? nullptr : pa.partials + (static_cast<int64_t>(blockIdx.x) * 2 + part_slot) * TOK * BN;
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int t = 0; t < MT; ++t)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          // c0, c1: row g, tokens 2q, 2q + 1 of the tile; c2, c3: row g + 8.
          const int lr = (warp * R + r) * 16 + gq + (i < 2 ? 0 : 8), tk = 8 * t + 2 * q + (i & 1);
          if (row0 + lr >= p.n || m0 + tk >= p.m) continue;
          if (whole) {
            store_y(p, row0 + lr, m0 + tk, acc[r][t][i]);
          } else {
            out[tk * BN + lr] = acc[r][t][i];
          }
        }
  };

  // Prologue: ST - 1 stages in flight (empty groups past the range keep the count uniform).
#pragma unroll
  for (int s = 0; s < ST - 1; ++s) {
    if (s < n_units) load(ub + s, s);
    cp_async_commit();
  }
  if constexpr (G::kNeedX) {
    cp_async_wait<ST - 2>();
    __syncthreads();
    x_sums(0);
  }
  clear();
  int tile = ub / pa.nk, quad = ub - tile * pa.nk, seg_begin = quad;
  bool first = true;
  for (int i = 0; i < n_units; ++i) {
    const int slot = i % ST;
    cp_async_wait<ST - 2 - G::kLag>();
    __syncthreads();  // stage i (and i + 1 with the lag) visible; x sums of stage i visible; slot (i - 1) free
    if (i + ST - 1 < n_units) load(ub + i + ST - 1, (i + ST - 1) % ST);
    cp_async_commit();
    if constexpr (G::kNeedX) {
      if (i + 1 < n_units) x_sums((i + 1) % ST);
    }
    compute(slot, static_cast<int64_t>(tile / pa.gx) * TOK);
    if (quad == pa.nk - 1 || i == n_units - 1) {
      finish(tile, seg_begin == 0 && quad == pa.nk - 1, first && seg_begin > 0 ? 0 : 1);
      clear();
      first = false;
      ++tile;
      quad = seg_begin = 0;
    } else {
      ++quad;
    }
  }
  cp_async_wait<0>();  // no copy outlives the block
}

// y for the tiles shared by several blocks: the partial of the tile's first block (its slot 1),
// then those of the following blocks (slot 0), in block order; + bias, + y when accumulating.
__global__ void quant_gemm_pipe_reduce_kernel(ops::MatmulParams p, QPipeArgs pa, int tok_per_tile, int bn) {
  pdl_wait();
  const int tiles = pa.units / pa.nk;
  const int64_t tile_elems = static_cast<int64_t>(tok_per_tile) * bn;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t u0 = static_cast<int64_t>(tile) * pa.nk;
    const int i0 = owner_block(u0, pa.units, pa.blocks), i1 = owner_block(u0 + pa.nk - 1, pa.units, pa.blocks);
    if (i0 == i1) continue;  // stored directly
    const int64_t row0 = static_cast<int64_t>(tile % pa.gx) * bn, m0 = static_cast<int64_t>(tile / pa.gx) * tok_per_tile;
    for (int64_t e = threadIdx.x; e < tile_elems; e += blockDim.x) {
      const int64_t tk = e / bn, lr = e % bn;
      if (row0 + lr >= p.n || m0 + tk >= p.m) continue;
      float v = pa.partials[(static_cast<int64_t>(i0) * 2 + 1) * tile_elems + e];
      for (int b = i0 + 1; b <= i1; ++b) v += pa.partials[static_cast<int64_t>(b) * 2 * tile_elems + e];
      store_y(p, row0 + lr, m0 + tk, v);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Host side: block shape, grid, launch.

struct PipeShape {
  int w, r, mt;
  int gx, gy, nk;
  int64_t units;
};

// Warps x row tiles: FRUGAL_QGEMM_W / FRUGAL_QGEMM_R or set_quant_gemm_tuning (shared with the
// first GEMM), else 4 x 2; the instantiated pairs are 4 x 2, 8 x 1 and 8 x 2.
PipeShape pipe_shape(const ops::MatmulParams& p) {
  int w = 0, r = 0;
  quant_gemm_tuning(&w, &r);
  PipeShape s{};
  s.mt = p.m <= 16 ? 2 : p.m <= 32 ? 4 : 8;
  s.w = w == 8 ? 8 : 4;
  s.r = s.w == 4 ? 2 : r == 2 ? 2 : 1;
  s.gx = static_cast<int>(ceil_div(p.n, 16 * s.w * s.r));
  s.gy = static_cast<int>(ceil_div(p.m, 8 * s.mt));
  s.nk = static_cast<int>(ceil_div(ops::quant_geometry(p.w.format, p.n, p.k).row_bytes / 16, 4));
  s.units = static_cast<int64_t>(s.gx) * s.gy * s.nk;
  return s;
}

template <QKind K, int W, int R, int MT, bool kOffsets>
cudaError_t prepare_k() {
  return raise_dynamic_smem_once<quant_gemm_pipe_kernel<K, W, R, MT, kOffsets>>(Pipe<K, W, R, MT, kOffsets>::kSmem);
}
template <QKind K, int W, int R, int MT, bool kOffsets>
int blocks_per_sm_k() {
  return cached_blocks_per_sm<quant_gemm_pipe_kernel<K, W, R, MT, kOffsets>>(W * 32, Pipe<K, W, R, MT, kOffsets>::kSmem, 1);
}
template <QKind K, int W, int R, int MT, bool kOffsets>
cudaError_t launch_k(const QPipeArgs& pa, cudaStream_t stream) {
  using G = Pipe<K, W, R, MT, kOffsets>;
  if (const cudaError_t e = prepare_k<K, W, R, MT, kOffsets>(); e != cudaSuccess) return e;
  return launch_kernel(quant_gemm_pipe_kernel<K, W, R, MT, kOffsets>, dim3(pa.blocks), dim3(W * 32), G::kSmem, stream, pa);
}

// What to do with one instantiation, chosen from the shape and the format at run time.
enum class Op { kPrepare, kBlocksPerSm, kLaunch };
struct OpArgs {
  const QPipeArgs* pa;
  cudaStream_t stream;
  int* out;
};

template <QKind K, int W, int R, int MT, bool kOffsets>
cudaError_t run_k(Op op, const OpArgs& o) {
  switch (op) {
    case Op::kPrepare: return prepare_k<K, W, R, MT, kOffsets>();
    case Op::kBlocksPerSm: *o.out = blocks_per_sm_k<K, W, R, MT, kOffsets>(); return cudaSuccess;
    case Op::kLaunch: return launch_k<K, W, R, MT, kOffsets>(*o.pa, o.stream);
  }
  return cudaErrorInvalidValue;
}
template <QKind K, int MT, bool kOffsets>
cudaError_t run_wr(Op op, const OpArgs& o, int w, int r) {
  if (w == 4) return run_k<K, 4, 2, MT, kOffsets>(op, o);
  if (r == 2) return run_k<K, 8, 2, MT, kOffsets>(op, o);
  return run_k<K, 8, 1, MT, kOffsets>(op, o);
}
template <QKind K, bool kOffsets>
cudaError_t run_mt(Op op, const OpArgs& o, int w, int r, int mt) {
  if (mt == 2) return run_wr<K, 2, kOffsets>(op, o, w, r);
  if (mt == 4) return run_wr<K, 4, kOffsets>(op, o, w, r);
  return run_wr<K, 8, kOffsets>(op, o, w, r);
}
cudaError_t run(Op op, const OpArgs& o, ops::WeightScheme scheme, bool offsets, int w, int r, int mt) {
  switch (scheme) {
    case ops::WeightScheme::kInt4:
      return offsets ? run_mt<QKind::kInt4, true>(op, o, w, r, mt) : run_mt<QKind::kInt4, false>(op, o, w, r, mt);
    case ops::WeightScheme::kInt8:
      return offsets ? run_mt<QKind::kInt8, true>(op, o, w, r, mt) : run_mt<QKind::kInt8, false>(op, o, w, r, mt);
    case ops::WeightScheme::kFp8: return run_mt<QKind::kFp8, false>(op, o, w, r, mt);
    default: break;
  }
  return cudaErrorInvalidValue;
}

// P: resident blocks, fewer when a block would get under FRUGAL_QGEMM_UNITS (default 4) k steps.
int64_t pipe_blocks(const ops::MatmulParams& p, const PipeShape& s, int n_sms) {
  static const int min_units = std::max(1, env_int("FRUGAL_QGEMM_UNITS", 4));
  int per_sm = 1;
  const OpArgs o{nullptr, nullptr, &per_sm};
  if (run(Op::kBlocksPerSm, o, p.w.format.scheme, p.w.format.zero == ops::ZeroPoint::kOffset, s.w, s.r, s.mt) !=
      cudaSuccess)
    per_sm = 1;
  const int64_t resident = static_cast<int64_t>(std::max(1, per_sm)) * std::max(1, n_sms);
  return std::max<int64_t>(1, std::min(resident, ceil_div(s.units, min_units)));
}

int tok_per_tile(const PipeShape& s) { return 8 * s.mt; }
int rows_per_tile(const PipeShape& s) { return 16 * s.w * s.r; }

}  // namespace

// Splits as the backend sees them: 1 = one block per tile (no partials), else P blocks.
int quant_gemm_pipe_splits(const ops::MatmulParams& p, int n_sms) {
  const PipeShape s = pipe_shape(p);
  const int64_t blocks = pipe_blocks(p, s, n_sms), tiles = static_cast<int64_t>(s.gx) * s.gy;
  return blocks == tiles || blocks <= 1 ? 1 : static_cast<int>(blocks);
}

size_t quant_gemm_pipe_scratch_bytes(const ops::MatmulParams& p, int splits) {
  if (splits <= 1) return 0;
  const PipeShape s = pipe_shape(p);
  return static_cast<size_t>(splits) * 2 * static_cast<size_t>(tok_per_tile(s)) * static_cast<size_t>(rows_per_tile(s)) *
         sizeof(float);
}

cudaError_t launch_quant_gemm_pipe(const ops::MatmulParams& p, int splits, void* partials, cudaStream_t stream) {
  if (p.w.format.layout != ops::WeightLayout::kOutIn) return cudaErrorInvalidValue;  // row-major codes only
  if (p.m * p.n == 0) return cudaSuccess;
  if (splits < 1 || (splits > 1 && partials == nullptr)) return cudaErrorInvalidValue;
  const PipeShape s = pipe_shape(p);
  const int64_t tiles = static_cast<int64_t>(s.gx) * s.gy;
  if (s.units > INT32_MAX / 2) return cudaErrorInvalidValue;
  QPipeArgs pa{gemv_args(p), s.gx, s.nk, static_cast<int>(s.units), static_cast<int>(splits == 1 ? tiles : splits),
               static_cast<float*>(partials)};
  if (pa.blocks > pa.units) pa.blocks = pa.units;
  const OpArgs o{&pa, stream, nullptr};
  const bool offsets = p.w.format.zero == ops::ZeroPoint::kOffset;
  const cudaError_t err = run(Op::kLaunch, o, p.w.format.scheme, offsets, s.w, s.r, s.mt);
  if (err != cudaSuccess || splits == 1) return err;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(tiles, 132 * 8));
  return launch_kernel(quant_gemm_pipe_reduce_kernel, dim3(blocks), dim3(256), 0, stream, p, pa, tok_per_tile(s),
                       rows_per_tile(s));
}

// Raises every instantiation's shared-memory limit and caches its occupancy, outside any capture.
// Best effort: a shape this GPU cannot hold fails at its launch (the error is cached), not here.
cudaError_t prepare_quant_gemm_pipe() {
  int sink = 0;
  const OpArgs o{nullptr, nullptr, &sink};
  for (ops::WeightScheme scheme : {ops::WeightScheme::kInt4, ops::WeightScheme::kInt8, ops::WeightScheme::kFp8})
    for (bool offsets : {false, true}) {
      if (offsets && scheme == ops::WeightScheme::kFp8) continue;
      for (int mt : {2, 4, 8})
        for (int wr : {0, 1, 2}) {
          const int w = wr == 0 ? 4 : 8, r = wr == 1 ? 1 : 2;
          (void)run(Op::kPrepare, o, scheme, offsets, w, r, mt);
          (void)run(Op::kBlocksPerSm, o, scheme, offsets, w, r, mt);
        }
    }
  (void)cudaGetLastError();
  return cudaSuccess;
}

}  // namespace frugal::cuda
