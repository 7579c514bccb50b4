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
// This file plans and launches; the kernel is in quant_gemm_slab.cuh, instantiated per format
// in quant_gemm_slab_<format>.cu.
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "backend/cuda/quant_gemm_slab.cuh"

namespace frugal::cuda {
namespace {

using namespace qmma;
using slab::kSlabWarps;
using slab::Op;
using slab::OpArgs;
using slab::QSlabArgs;
using slab::SlabShape;
using slab::slab_quad_bytes;
using slab::slab_smem_max;

cudaError_t run(Op op, const OpArgs& o, const ops::MatmulParams& p, const SlabShape& s) {
  const bool offsets = p.w.format.zero == ops::ZeroPoint::kOffset;
  switch (p.w.format.scheme) {
    case ops::WeightScheme::kInt4:
      return offsets ? slab::run_mt<QKind::kInt4, true>(op, o, s) : slab::run_mt<QKind::kInt4, false>(op, o, s);
    case ops::WeightScheme::kInt8:
      return offsets ? slab::run_mt<QKind::kInt8, true>(op, o, s) : slab::run_mt<QKind::kInt8, false>(op, o, s);
    case ops::WeightScheme::kFp8: return slab::run_mt<QKind::kFp8, false>(op, o, s);
    default: break;
  }
  return cudaErrorInvalidValue;
}


// set_quant_slab_limits' values (0: the environment's, else the default).
int g_slab_blocks = 0, g_slab_smem_kb = 0;
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
                                   bool reduce) {
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
  const QSlabArgs sa{gemv_args(p), s.qps, s.gpb, static_cast<float*>(partials)};
  const OpArgs o{&sa, dim3(static_cast<unsigned>(s.gx), static_cast<unsigned>(s.gy), static_cast<unsigned>(s.splits)), s.smem,
                 stream, nullptr};
  const cudaError_t err = run(Op::kLaunch, o, p, s);
  if (err != cudaSuccess || s.splits == 1 || !reduce) return err;
  return launch_quant_gemm_reduce(p, static_cast<const float*>(partials), s.splits, stream);
}

}  // namespace frugal::cuda
