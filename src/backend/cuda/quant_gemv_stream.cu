// The m <= 8 quantized GEMV as a persistent stream (the default at m <= 8; FRUGAL_QGEMV=old or
// set_quant_gemv_kernel picks quant_gemv.cu's one-tile-per-block kernel for A/B).
//
// Why: the one-tile-per-block GEMV (quant_gemv.cu) gives each warp only a few quads (int4 gate
// 18944x3584: 28 quads per row, 7 per warp on 4 warps), so every block pays a DRAM latency to
// fill its two-quad register pipeline and drains it after a handful of iterations, and 1,184
// blocks run in ~1.3 waves with a thin tail (ncu 2026-12-03: DRAM 29.5%, 1.64 eligible warps,
// 68 registers). Here each block is resident for the whole kernel and walks row tiles
// blockIdx.x, + gridDim.x, ... (as many tiles per block as one wave of blocks needs), and each
// warp keeps the same slice of k on every tile (quads w, w + W, ...), so its codes form one
// stream across tiles: a per-warp cp.async ring in shared memory keeps D - 1 quads (1 KB each)
// in flight with no registers spent on them, and the pipeline fills once per block, not per
// tile. Each lane copies and reads back only its own 32 bytes per quad (no barrier per quad;
// the slot refilled is the one read an iteration earlier, whose registers the mma has
// consumed). The sums of x per quad that int4's +128 bias and zero points need come from the
// same all-ones mma as before on a block's first tile only, kept in shared memory for the
// others (8 fewer mma per quad there). The per-quad math and the order of every f32 sum (quads w, w + W, ... per
// warp, then warps 0..W-1) are quant_gemv.cu's, so for the same W both kernels give the same
// bits, and no result depends on the grid size.
//
// Predicted (H200, m = 1, weights past L2, cuda_kernel_bench --quant; the tile kernel's
// measured time of 2026-12-03 in brackets). int4 g128: q 3584x3584 6.5 us [7.5], k 512x3584
// 5.0 [5.1] (both latency: one DRAM round trip plus the launch, little to gain), gate
// 18944x3584 12.5 [21.1] (~75% of the copy ceiling: 592 blocks x 2 tiles, 18 warps and ~90 KB
// in flight per SM), down 3584x18944 12.5 [23.1] (224 blocks x 8 warps, 18 quads per warp);
// int8: gate 19.5 [24.3], down 19.5 [27.8]; fp8: gate 19.5 [22.1], down 19.5 [27.8] (~82%).
// At m = 8 each lane's x loads from L1 grow 8x: within 10% of the tile kernel either way.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/quant_gemv.cuh"

namespace frugal::cuda {
namespace {

using namespace qmma;

// Ring slots per warp: D - 1 quads in flight while one is multiplied. 4 warps take 6 slots
// (5 KB in flight per warp, 24 KB per block), 8 warps 5 (4 KB, 40 KB per block): 8 warps are
// the small shapes' choice (q / o / qkv: 28 quads per row, 4 per warp), where all of a warp's
// quads of a tile are then in flight at once, one DRAM round trip instead of two.
template <int W>
constexpr int ring_depth() {
  return W == 4 ? 6 : 5;
}
constexpr size_t kStaticSmemLimit = 48 * 1024;
// The most dynamic shared memory the x sums take (int4 up to k = 131,072 at m = 8); each
// kernel's limit is raised to it at its first launch.
constexpr size_t kMaxXsumBytes = 32 * 1024;
// Shared memory of one block: the static ring and reduction tiles (the x sums come on top).
template <int W>
constexpr size_t static_smem() {
  return sizeof(uint4) * W * ring_depth<W>() * 2 * 32 + sizeof(float) * 2 * (W - 1) * 32 * 4;
}

// x sums per quad in shared memory: tokens 0..mx-1 (mx = m rounded up to even, so lane q reads
// tokens 2q, 2q + 1 as one float2 when 2q < m).
__host__ __device__ constexpr int64_t xsum_stride(int64_t m) { return (m + 1) & ~int64_t{1}; }

template <QKind K, int W, bool kOffsets, bool kSilu>
__global__ void __launch_bounds__(W * 32, 24 / W) quant_gemv_stream_kernel(QGemvArgs a, int tiles) {
  constexpr int C = codes_per_chunk<K>();
  constexpr int S = C / 4;   // mma steps per chunk
  constexpr int XV = C / 8;  // 16-byte x loads (8 bf16) per chunk
  constexpr int D = ring_depth<W>();
  static_assert(static_smem<W>() <= kStaticSmemLimit);
  constexpr bool kBias128 = K == QKind::kInt4;
  constexpr bool kNeedX = kOffsets || kBias128;
  constexpr uint32_t kOnes = 0x3F803F80u;  // bf16 (1, 1)
  // ring[warp][slot][row a | row b][lane]: lane stride 16 bytes, so the reads are conflict-free.
  __shared__ uint4 ring[W][D][2][32];
  __shared__ float red[2][W > 1 ? W - 1 : 1][32][4];  // by tile parity: one barrier per tile
  extern __shared__ float xsum[];                     // [n_quads][mx] when kNeedX
  pdl_wait();
  const ops::MatmulParams& p = a.p;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, q = lane & 3;
  const int n_chunks = static_cast<int>(a.row_bytes / 16);
  const int n_quads = (n_chunks + 3) / 4;
  const int cnt = n_quads > warp ? (n_quads - warp + W - 1) / W : 0;  // this warp's quads per tile
  const int mx = static_cast<int>(xsum_stride(p.m));
  const int64_t half = p.n / 2;
  const int64_t n_a = kSilu ? half : p.n;  // rows row_a may store
  const uint8_t* wdata = static_cast<const uint8_t*>(p.w.data);
  // The tile's rows g and g + 8; with the silu epilogue, gate channel c = 8 tile + g and its up
  // row c + n / 2 (one lane holds both for its tokens). Clamped rows are loaded, never stored.
  auto tile_rows = [&](int tile, int64_t& row_a, int64_t& row_b, int64_t& ra, int64_t& rb) {
    row_a = static_cast<int64_t>(tile) * (kSilu ? 8 : 16) + gq;
    row_b = row_a + (kSilu ? half : 8);
    ra = row_a < n_a ? row_a : n_a - 1;
    rb = row_b < p.n ? row_b : p.n - 1;
  };
  // This lane's x row: token gq, or null past m (zeros are multiplied).
  const __nv_bfloat16* xrow = gq < p.m ? static_cast<const __nv_bfloat16*>(p.x) + gq * p.ld_x : nullptr;
  auto load_x = [&](int chunk, uint4 (&xt)[XV]) {
#pragma unroll
    for (int v = 0; v < XV; ++v) {
      const int64_t j = static_cast<int64_t>(chunk) * C + 8 * v;
      xt[v] = chunk < n_chunks && xrow && j < p.k ? __ldg(reinterpret_cast<const uint4*>(xrow + j)) : make_uint4(0, 0, 0, 0);
    }
  };

  // The producer: the next (tile, quad) of this warp's stream, one commit group per call (empty
  // past the last tile, so every wait counts the same).
  int pt = blockIdx.x, pj = 0;
  const uint8_t* pwa = nullptr;
  const uint8_t* pwb = nullptr;
  auto producer_tile = [&] {
    if (pt >= tiles) return;
    int64_t row_a, row_b, ra, rb;
    tile_rows(pt, row_a, row_b, ra, rb);
    pwa = wdata + ra * a.row_bytes;
    pwb = wdata + rb * a.row_bytes;
  };
  auto issue = [&](int slot) {
    if (cnt > 0 && pt < tiles) {
      const int chunk = (warp + pj * W) * 4 + q;
      const bool in = chunk < n_chunks;  // also false for the chunks of a partial last quad
      cp_async16_l2<256>(&ring[warp][slot][0][lane], in ? pwa + 16 * chunk : wdata, in);
      cp_async16_l2<256>(&ring[warp][slot][1][lane], in ? pwb + 16 * chunk : wdata, in);
      if (++pj == cnt) {
        pj = 0;
        pt += gridDim.x;
        producer_tile();
      }
    }
    cp_async_commit();
  };
  producer_tile();
#pragma unroll
  for (int s = 0; s < D - 1; ++s) issue(s);

  int slot = 0, prev = D - 1;  // the slot read now and the one read an iteration ago (refilled now)
  int par = 0;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x, par ^= 1) {
    int64_t row_a, row_b, ra, rb;
    tile_rows(tile, row_a, row_b, ra, rb);
    const float* sa_ptr = static_cast<const float*>(p.w.scales) + (ra / a.group_n) * a.groups_k;
    const float* sb_ptr = static_cast<const float*>(p.w.scales) + (rb / a.group_n) * a.groups_k;
    const float* za_ptr = kOffsets ? static_cast<const float*>(p.w.zeros) + ra * a.groups_k : nullptr;
    const float* zb_ptr = kOffsets ? static_cast<const float*>(p.w.zeros) + rb * a.groups_k : nullptr;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    for (int j = 0; j < cnt; ++j) {
      const int quad = warp + j * W;
      const int chunk = quad * 4 + q;
      cp_async_wait<D - 2>();  // this quad's group has landed (this lane's own copies)
      const uint4 va = ring[warp][slot][0][lane], vb = ring[warp][slot][1][lane];
      issue(prev);  // the previous quad's registers are consumed: its slot takes quad + D - 1
      prev = slot;
      slot = slot + 1 == D ? 0 : slot + 1;
      uint32_t A[S][4];  // the mma A fragments of this quad: {row a lo, row b lo, row a hi, row b hi}
#pragma unroll
      for (int s = 0; s < S; ++s) {
        dequant_step<K>(va, s, A[s][0], A[s][2]);
        dequant_step<K>(vb, s, A[s][1], A[s][3]);
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
      uint4 xt[XV];  // L1 hits: x is small and every warp of the SM reads it
      load_x(chunk, xt);
      const uint32_t* xw = reinterpret_cast<const uint32_t*>(&xt[0]);
      float part[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int s = 0; s < S; ++s) mma_bf16(part, A[s][0], A[s][1], A[s][2], A[s][3], xw[x_word_lo<K>(s)], xw[x_word_hi<K>(s)]);
      acc[0] = fmaf(sa, part[0], acc[0]);
      acc[1] = fmaf(sa, part[1], acc[1]);
      acc[2] = fmaf(sb, part[2], acc[2]);
      acc[3] = fmaf(sb, part[3], acc[3]);
      if constexpr (kNeedX) {
        // The sums of x over the quad: on the block's first tile from the all-ones mma (on the x
        // just loaded, so no extra latency) and kept in shared memory for the later tiles, where
        // this warp has the same quads (the tile barrier below orders the write and the reads
        // of other lanes). c0, c1: tokens 2q, 2q + 1 of row g, c2, c3 of row g + 8 (the same
        // sums; stored from row g). Tokens past mx have zero sums, as the mma would give.
        float xs[4] = {0.f, 0.f, 0.f, 0.f};
        if (tile == static_cast<int>(blockIdx.x)) {
#pragma unroll
          for (int s = 0; s < S; ++s) mma_bf16(xs, kOnes, kOnes, kOnes, kOnes, xw[x_word_lo<K>(s)], xw[x_word_hi<K>(s)]);
          if (gq == 0 && 2 * q < mx) *reinterpret_cast<float2*>(&xsum[quad * mx + 2 * q]) = make_float2(xs[0], xs[1]);
        } else if (2 * q < mx) {
          const float2 v = *reinterpret_cast<const float2*>(&xsum[quad * mx + 2 * q]);
          xs[0] = xs[2] = v.x;
          xs[1] = xs[3] = v.y;
        }
        acc[0] = fmaf(oa, xs[0], acc[0]);
        acc[1] = fmaf(oa, xs[1], acc[1]);
        acc[2] = fmaf(ob, xs[2], acc[2]);
        acc[3] = fmaf(ob, xs[3], acc[3]);
      }
    }
    // Warps 1..W-1 hand their partial tiles to warp 0, which adds them in warp order. red is
    // double-buffered by tile parity: a warp writes red[par] again two tiles later, after the
    // next barrier, which warp 0 passes only once it has read this tile's.
    if constexpr (W > 1) {
      if (warp > 0) {
#pragma unroll
        for (int i = 0; i < 4; ++i) red[par][warp - 1][lane][i] = acc[i];
      }
      __syncthreads();
      if (warp > 0) continue;
#pragma unroll
      for (int w = 0; w < W - 1; ++w)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[i] += red[par][w][lane][i];
    }
    // c0, c1: row g, tokens 2q, 2q + 1; c2, c3: row g + 8 (silu: the up row of g).
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
        const int64_t row = i < 2 ? row_a : row_b;
        const int64_t tok = 2 * q + (i & 1);
        if (row >= p.n || tok >= p.m) continue;
        store_y(p, row, tok, acc[i]);
      }
    }
  }
}

// The x sums' dynamic shared memory: none for the formats without offsets and bias.
size_t xsum_bytes(const QGemvArgs& a) {
  const bool need_x = a.p.w.format.scheme == ops::WeightScheme::kInt4 || a.p.w.format.zero == ops::ZeroPoint::kOffset;
  const int64_t n_quads = (a.row_bytes / 16 + 3) / 4;
  return need_x ? static_cast<size_t>(n_quads * xsum_stride(a.p.m)) * sizeof(float) : 0;
}

template <QKind K, int W, bool kOffsets, bool kSilu>
cudaError_t launch_w(const QGemvArgs& a, int64_t tiles, cudaStream_t stream) {
  constexpr auto kernel = quant_gemv_stream_kernel<K, W, kOffsets, kSilu>;
  if (const cudaError_t err = raise_dynamic_smem_once<kernel>(kMaxXsumBytes); err != cudaSuccess) return err;
  const size_t xbytes = xsum_bytes(a);
  // Blocks per SM at this much shared memory, remembered for the last size asked (a decode step
  // asks the same few shapes again and again; outside graphs the query would cost every launch).
  static std::atomic<uint64_t> memo{0};  // (xbytes + 1) << 32 | blocks per SM
  int dev = 0, n_sms = 0, per_sm = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&n_sms, cudaDevAttrMultiProcessorCount, dev);
  if (err != cudaSuccess) return err;
  const uint64_t m = memo.load(std::memory_order_relaxed);
  if ((m >> 32) == xbytes + 1) {
    per_sm = static_cast<int>(m & 0xffffffffu);
  } else {
    if ((err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, W * 32, xbytes)) != cudaSuccess) return err;
    memo.store((static_cast<uint64_t>(xbytes) + 1) << 32 | static_cast<uint32_t>(per_sm), std::memory_order_relaxed);
  }
  // As many tiles per block as one wave of resident blocks needs, then as few blocks as carry
  // that many each (every block the same number of tiles but the last).
  const int64_t wave = std::max<int64_t>(1, static_cast<int64_t>(n_sms) * per_sm);
  const int64_t per_block = ceil_div(tiles, wave);
  const unsigned blocks = static_cast<unsigned>(ceil_div(tiles, per_block));
  return launch_kernel(kernel, dim3(blocks), dim3(W * 32), xbytes, stream, a, static_cast<int>(tiles));
}

template <QKind K, bool kOffsets, bool kSilu>
cudaError_t launch_silu(const QGemvArgs& a, int warps, int64_t tiles, cudaStream_t stream) {
  return warps == 4 ? launch_w<K, 4, kOffsets, kSilu>(a, tiles, stream) : launch_w<K, 8, kOffsets, kSilu>(a, tiles, stream);
}

template <QKind K, bool kOffsets>
cudaError_t launch_offsets(const QGemvArgs& a, int warps, int64_t tiles, cudaStream_t stream) {
  return a.silu.out ? launch_silu<K, kOffsets, true>(a, warps, tiles, stream) : launch_silu<K, kOffsets, false>(a, warps, tiles, stream);
}

}  // namespace

bool quant_gemv_stream_fits(const QGemvArgs& a) { return a.p.m <= 8 && xsum_bytes(a) <= kMaxXsumBytes; }

cudaError_t launch_quant_gemv_stream(const QGemvArgs& a, int warps, cudaStream_t stream) {
  const int64_t tiles = a.silu.out ? ceil_div(a.p.n / 2, 8) : ceil_div(a.p.n, 16);
  const bool offsets = a.p.w.format.zero == ops::ZeroPoint::kOffset;
  switch (a.p.w.format.scheme) {
    case ops::WeightScheme::kInt4:
      return offsets ? launch_offsets<QKind::kInt4, true>(a, warps, tiles, stream)
                     : launch_offsets<QKind::kInt4, false>(a, warps, tiles, stream);
    case ops::WeightScheme::kInt8:
      return offsets ? launch_offsets<QKind::kInt8, true>(a, warps, tiles, stream)
                     : launch_offsets<QKind::kInt8, false>(a, warps, tiles, stream);
    case ops::WeightScheme::kFp8: return launch_offsets<QKind::kFp8, false>(a, warps, tiles, stream);
    default: break;
  }
  return cudaErrorInvalidValue;
}

}  // namespace frugal::cuda
