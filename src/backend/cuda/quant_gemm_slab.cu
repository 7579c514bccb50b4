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
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

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


// FRUGAL_QSLAB_SPLITS="NxK:S[,NxK:S...]", an A/B knob: the slab GEMM of an n x k weight plans S
// k slices (at least the fewest whose x fits) instead of the cost's choice below, so one build can
// time each split count of one shape in the step (e.g. the 7B gate_up, 37888x3584, at 16 tokens:
// the cost picks 4 slices, whose f32 partials are 28% of its codes' bytes). 0: none forced.
// Measured (H100, 2026-12-08): no forced count beat the cost's choice at 16 or 64 tokens.
int64_t forced_splits(const ops::MatmulParams& p) {
  struct Entry {
    int64_t n, k, splits;
  };
  static const std::vector<Entry> entries = [] {
    std::vector<Entry> out;
    const char* e = std::getenv("FRUGAL_QSLAB_SPLITS");
    for (const char* c = e; c != nullptr && *c != '\0';) {
      long long n = 0, k = 0, sp = 0;
      int used = 0;
      const char* end = std::strchr(c, ',');
      const int len = static_cast<int>(end ? end - c : std::strlen(c));
      if (std::sscanf(c, "%lldx%lld:%lld%n", &n, &k, &sp, &used) == 3 && used == len && n > 0 && k > 0 && sp > 0)
        out.push_back({n, k, sp});
      else  // an A/B knob read once: say which entry is not one, rather than time the default unawares
        std::fprintf(stderr, "frugal: FRUGAL_QSLAB_SPLITS: ignoring '%.*s' (want NxK:S, e.g. 37888x3584:2)\n", len, c);
      c = end;
      if (c != nullptr) ++c;
    }
    return out;
  }();
  for (const Entry& e : entries)
    if (e.n == p.n && e.k == p.k) return e.splits;
  return 0;
}

// The slices, row bands and groups per block of a launch: k cut into the fewest slices whose x
// fits the shared memory a block may take at the kernel's register-limited residency (at most
// slab_smem_max() or FRUGAL_QSLAB_SMEM_KB), or more where that spreads the work more evenly (the
// cost below); row bands so the grid is about one wave of resident blocks, each walker (a warp,
// or a warpgroup in the wgmma kernel) owning whole row groups (groups per block a multiple of the
// walkers).
struct SlicePlan {
  int64_t n_quads = 1, groups = 1;  // quads of k, row groups of n
  int walkers = kSlabWarps;         // row-group walkers a block
  size_t per_quad = 1, slack = 0;   // shared bytes a quad of a slice, and a block's fixed extra
  int reg_per_sm = 1;               // blocks an SM by registers and warps
  int64_t gy = 1;                   // token passes
  double unit_bytes = 1024;         // code bytes one walker streams in one unit (a row group's quad)
  double stage_units = 0;           // a block's cost of staging a quad of x, in units
};
void plan_slices(const ops::MatmulParams& p, int n_sms, const SlicePlan& in, SlabShape* s) {
  const size_t kSmPerSm = quant_device().smem_per_sm, kReserved = 1024;  // per SM; the driver's per block
  const size_t cap = static_cast<size_t>(std::clamp(smem_cap_kb(), 8, 200)) * 1024;
  const size_t budget = std::min({cap, slab_smem_max(), kSmPerSm / static_cast<size_t>(in.reg_per_sm) - kReserved});
  const int64_t q_max = std::max<int64_t>(1, static_cast<int64_t>(budget > in.slack ? (budget - in.slack) / in.per_quad : 0));
  const int64_t splits_min = ceil_div(in.n_quads, q_max);
  auto resident = [&](int64_t sp) {
    if (g_slab_blocks > 0) return static_cast<int64_t>(g_slab_blocks);
    const size_t smem = static_cast<size_t>(ceil_div(in.n_quads, sp)) * in.per_quad + in.slack;
    const int64_t by_smem = static_cast<int64_t>(kSmPerSm / (smem + kReserved));
    return std::max<int64_t>(1, std::min<int64_t>(in.reg_per_sm, by_smem)) * std::max(1, n_sms);
  };
  const int64_t bands_max = ceil_div(in.groups, in.walkers);  // every walker at least one group
  // For a slice count: the row bands (about one wave of blocks with the slices and token passes),
  // groups per block (a multiple of the walkers), and a cost in "unit times" (one unit: a
  // walker's row group over one quad; all resident walkers streaming one unit each): the units a
  // walker walks in series, a block's start (the slice's x staged, the first round trip: ~4
  // units, plus stage_units a quad), and the f32 partials written and read back; times the waves
  // where the blocks outnumber the resident ones. The fewest slices whose x fits, or more (each
  // at least 4 quads) where they cost less.
  struct Plan {
    int64_t splits, qps, gx, gpb;
    double cost;
  };
  auto plan = [&](int64_t sp) {
    Plan pl{};
    pl.qps = ceil_div(in.n_quads, sp);
    pl.splits = ceil_div(in.n_quads, pl.qps);
    const int64_t res = resident(pl.splits);
    const int64_t gx = std::clamp<int64_t>(res / (pl.splits * in.gy), 1, bands_max);
    pl.gpb = in.walkers * ceil_div(in.groups, gx * in.walkers);
    pl.gx = ceil_div(in.groups, pl.gpb);
    const int64_t blocks = pl.gx * pl.splits * in.gy, waves = ceil_div(blocks, res);
    const double walkers = static_cast<double>(std::min<int64_t>(res, blocks)) * in.walkers;
    const double unit_bytes = in.unit_bytes * walkers;  // bytes all walkers stream in one unit time
    const double partial = pl.splits > 1 ? 8.0 * static_cast<double>(pl.splits) * static_cast<double>(p.m * p.n) / unit_bytes : 0;
    const double start = 4.0 + in.stage_units * static_cast<double>(pl.qps);
    pl.cost = static_cast<double>(waves) * (static_cast<double>(pl.gpb / in.walkers) * static_cast<double>(pl.qps) + start) + partial;
    return pl;
  };
  Plan best = plan(splits_min);
  const int64_t sp_max = std::max(splits_min, in.n_quads / 4);
  for (int64_t sp = splits_min + 1; sp <= sp_max; ++sp) {
    const Plan pl = plan(sp);
    if (pl.cost < best.cost) best = pl;
  }
  if (const int64_t forced = forced_splits(p); forced > 0) best = plan(std::max(splits_min, forced));
  s->gpb = static_cast<int>(std::min<int64_t>(best.gpb, INT32_MAX / 2));
  s->gx = best.gx;
  s->gy = in.gy;
  s->qps = static_cast<int>(best.qps);
  s->splits = static_cast<int>(best.splits);
  s->smem = static_cast<size_t>(best.qps) * in.per_quad + in.slack;
}

int64_t n_quads_of(const ops::MatmulParams& p) {
  return ceil_div(ops::quant_geometry(p.w.format, p.n, p.k).row_bytes / 16, 4);
}

// The launch shape of the mma.sync kernel: token tiles as the other GEMMs, (U, R) by the tuning,
// slices by plan_slices.
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
  SlicePlan in;
  in.n_quads = n_quads_of(p);
  in.groups = ceil_div(p.n, 16 * s.r);
  in.per_quad = slab_quad_bytes(int4, s.mt, need_x);
  in.gy = ceil_div(p.m, 8 * s.mt);
  in.unit_bytes = 1024.0 * s.r;
  const OpArgs probe{nullptr, dim3(), 0, nullptr, &in.reg_per_sm};
  if (run(Op::kBlocksPerSm, probe, p, s) != cudaSuccess || in.reg_per_sm < 1) {
    in.reg_per_sm = 1;
    (void)cudaGetLastError();  // the probe's own error, said again by the launch if it persists
  }
  plan_slices(p, n_sms, in, &s);
  return s;
}

// set_quant_slab_wg's values (-1 / 0: FRUGAL_QSLAB_WG, default 1 / FRUGAL_QSLAB_WG_MIN, default 12).
int g_slab_wg = -1, g_slab_wg_min = 0;

// The warpgroup kernel takes int4 codes (either zero-point mode, either layout) from kWgMinM
// (12) tokens, on sm_90 builds that carry sm_90a code. A pass is 16, 32, 48 or 64 tokens (the
// fewest that hold m, else 64), all computed, where the mma.sync kernel skips its 8-token tiles
// past m. Measured on an H100 (2026-12-06, session 55, int4 gate 18944 x 3584): 16 tokens a pass
// 25.4 us at m = 9 and at 16, the mma.sync kernel 24.7 / 29.5 (so from about 11 tokens); at m =
// 32 / 64, 34.6 / 46.1 against 42.4 / 60.5; 7B int4 decode at 16 / 32 sequences +7.3% / +15.5%.
// At 33..40 tokens 64 a pass lost (session 54: 33 sequences -3.5% on an H200); 48 a pass fills
// 33..48 (session 56, H100: gate at m = 40 / 48 39.5 / 40.9 us against mma.sync's 48.4 / 52.3,
// 7B int4 at 40 sequences +21%). A threshold set by FRUGAL_QSLAB_WG_MIN or set_quant_slab_wg
// replaces kWgMinM.
bool wg_applies(const ops::MatmulParams& p) {
#if defined(FRUGAL_HAVE_SM90A) && FRUGAL_HAVE_SM90A
  constexpr int64_t kWgMinM = 12;
  static const int env = env_int("FRUGAL_QSLAB_WG", 1);
  static const int env_min = env_int("FRUGAL_QSLAB_WG_MIN", 0);
  if ((g_slab_wg >= 0 ? g_slab_wg : env) == 0 || quant_device().major != 9) return false;
  const ops::WeightFormat& f = p.w.format;
  if (f.scheme != ops::WeightScheme::kInt4 || f.act_order) return false;
  const int set_min = g_slab_wg_min > 0 ? g_slab_wg_min : env_min;  // <= 0: none set
  return p.m >= (set_min > 0 ? set_min : kWgMinM);
#else
  (void)p;
  return false;
#endif
}

int wg_tokens(int64_t m) { return m <= 16 ? 16 : m <= 32 ? 32 : m <= 48 ? 48 : 64; }

cudaError_t run_wg(Op op, const OpArgs& o, const ops::MatmulParams& p, int nt) {
  const bool z = p.w.format.zero == ops::ZeroPoint::kOffset;
  switch (nt) {
    case 16: return z ? slab::run_wg<16, true>(op, o) : slab::run_wg<16, false>(op, o);
    case 32: return z ? slab::run_wg<32, true>(op, o) : slab::run_wg<32, false>(op, o);
    case 48: return z ? slab::run_wg<48, true>(op, o) : slab::run_wg<48, false>(op, o);
    default: return z ? slab::run_wg<64, true>(op, o) : slab::run_wg<64, false>(op, o);
  }
}

// The warpgroup kernel's shape: NT tokens a pass (s.mt = NT / 8), 64-row groups walked by the
// two warpgroups; staging a quad of x (4-byte copies, NT / 4 a thread) costs about NT / 64 of a
// warpgroup's quad of codes.
SlabShape wg_shape(const ops::MatmulParams& p, int n_sms) {
  SlabShape s;
  const int nt = wg_tokens(p.m);
  s.mt = nt / 8;
  SlicePlan in;
  in.n_quads = n_quads_of(p);
  in.groups = ceil_div(p.n, slab::kWgRows);
  in.walkers = slab::kWgWarps / 4;
  in.per_quad = slab::wg_quad_bytes(nt);
  in.slack = slab::kWgAlignSlack;
  in.gy = ceil_div(p.m, nt);
  in.unit_bytes = 64.0 * slab::kWgRows;
  in.stage_units = nt / 64.0;
  const OpArgs probe{nullptr, dim3(), 0, nullptr, &in.reg_per_sm};
  if (run_wg(Op::kBlocksPerSm, probe, p, nt) != cudaSuccess || in.reg_per_sm < 1) {
    in.reg_per_sm = 1;
    (void)cudaGetLastError();
  }
  plan_slices(p, n_sms, in, &s);
  return s;
}

}  // namespace

void set_quant_slab_limits(int blocks, int smem_kb) {
  g_slab_blocks = std::max(0, blocks);
  g_slab_smem_kb = std::max(0, smem_kb);
}

void set_quant_slab_chains(int chains) { g_slab_chains = std::max(0, chains); }

void set_quant_slab_wg(int on, int min_m) {
  g_slab_wg = on < 0 ? -1 : on != 0;
  g_slab_wg_min = std::max(0, min_m);
}

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
  if (quant_device().major == 9) {
    ops::MatmulParams p{};
    p.w.format.scheme = ops::WeightScheme::kInt4;
    for (bool offsets : {false, true}) {
      p.w.format.zero = offsets ? ops::ZeroPoint::kOffset : ops::ZeroPoint::kNone;
      for (int nt : {16, 32, 64}) (void)run_wg(Op::kBlocksPerSm, o, p, nt);
    }
  }
  (void)cudaGetLastError();
  return cudaSuccess;
}

int quant_gemm_slab_splits(const ops::MatmulParams& p, int n_sms) {
  return (wg_applies(p) ? wg_shape(p, n_sms) : slab_shape(p, n_sms)).splits;
}

size_t quant_gemm_slab_scratch_bytes(const ops::MatmulParams& p, int splits) {
  return splits > 1 ? static_cast<size_t>(splits) * static_cast<size_t>(p.m * p.n) * sizeof(float) : 0;
}

namespace {
// Re-cuts the planned shape into `splits` slices (what a caller asks for other than the plan:
// 1 inside a capture without scratch); false where they do not fit the shared memory or the
// count is not one a slicing gives.
bool resize_slices(const ops::MatmulParams& p, int splits, size_t per_quad, size_t slack, SlabShape* s, bool* fits) {
  const int64_t n_quads = n_quads_of(p), qps = ceil_div(n_quads, splits);
  *fits = static_cast<size_t>(qps) * per_quad + slack <= slab_smem_max();
  if (!*fits || ceil_div(n_quads, qps) != splits) return false;
  s->qps = static_cast<int>(qps);
  s->splits = splits;
  s->smem = static_cast<size_t>(qps) * per_quad + slack;
  return true;
}

cudaError_t launch_shape(const ops::MatmulParams& p, const SlabShape& s, bool wg, void* partials, cudaStream_t stream,
                         bool reduce) {
  const QSlabArgs sa{gemv_args(p), s.qps, s.gpb, static_cast<float*>(partials)};
  const OpArgs o{&sa, dim3(static_cast<unsigned>(s.gx), static_cast<unsigned>(s.gy), static_cast<unsigned>(s.splits)), s.smem,
                 stream, nullptr};
  const cudaError_t err = wg ? run_wg(Op::kLaunch, o, p, 8 * s.mt) : run(Op::kLaunch, o, p, s);
  if (err != cudaSuccess || s.splits == 1 || !reduce) return err;
  return launch_quant_gemm_reduce(p, static_cast<const float*>(partials), s.splits, stream);
}
}  // namespace

// splits: the slices of the plan (what quant_gemm_slab_splits returned), or another count (1:
// what a capture without scratch runs) whose slices fit the shared memory; where they do not fit
// the warpgroup kernel, the mma.sync kernel takes them, and one slice that fits neither (long k at
// many tokens) runs the GEMV instead, which needs no scratch.
cudaError_t launch_quant_gemm_slab(const ops::MatmulParams& p, int splits, void* partials, cudaStream_t stream,
                                   bool reduce) {
  if (p.m * p.n == 0) return cudaSuccess;
  if (splits < 1 || (splits > 1 && partials == nullptr)) return cudaErrorInvalidValue;
  bool fits = true;
  if (wg_applies(p)) {
    SlabShape s = wg_shape(p, quant_device().sms);
    if (splits == s.splits || resize_slices(p, splits, slab::wg_quad_bytes(8 * s.mt), slab::kWgAlignSlack, &s, &fits))
      return launch_shape(p, s, true, partials, stream, reduce);
  }
  SlabShape s = slab_shape(p, quant_device().sms);
  if (splits != s.splits && !resize_slices(p, splits, s.smem / static_cast<size_t>(s.qps), 0, &s, &fits)) {
    if (splits == 1 && !fits) return launch_quant_gemv(p, stream);
    return cudaErrorInvalidValue;
  }
  return launch_shape(p, s, false, partials, stream, reduce);
}

}  // namespace frugal::cuda
