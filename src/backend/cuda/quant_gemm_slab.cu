// The slab GEMM: the weight-only quantized GEMM (W4A16 int4, W8A16 int8 / fp8) for decode batches
// of 9..64 tokens (any m; meant for m <= kQuantGemvMaxM), built on quant_gemv.cu's per-quad math:
// exact bf16 codes as the A operand of mma.sync m16n8k16, x as B, the group scale and offset
// applied once per quad to the f32 partial.
//
// Why (docs/perf/2026-12-05-session38.md has the accounting): at m = 16..64 the GEMV and both
// earlier GEMMs move far more bytes of x than of weights.
//  - The GEMV gives each 16-row tile its own block, whose warps split k: every block reads all
//    of x, m x k x 2 bytes, for 16 x k / 2 bytes of int4 codes, so x is m / 4 times the codes
//    (gate 18944 x 3584 at m = 16: 136 MB of x through L2 for 34 MB of codes; measured 38.8 us,
//    ~3.5 TB/s of L2 -> SM traffic; at m = 64 101.8 us, 5.3 TB/s).
//  - The one-quad GEMM (quant_gemv.cu) and the pipelined one (quant_gemm_pipe.cu) share one quad
//    of x between 128 rows, and wait at a block barrier every quad (every 128 codes).
// Here a block stages the x of a whole k slice (ks quads, every token of the pass) into shared
// memory once, with one barrier, and its W warps then walk many row groups over that slice:
// each warp streams its codes from global memory U quads deep (double-buffered in registers, as
// the GEMV does) with no barrier at all. The x bytes per block are amortized over
// groups_per_block x 16 R rows instead of 16 or 128, and the slice's sums of x (int4's +128
// bias, zero points) are computed once per block, by the all-ones mma the GEMV uses (the same
// value bit for bit), into shared memory.
//  - Splits: k is cut into slices that fit the shared-memory budget; each (row band, slice)
//    block writes an f32 partial [slice][m][n], added in slice order by quant_gemm_reduce
//    (deterministic). One slice: y directly.
//  - The first U units' codes are requested before the PDL wait (weights depend on no kernel).
// Layout of a unit: (row group, quad); a row group is R row tiles of 16 rows (R = 2 shares
// every x fragment read from shared memory between two tiles: at m = 64 one tile would need
// ~170 B/clk of shared memory per SM at the mma rate, two ~85, under the 128 available).
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

constexpr int kSlabWarps = 8;
// The most shared memory a block asks for (H100 / H200 allow 227 KB per block, A100 163 KB:
// slab_smem_max() takes the smaller of this and the device's).
constexpr size_t kSlabSmemCap = 200 * 1024;

size_t slab_smem_max() { return std::min(kSlabSmemCap, quant_device().smem_per_block); }

struct QSlabArgs {
  QGemvArgs g;
  int quads_per_split;   // quads of k per grid.z slice (the shared-memory layout's stride)
  int groups_per_block;  // row groups per block along grid.x
  float* partials;       // [gridDim.z][m][n] when gridDim.z > 1
  uint32_t* tickets;     // [gridDim.y][row groups] (zero; left zero), or nullptr: the reduce kernel
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
  auto load_batch = [&](uint4 (&va)[U][R], uint4 (&vb)[U][R]) {
    const bool live = loaded < n_batches;
    const int len = min(U, ks - lq);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int chunk = (qb + lq + u) * 4 + q;
      const bool in = live && u < len && chunk < n_chunks;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        va[u][r] = in ? load_stream16(row_codes16(a, row_of(lg, r, 0)) + (qb + lq + u) * quad_step16(a) + q) : make_uint4(0, 0, 0, 0);
        vb[u][r] = in ? load_stream16(row_codes16(a, row_of(lg, r, 1)) + (qb + lq + u) * quad_step16(a) + q) : make_uint4(0, 0, 0, 0);
      }
    }
    ++loaded;
    lq += len;
    if (lq == ks) {
      lq = 0;
      lg += W;
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
    const bool tickets = split && sa.tickets != nullptr;
    each_output(group, [&](float& a, int64_t row, int64_t tok) {
      const float v = a;
      if (!tickets) a = 0.f;
      if (row >= p.n || tok >= p.m) return;
      if (split) {
        part_out[tok * p.n + row] = v;
      } else {
        store_y(p, row, tok, v);
      }
    });
    if (!tickets) return;
    // Tickets: this warp's slice of the group is written; the warp that takes the last ticket
    // (the group's other slices all written and fenced before theirs) adds every slice in slice
    // order, its own from registers (the value it stored), and stores y: the reduce kernel's
    // sums, bit for bit. It leaves the ticket at zero for the next launch.
    __threadfence();
    __syncwarp();
    uint32_t* ticket = sa.tickets + static_cast<int64_t>(blockIdx.y) * n_groups + group;
    uint32_t taken = 0;
    if (lane == 0) taken = atomicAdd(ticket, 1u);
    taken = __shfl_sync(0xffffffffu, taken, 0);
    const bool last = taken == gridDim.z - 1;
    if (last) __threadfence();  // the other slices' stores, seen before this warp's loads
    const int64_t slice = p.m * p.n;
    const int zs = static_cast<int>(gridDim.z), zme = static_cast<int>(blockIdx.z);
    each_output(group, [&](float& a, int64_t row, int64_t tok) {
      const float own = a;
      a = 0.f;
      if (!last || row >= p.n || tok >= p.m) return;
      const float* at = sa.partials + tok * p.n + row;
      float v = zme == 0 ? own : __ldcg(at);
      for (int z = 1; z < zs; ++z) v += z == zme ? own : __ldcg(at + z * slice);
      store_y(p, row, tok, v);
    });
    if (last && lane == 0) *ticket = 0u;
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
#pragma unroll
      for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int s = 0; s < S; ++s) {
          dequant_step<K>(va[u][r], s, A[r][s][0], A[r][s][2]);
          dequant_step<K>(vb[u][r], s, A[r][s][1], A[r][s][3]);
        }
        sc_a[r] = __ldg(sa_p[r] + g);
        sc_b[r] = __ldg(sb_p[r] + g);
        of_a[r] = kOffsets ? __ldg(za_p[r] + g) : 0.f;
        of_b[r] = kOffsets ? __ldg(zb_p[r] + g) : 0.f;
        if constexpr (kBias128) {
          of_a[r] -= 128.f * sc_a[r];
          of_b[r] -= 128.f * sc_b[r];
        }
      }
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
cudaError_t run(Op op, const OpArgs& o, const ops::MatmulParams& p, const SlabShape& s) {
  const bool offsets = p.w.format.zero == ops::ZeroPoint::kOffset;
  switch (p.w.format.scheme) {
    case ops::WeightScheme::kInt4:
      return offsets ? run_mt<QKind::kInt4, true>(op, o, s) : run_mt<QKind::kInt4, false>(op, o, s);
    case ops::WeightScheme::kInt8:
      return offsets ? run_mt<QKind::kInt8, true>(op, o, s) : run_mt<QKind::kInt8, false>(op, o, s);
    case ops::WeightScheme::kFp8: return run_mt<QKind::kFp8, false>(op, o, s);
    default: break;
  }
  return cudaErrorInvalidValue;
}

// set_quant_slab_limits' values (0: the environment's, else the default).
int g_slab_blocks = 0, g_slab_smem_kb = 0;
// set_quant_slab_tickets' value (-1: FRUGAL_QSLAB_TICKETS, else off).
int g_slab_tickets = -1;

bool slab_tickets_on() {
  static const bool env = env_int("FRUGAL_QSLAB_TICKETS", 0) != 0;
  return g_slab_tickets >= 0 ? g_slab_tickets == 1 : env;
}
// set_quant_slab_chains' value (0: FRUGAL_QSLAB_CHAINS, else 2).
int g_slab_chains = 0;

int slab_chains() {
  static const int env = env_int("FRUGAL_QSLAB_CHAINS", 2);
  return (g_slab_chains > 0 ? g_slab_chains : env) == 1 ? 1 : 2;
}

int smem_cap_kb() {
  static const int kb = [] {
    const char* e = std::getenv("FRUGAL_QSLAB_SMEM_KB");
    return e ? std::atoi(e) : 200;
  }();
  return g_slab_smem_kb > 0 ? g_slab_smem_kb : kb;
}


// The launch shape: token tiles as the other GEMMs; k cut into the fewest slices whose x fits the
// shared memory a block may take at the kernel's register-limited residency (at most
// slab_smem_max() or FRUGAL_QSLAB_SMEM_KB), or more where that spreads the work more evenly (the
// plan's cost below); row bands so the grid is about one wave of resident blocks, each warp
// owning whole row groups (groups per block a multiple of the warps).
SlabShape slab_shape(const ops::MatmulParams& p, int n_sms) {
  SlabShape s;
  s.mt = p.m <= 8 ? 1 : p.m <= 16 ? 2 : p.m <= 32 ? 4 : 8;
  // FRUGAL_QSLAB_MT=1|2|4: at most that many 8-token tiles a pass (more passes, grid.y; each reads
  // the codes again, through L2 when the passes run together, for less x a quad: fewer slices).
  static const int mt_cap = env_int("FRUGAL_QSLAB_MT", 0);
  if (mt_cap == 1 || mt_cap == 2 || mt_cap == 4) s.mt = std::min(s.mt, mt_cap);
  s.ch = slab_chains();
  int tu = 0, tr = 0;
  quant_gemm_tuning(&tu, &tr);
  if (s.mt <= 2) {
    s.r = 1;
    s.u = tu == 4 ? 4 : 2;
  } else {
    const bool alt = tu == 2 && tr == 1;
    s.u = alt ? 2 : 1;
    s.r = alt ? 1 : 2;
  }
  const ops::WeightFormat& f = p.w.format;
  const bool int4 = f.scheme == ops::WeightScheme::kInt4;
  const bool need_x = int4 || f.zero == ops::ZeroPoint::kOffset;
  const int tok = 8 * s.mt;
  s.gy = ceil_div(p.m, tok);
  const size_t per_quad = slab_quad_bytes(int4, s.mt, need_x);
  const int64_t n_quads = ceil_div(ops::quant_geometry(f, p.n, p.k).row_bytes / 16, 4);

  int reg_per_sm = 1;
  const OpArgs probe{nullptr, dim3(), 0, nullptr, &reg_per_sm};
  if (run(Op::kBlocksPerSm, probe, p, s) != cudaSuccess || reg_per_sm < 1) {
    reg_per_sm = 1;
    (void)cudaGetLastError();  // the probe's own error, said again by the launch if it persists
  }
  const size_t kSmPerSm = quant_device().smem_per_sm, kReserved = 1024;  // per SM; the driver's per block
  const size_t cap = static_cast<size_t>(std::clamp(smem_cap_kb(), 8, 200)) * 1024;
  const size_t budget = std::min({cap, slab_smem_max(), kSmPerSm / static_cast<size_t>(reg_per_sm) - kReserved});
  const int64_t q_max = std::max<int64_t>(1, static_cast<int64_t>(budget / per_quad));
  const int64_t splits_min = ceil_div(n_quads, q_max);
  auto resident = [&](int64_t sp) {
    if (g_slab_blocks > 0) return static_cast<int64_t>(g_slab_blocks);
    const size_t smem = static_cast<size_t>(ceil_div(n_quads, sp)) * per_quad;
    const int64_t by_smem = static_cast<int64_t>(kSmPerSm / (smem + kReserved));
    return std::max<int64_t>(1, std::min<int64_t>(reg_per_sm, by_smem)) * std::max(1, n_sms);
  };
  const int64_t groups = ceil_div(p.n, 16 * s.r);
  const int64_t bands_max = ceil_div(groups, kSlabWarps);  // every warp at least one group
  // For a slice count: the row bands (about one wave of blocks with the slices and token passes),
  // groups per block (a multiple of the warps), and a cost in "unit times" (one unit: a warp's R x
  // 16 rows x one quad; all resident warps streaming one unit each): the units a warp walks in
  // series, a block's start (the slice's x staged, the first round trip: ~4 units), and the f32
  // partials written and read back; times the waves where the blocks outnumber the resident ones.
  // The fewest slices whose x fits, or more (each at least 4 quads) where they cost less.
  struct Plan {
    int64_t splits, qps, gx, gpb;
    double cost;
  };
  auto plan = [&](int64_t sp) {
    Plan pl{};
    pl.qps = ceil_div(n_quads, sp);
    pl.splits = ceil_div(n_quads, pl.qps);
    const int64_t res = resident(pl.splits);
    const int64_t gx = std::clamp<int64_t>(res / (pl.splits * s.gy), 1, bands_max);
    pl.gpb = kSlabWarps * ceil_div(groups, gx * kSlabWarps);
    pl.gx = ceil_div(groups, pl.gpb);
    const int64_t blocks = pl.gx * pl.splits * s.gy, waves = ceil_div(blocks, res);
    const double warps = static_cast<double>(std::min<int64_t>(res, blocks)) * kSlabWarps;
    const double unit_bytes = 1024.0 * s.r * warps;  // bytes all warps stream in one unit time
    const double partial = pl.splits > 1 ? 8.0 * static_cast<double>(pl.splits) * static_cast<double>(p.m * p.n) / unit_bytes : 0;
    pl.cost = static_cast<double>(waves) * (static_cast<double>(pl.gpb / kSlabWarps) * static_cast<double>(pl.qps) + 4.0) + partial;
    return pl;
  };
  Plan best = plan(splits_min);
  const int64_t sp_max = std::max(splits_min, n_quads / 4);
  for (int64_t sp = splits_min + 1; sp <= sp_max; ++sp) {
    const Plan pl = plan(sp);
    if (pl.cost < best.cost) best = pl;
  }
  const int64_t qps = best.qps, splits = best.splits, gpb = best.gpb;
  s.gpb = static_cast<int>(std::min<int64_t>(gpb, INT32_MAX / 2));
  s.gx = best.gx;
  s.qps = static_cast<int>(qps);
  s.splits = static_cast<int>(splits);
  s.smem = static_cast<size_t>(qps) * per_quad;
  return s;
}

}  // namespace

void set_quant_slab_limits(int blocks, int smem_kb) {
  g_slab_blocks = std::max(0, blocks);
  g_slab_smem_kb = std::max(0, smem_kb);
}

void set_quant_slab_chains(int chains) { g_slab_chains = std::max(0, chains); }

void set_quant_slab_tickets(bool on) { g_slab_tickets = on ? 1 : 0; }

// Raises every instantiation's shared-memory limit and caches its occupancy, outside any capture.
cudaError_t prepare_quant_gemm_slab() {
  int sink = 0;
  const OpArgs o{nullptr, dim3(), 0, nullptr, &sink};
  for (ops::WeightScheme scheme : {ops::WeightScheme::kInt4, ops::WeightScheme::kInt8, ops::WeightScheme::kFp8})
    for (bool offsets : {false, true}) {
      if (offsets && scheme == ops::WeightScheme::kFp8) continue;
      ops::MatmulParams p{};
      p.w.format.scheme = scheme;
      p.w.format.zero = offsets ? ops::ZeroPoint::kOffset : ops::ZeroPoint::kNone;
      for (int mt : {1, 2, 4, 8})
        for (int alt : {0, 1})
          for (int ch : {1, 2}) {
            SlabShape s;
            s.mt = mt;
            s.ch = ch;
            s.u = mt <= 2 ? (alt ? 4 : 2) : (alt ? 2 : 1);
            s.r = mt <= 2 || alt ? 1 : 2;
            (void)run(Op::kBlocksPerSm, o, p, s);
          }
    }
  (void)cudaGetLastError();
  return cudaSuccess;
}

int quant_gemm_slab_splits(const ops::MatmulParams& p, int n_sms) { return slab_shape(p, n_sms).splits; }

size_t quant_gemm_slab_scratch_bytes(const ops::MatmulParams& p, int splits) {
  return splits > 1 ? static_cast<size_t>(splits) * static_cast<size_t>(p.m * p.n) * sizeof(float) : 0;
}

// splits: the slices of slab_shape (what quant_gemm_slab_splits returned), or another count
// (1: what a capture without scratch runs) whose slices fit the shared memory; one slice that
// does not fit (long k at many tokens) runs the GEMV instead, which needs no scratch.
cudaError_t launch_quant_gemm_slab(const ops::MatmulParams& p, int splits, void* partials, cudaStream_t stream,
                                   uint32_t* tickets) {
  if (p.m * p.n == 0) return cudaSuccess;
  if (splits < 1 || (splits > 1 && partials == nullptr)) return cudaErrorInvalidValue;
  SlabShape s = slab_shape(p, quant_device().sms);
  if (splits != s.splits) {
    const int64_t n_quads = ceil_div(ops::quant_geometry(p.w.format, p.n, p.k).row_bytes / 16, 4);
    const size_t per_quad = s.smem / static_cast<size_t>(s.qps);
    const int64_t qps = ceil_div(n_quads, splits);
    const bool fits = static_cast<size_t>(qps) * per_quad <= slab_smem_max();
    if (splits == 1 && !fits) return launch_quant_gemv(p, stream);
    if (ceil_div(n_quads, qps) != splits || !fits) return cudaErrorInvalidValue;
    s.qps = static_cast<int>(qps);
    s.splits = splits;
    s.smem = static_cast<size_t>(qps) * per_quad;
  }
  // Tickets where asked for and there are enough: one per (token pass, row group).
  const int64_t n_tickets = s.gy * ceil_div(p.n, 16 * s.r);
  uint32_t* const use_tickets = s.splits > 1 && tickets != nullptr && slab_tickets_on() && n_tickets <= kQuantGemmTickets ? tickets : nullptr;
  const QSlabArgs sa{gemv_args(p), s.qps, s.gpb, static_cast<float*>(partials), use_tickets};
  const OpArgs o{&sa, dim3(static_cast<unsigned>(s.gx), static_cast<unsigned>(s.gy), static_cast<unsigned>(s.splits)), s.smem,
                 stream, nullptr};
  const cudaError_t err = run(Op::kLaunch, o, p, s);
  if (err != cudaSuccess || s.splits == 1 || use_tickets != nullptr) return err;
  return launch_quant_gemm_reduce(p, static_cast<const float*>(partials), s.splits, stream);
}

}  // namespace frugal::cuda
