// The weight-only quantized GEMV for m <= 8 fed by the TMA engine (sm_90): the tile GEMV of
// quant_gemv.cu (2026-12-03 profile: 43% occupancy, half the issue slots busy, DRAM at 30% on the
// 7B int4 gate at m = 1) holds its codes in flight in registers, one or two 1 KB quads a warp, so
// its bytes in flight are capped by the register file: ~28 KB an SM, about what the H200's
// bandwidth-latency product asks for (32 B/ns an SM x ~1 us), with nothing to spare. Here the
// codes never pass through registers on their way in:
//   - A block is W consumer warps and one producer warp. It walks row tiles (16 rows; with the
//     silu epilogue 8 gate channels and their 8 up rows) blockIdx.x, + gridDim.x, ..., and each
//     tile's rows in segments of kSegBytes bytes (16 quads).
//   - The producer's lanes 0..15 each issue one cp.async.bulk of their row's segment into a
//     stage of a shared-memory ring (stages x 16 rows x kSegBytes), signalling the stage's
//     "full" mbarrier by transaction bytes; it refills a stage when the W consumers have
//     arrived on its "empty" barrier. The ring runs across tile boundaries. The weights depend
//     on no earlier kernel, so the producer starts before the PDL wait, under the previous
//     kernel's tail. The copies carry an L2 evict-first policy (weights are read once a step).
//   - Consumer warp w takes quads w, w + W, ... of each segment: lane (g, q) reads chunk q of
//     rows g and g + 8 from the stage (rows kPitch bytes apart, so a quarter-warp's 16-byte
//     reads fall on distinct banks), releases the stage, and does the tile GEMV's math: exact
//     bf16 codes as mma.sync A, x (the <= 8 tokens) as B, the group scale and offset on the f32
//     partial, the offset's sum of x from the all-ones mma. x and the scales are loaded when a
//     quad is multiplied, as the tile GEMV loads them: registers bound the resident consumers
//     (bulk_min_blocks caps them), and the consumers hide each quad's latency.
//   - At a tile's end the W partial tiles are summed through shared memory (two buffers by tile
//     parity: one named barrier a tile) and warp 0 stores, with the tile GEMV's epilogues.
// The results equal the tile GEMV's up to the order of f32 additions across k. Measured slower
// than the tile GEMV in every format (H200, docs/perf/2026-12-05-session39.md): opt-in, for A/B.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mbarrier.cuh"
#include "backend/cuda/quant_gemv.cuh"

namespace frugal::cuda {
namespace {

using namespace qmma;

constexpr int kSegBytes = 1024;               // bytes of each row per stage: 16 quads
constexpr int kSegQuads = kSegBytes / 64;
constexpr int kPitch = kSegBytes + 64;        // rows g and g + 1 64 bytes apart mod 128
constexpr int kStageBytes = 16 * kPitch;      // 17,408
constexpr int kMaxStages = 8;
static_assert(kSegQuads * 64 == kSegBytes && kStageBytes % 16 == 0, "whole quads a segment, 16-byte aligned stages");

struct BulkArgs {
  QGemvArgs a;
  int64_t tiles;  // row tiles
  int segs;       // segments a row: ceil(row_bytes / kSegBytes)
  int stages;     // ring stages, 1..kMaxStages
};

// Shared memory: the ring, full[stages] and empty[stages] mbarriers, then the tile-end reduction
// buffers red[2][W - 1][32] float4.
constexpr size_t bulk_smem(int stages, int w) {
  return static_cast<size_t>(stages) * (kStageBytes + 16) + static_cast<size_t>(2 * (w - 1) * 32 * 16);
}

// Resident blocks an SM the register budget is set for (ptxas caps registers to fit them; the
// register file is split over the 4 schedulers, so the cap is per scheduler's share of warps).
template <int W>
constexpr int bulk_min_blocks() {
  return W == 8 ? 3 : 4;
}

template <QKind K, int W, bool kOffsets, bool kSilu>
__global__ void __launch_bounds__((W + 1) * 32, bulk_min_blocks<W>()) quant_gemv_bulk_kernel(BulkArgs ba) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
  constexpr int C = codes_per_chunk<K>();
  constexpr int S = C / 4;   // mma steps per chunk
  constexpr int XV = C / 8;  // 16-byte x loads per chunk
  constexpr int QPW = kSegQuads / W;
  constexpr bool kBias128 = K == QKind::kInt4;
  constexpr bool kNeedX = kOffsets || kBias128;
  constexpr uint32_t kOnes = 0x3F803F80u;  // bf16 (1, 1)
  static_assert(kSegQuads % W == 0, "whole quads a warp");
  extern __shared__ __align__(16) uint8_t smem[];
  const QGemvArgs& a = ba.a;
  const ops::MatmulParams& p = a.p;
  const int stages = ba.stages;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const uint32_t ring = smem_addr(smem);
  const uint32_t bars = ring + static_cast<uint32_t>(stages * kStageBytes);  // full[s] at 8 s, empty[s] at 8 (stages + s)
  float4* red = reinterpret_cast<float4*>(smem + stages * (kStageBytes + 16));
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      mbar_init(bars + 8u * s, 1);
      mbar_init(bars + 8u * (stages + s), W);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const int64_t half = p.n / 2;
  const int64_t n_a = kSilu ? half : p.n;  // rows row_a may store

  if (warp == W) {  // the producer: weights only, so no PDL wait
    const uint64_t policy = l2_evict_first_policy();
    const uint8_t* w = static_cast<const uint8_t*>(p.w.data);
    int s = 0;
    uint32_t phase = 0;
    bool wrapped = false;
    for (int64_t tile = blockIdx.x; tile < ba.tiles; tile += gridDim.x) {
      int64_t row = 0;  // this lane's slot: rows g and g + 8 of the consumers' lanes, clamped
      if (kSilu)
        row = lane < 8 ? std::min(tile * 8 + lane, n_a - 1) : std::min(half + tile * 8 + (lane - 8), p.n - 1);
      else
        row = std::min(tile * 16 + lane, p.n - 1);
      const uint8_t* src = w + row * a.row_bytes;
      for (int seg = 0; seg < ba.segs; ++seg) {
        if (wrapped) mbar_wait(bars + 8u * (stages + s), phase ^ 1);
        const uint32_t bytes = static_cast<uint32_t>(std::min<int64_t>(kSegBytes, a.row_bytes - int64_t{seg} * kSegBytes));
        if (lane == 0) mbar_arrive_expect_tx(bars + 8u * s, 16 * bytes);
        __syncwarp();
        if (lane < 16)
          bulk_copy_g2s(ring + static_cast<uint32_t>(s * kStageBytes + lane * kPitch), src + int64_t{seg} * kSegBytes, bytes,
                        bars + 8u * s, policy);
        if (++s == stages) {
          s = 0;
          phase ^= 1;
          wrapped = true;
        }
      }
    }
    return;
  }

  pdl_wait();
  const int gq = lane >> 2, q = lane & 3;
  const __nv_bfloat16* xrow = gq < p.m ? static_cast<const __nv_bfloat16*>(p.x) + gq * p.ld_x : nullptr;
  const int n_chunks = static_cast<int>(a.row_bytes / 16);
  const int n_quads = (n_chunks + 3) / 4;
  int s = 0;
  uint32_t phase = 0;
  int parity = 0;
  for (int64_t tile = blockIdx.x; tile < ba.tiles; tile += gridDim.x, parity ^= 1) {
    const int64_t row_a = (kSilu ? tile * 8 : tile * 16) + gq, row_b = row_a + (kSilu ? half : 8);
    const int64_t ra = row_a < n_a ? row_a : n_a - 1, rb = row_b < p.n ? row_b : p.n - 1;
    const float* sa_ptr = static_cast<const float*>(p.w.scales) + (ra / a.group_n) * a.groups_k;
    const float* sb_ptr = static_cast<const float*>(p.w.scales) + (rb / a.group_n) * a.groups_k;
    const float* za_ptr = kOffsets ? static_cast<const float*>(p.w.zeros) + ra * a.groups_k : nullptr;
    const float* zb_ptr = kOffsets ? static_cast<const float*>(p.w.zeros) + rb * a.groups_k : nullptr;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    for (int seg = 0; seg < ba.segs; ++seg) {
      const int q0 = seg * kSegQuads, nq = n_quads - q0 < kSegQuads ? n_quads - q0 : kSegQuads;
      mbar_wait(bars + 8u * s, phase);
      uint4 va[QPW], vb[QPW];
      const uint8_t* stage = smem + s * kStageBytes;
#pragma unroll
      for (int u = 0; u < QPW; ++u) {
        const int jq = warp + u * W, chunk = (q0 + jq) * 4 + q;
        const bool in = jq < nq && chunk < n_chunks;  // chunks past the row were not copied: zeros
        va[u] = in ? *reinterpret_cast<const uint4*>(stage + gq * kPitch + jq * 64 + q * 16) : make_uint4(0, 0, 0, 0);
        vb[u] = in ? *reinterpret_cast<const uint4*>(stage + (gq + 8) * kPitch + jq * 64 + q * 16) : make_uint4(0, 0, 0, 0);
      }
      __syncwarp();  // every lane's reads of the stage are done before lane 0 releases it
      if (lane == 0) mbar_arrive(bars + 8u * (stages + s));
      if (++s == stages) {
        s = 0;
        phase ^= 1;
      }
      // x and the scales when used, as the tile GEMV loads them (x from L1): registers are what
      // bound the resident consumer warps, and those are what hide each quad's latency.
#pragma unroll
      for (int u = 0; u < QPW; ++u) {
        const int jq = warp + u * W, quad = q0 + jq, chunk = quad * 4 + q;
        if (jq >= nq) break;  // warp-uniform
        const bool in = chunk < n_chunks;
        uint4 xt[XV];
#pragma unroll
        for (int v = 0; v < XV; ++v) {
          const int64_t j = static_cast<int64_t>(chunk) * C + 8 * v;
          xt[v] = in && xrow && j < p.k ? __ldg(reinterpret_cast<const uint4*>(xrow + j)) : make_uint4(0, 0, 0, 0);
        }
        const uint32_t g = quad_group(a, static_cast<uint32_t>(quad));
        const float sa = __ldg(sa_ptr + g), sb = __ldg(sb_ptr + g);
        float oa = kOffsets ? __ldg(za_ptr + g) : 0.f, ob = kOffsets ? __ldg(zb_ptr + g) : 0.f;
        if constexpr (kBias128) {
          oa -= 128.f * sa;
          ob -= 128.f * sb;
        }
        uint32_t A[S][4];  // {row a lo, row b lo, row a hi, row b hi}
#pragma unroll
        for (int st = 0; st < S; ++st) {
          dequant_step<K>(va[u], st, A[st][0], A[st][2]);
          dequant_step<K>(vb[u], st, A[st][1], A[st][3]);
        }
        const uint32_t* xw = reinterpret_cast<const uint32_t*>(&xt[0]);
        float part[4] = {0.f, 0.f, 0.f, 0.f}, xs[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int st = 0; st < S; ++st) {
          const uint32_t x0 = xw[x_word_lo<K>(st)], x1 = xw[x_word_hi<K>(st)];
          mma_bf16(part, A[st][0], A[st][1], A[st][2], A[st][3], x0, x1);
          if constexpr (kNeedX) mma_bf16(xs, kOnes, kOnes, kOnes, kOnes, x0, x1);
        }
        fold_quad<kNeedX>(acc, part, sa, sb, oa, ob, xs[0], xs[1], xs[2], xs[3]);
      }
    }
    if constexpr (W > 1) {
      float4* buf = red + parity * (W - 1) * 32;
      if (warp > 0) buf[(warp - 1) * 32 + lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
      named_sync(1, W * 32);
      if (warp > 0) continue;
#pragma unroll
      for (int w = 0; w < W - 1; ++w) {
        const float4 o = buf[w * 32 + lane];
        acc[0] += o.x;
        acc[1] += o.y;
        acc[2] += o.z;
        acc[3] += o.w;
      }
    }
    // c0, c1: row g, tokens 2q, 2q + 1; c2, c3: row g + 8 (silu: the up row of channel g).
    if constexpr (kSilu) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int64_t tok = 2 * q + i;
        if (row_a >= half || tok >= p.m) continue;
        float gv = acc[i], uv = acc[2 + i];
        if (p.bias) {
          gv += load_f(p.bias_dtype, p.bias, row_a);
          uv += load_f(p.bias_dtype, p.bias, row_b);
        }
        store_f(p.y_dtype, a.silu.out, tok * a.silu.ld_out + row_a, silu_mul_f(round_to(p.y_dtype, gv), round_to(p.y_dtype, uv)));
      }
    } else {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t row = i < 2 ? row_a : row_b, tok = 2 * q + (i & 1);
        if (row >= p.n || tok >= p.m) continue;
        store_y(p, row, tok, acc[i]);
      }
    }
  }
#else
  __trap();  // launched only on sm_90 and later (quant_gemv_bulk_ok)
#endif
}

// Tuning (0: the default rule): FRUGAL_QBULK_W=4|8 consumer warps, FRUGAL_QBULK_STAGES=1..8,
// FRUGAL_QBULK_BLOCKS=blocks an SM at most; set_quant_gemv_bulk_tuning wins.
int g_bulk_w = -1, g_bulk_stages = -1, g_bulk_blocks = -1;

template <QKind K, int W, bool kOffsets, bool kSilu>
cudaError_t launch_bulk_k(const BulkArgs& base, cudaStream_t stream) {
  constexpr auto kernel = quant_gemv_bulk_kernel<K, W, kOffsets, kSilu>;
  static const int b_env = env_int("FRUGAL_QBULK_BLOCKS");
  const QuantDevice& d = quant_device();
  if (const cudaError_t e = raise_dynamic_smem_once<kernel>(bulk_smem(kMaxStages, W)); e != cudaSuccess) return e;
  BulkArgs ba = base;
  const size_t smem = bulk_smem(ba.stages, W);
  // Resident blocks an SM: registers (the occupancy query without shared memory) and the ring
  // (1 KB of each block's shared memory is the system's), at most the cap.
  const int by_regs = cached_blocks_per_sm<kernel>((W + 1) * 32, 0, 1);
  const int by_smem = std::max(1, static_cast<int>(d.smem_per_sm / (smem + 1024)));
  const int cap = g_bulk_blocks > 0 ? g_bulk_blocks : b_env > 0 ? b_env : 4;
  const int64_t per_sm = std::max(1, std::min({by_regs, by_smem, cap}));
  const int64_t grid = std::min<int64_t>(ba.tiles, per_sm * std::max(1, d.sms));
  return launch_kernel(kernel, dim3(static_cast<unsigned>(grid)), dim3((W + 1) * 32), smem, stream, ba);
}

template <QKind K, int W, bool kOffsets>
cudaError_t launch_bulk_s(const BulkArgs& ba, bool silu, cudaStream_t stream) {
  return silu ? launch_bulk_k<K, W, kOffsets, true>(ba, stream) : launch_bulk_k<K, W, kOffsets, false>(ba, stream);
}

template <QKind K, bool kOffsets>
cudaError_t launch_bulk_w(const QGemvArgs& a, cudaStream_t stream) {
  static const int w_env = env_int("FRUGAL_QBULK_W"), s_env = env_int("FRUGAL_QBULK_STAGES");
  BulkArgs ba{a, a.silu.out ? ceil_div(a.p.n / 2, 8) : ceil_div(a.p.n, 16), static_cast<int>(ceil_div(a.row_bytes, kSegBytes)), 0};
  const int w_tune = g_bulk_w > 0 ? g_bulk_w : w_env;
  const int s_tune = g_bulk_stages > 0 ? g_bulk_stages : s_env;
  // 8 consumer warps and 3 stages unless asked otherwise: 3 blocks an SM (the register cap of
  // bulk_min_blocks) keep 24 consumer warps and 9 ring stages resident.
  const bool eight = w_tune != 4;
  ba.stages = std::clamp(s_tune > 0 ? s_tune : 3, 1, kMaxStages);
  return eight ? launch_bulk_s<K, 8, kOffsets>(ba, a.silu.out != nullptr, stream)
               : launch_bulk_s<K, 4, kOffsets>(ba, a.silu.out != nullptr, stream);
}

}  // namespace

void set_quant_gemv_bulk_tuning(int warps, int stages, int blocks_per_sm) {
  g_bulk_w = warps;
  g_bulk_stages = stages;
  g_bulk_blocks = blocks_per_sm;
}

bool quant_gemv_bulk_ok(const ops::MatmulParams& p, QuantGemvKernel over) {
  // Row-major codes only (kOutInTiles8 runs the lean GEMV, which reads it).
  return quant_gemv_kernel_choice(over) == QuantGemvKernel::kBulk && p.m <= 8 && quant_device().major >= 9 &&
         p.w.format.layout == ops::WeightLayout::kOutIn;
}

cudaError_t launch_quant_gemv_bulk(const qmma::QGemvArgs& a, cudaStream_t stream) {
  const bool offsets = a.p.w.format.zero == ops::ZeroPoint::kOffset;
  switch (a.p.w.format.scheme) {
    case ops::WeightScheme::kInt4:
      return offsets ? launch_bulk_w<QKind::kInt4, true>(a, stream) : launch_bulk_w<QKind::kInt4, false>(a, stream);
    case ops::WeightScheme::kInt8:
      return offsets ? launch_bulk_w<QKind::kInt8, true>(a, stream) : launch_bulk_w<QKind::kInt8, false>(a, stream);
    case ops::WeightScheme::kFp8: return launch_bulk_w<QKind::kFp8, false>(a, stream);
    default: break;
  }
  return cudaErrorInvalidValue;
}

}  // namespace frugal::cuda
