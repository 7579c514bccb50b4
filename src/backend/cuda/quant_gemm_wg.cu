// The slab GEMM's warpgroup kernel: int4 codes (with or without zero points) on sm_90a, the tensor
// work by wgmma.mma_async instead of mma.sync, from 12 tokens: 16, 32, 48 or 64 tokens a pass
// (wgmma n16 .. n64), the fewest that hold m (docs/perf/2026-12-06-session54.md, session55.md).
// quant_gemm_slab.cu plans its launch (slices, row bands, partials) as it does the mma.sync
// kernel's.
//
// Why (docs/perf/2026-12-06-session54.md): at 64 tokens the slab kernel issues, per warp and
// quad of a 16-row tile (1 KB of codes), 64 mma.sync (8 k16 steps x 8 token tiles), the 16
// shared-memory loads of x they need, the 64 dequantizing instructions and the fold's 64 FFMA,
// plus its bookkeeping: it is issue-bound (session 50: ~310 issued instructions a warp-quad at
// m = 16, half the issue slots empty). A warpgroup wgmma m64n64k16 takes its B operand (x) from
// shared memory by descriptor, so one instruction a k16 step replaces 8 mma.sync and their x
// loads: ~145 instructions a warp-quad of arithmetic instead of ~210.
//
// Layout. A block is two warpgroups (8 warps); a row group is 64 rows (warp w of a warpgroup owns
// rows 16 w .. 16 w + 15, as wgmma's A fragment wants). Each warp loads and dequantizes its codes
// exactly as the mma.sync kernel does (lane (g, q): chunk q of rows g and g + 8, the exact bf16
// 128 + code pairs of dequant_step), so those registers are wgmma's A operand as they are. The
// k order they imply (step s's A columns 2q + e and 2q + 8 + e hold the chunk's codes
// 16 h + 4 i + e and + 2, s = 2 i + h: quad_gemv.cuh) is not the natural one: the slice's x is
// staged in that order instead, 4 bytes (one bf16 pair) at a time by cp.async, into the
// 128-byte-swizzled K-major tile of wgmma.cuh (rows: the NT tokens; 2 column blocks a quad).
// Each quad's product goes to its own accumulator (the first step overwrites it) and is folded
// into the output with the group's scale and offset, as in the other kernel: the same math, but
// another f32 summation order (within the same bound). Tokens past m and codes past k meet zeros.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/quant_gemm_slab.cuh"
#include "backend/cuda/wgmma.cuh"

namespace frugal::cuda::slab {
namespace {

// Byte offset, in a quad's x tile, of word w (0..7: B rows 2 w, 2 w + 1) of k16 step s (0..7) of
// token t: position 16 s + 2 w on the tile's k axis.
template <int NT>
__device__ __forceinline__ uint32_t wg_x_offset(int t, int s, int w) {
  return sw128_offset(t, 2 * s + (w >> 2), NT) + 4 * (w & 3);
}

// One k16 step of the quad: d[NT / 8][4] (+)= A (this warp's 16 rows) x the tile's step.
template <int NT>
__device__ __forceinline__ void wg_step(float (&d)[NT / 8][4], const uint32_t* a, uint64_t desc, bool accumulate) {
  if constexpr (NT == 16) {
    wgmma_m64n16k16_bf16(d, a, desc, accumulate);
  } else if constexpr (NT == 32) {
    wgmma_m64n32k16_bf16(d, a, desc, accumulate);
  } else if constexpr (NT == 48) {
    wgmma_m64n48k16_bf16(d, a, desc, accumulate);
  } else {
    wgmma_m64n64k16_bf16<0>(d, a, desc, accumulate);
  }
}

// The descriptor of k16 step s of a quad's tile at `desc`: column block s / 4 (NT rows of 128
// bytes), 32 bytes a step inside it.
template <int NT>
__device__ __forceinline__ uint64_t wg_step_desc(uint64_t desc, int s) {
  return desc + ((((s >> 2) * NT * 128) + (s & 3) * 32) >> 4);
}

// The quad's x word (bf16 pair, 0..63 in natural k order) that step s's word w multiplies: the
// lane q = w % 4 holds chunk q (codes 32 q..), hi = w / 4 the second pair of the step.
__device__ __forceinline__ int wg_x_source_word(int s, int w) {
  return 16 * (w & 3) + 8 * (s & 1) + 2 * (s >> 1) + (w >> 2);
}

// NT: tokens a pass (16, 32, 48, 64; the wgmma's n). Two blocks an SM at 16 and 32 (<= 128
// registers; at 32 one block an SM took 149-153 and was 7% slower on the gate, session 56).
template <int NT, bool kOffsets>
__global__ void __launch_bounds__(kWgWarps * 32, NT <= 32 ? 2 : 1) quant_gemm_wg_kernel(QSlabArgs sa) {
  constexpr int NJ = NT / 8;  // 8-token column blocks of the accumulators
  constexpr int kQuadX = wg_quad_x(NT);
  constexpr QKind K = QKind::kInt4;
  constexpr int U = 2;  // quads in flight a warp (double-buffered in registers)
  constexpr int kGroupsInBlock = kWgWarps / 4;
  extern __shared__ __align__(16) unsigned char wg_smem[];
  const uint32_t base_addr = static_cast<uint32_t>(__cvta_generic_to_shared(wg_smem));
  unsigned char* tiles = wg_smem + (((base_addr + 1023u) & ~1023u) - base_addr);  // 1024-aligned for the swizzle
  const QGemvArgs& a = sa.g;
  const ops::MatmulParams& p = a.p;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, q = lane & 3;
  const int wg = warp >> 2, wq = warp & 3;
  const int n_chunks = static_cast<int>(a.row_bytes / 16);
  const int n_quads = (n_chunks + 3) / 4;
  const int qb = static_cast<int>(blockIdx.z) * sa.quads_per_split;
  const int ks = min(sa.quads_per_split, n_quads - qb);  // > 0: the host leaves no slice empty
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * NT;
  const int64_t n_groups = ceil_div(p.n, kWgRows);
  const int64_t g_first = static_cast<int64_t>(blockIdx.x) * sa.groups_per_block + wg;
  const int64_t g_end = min(n_groups, static_cast<int64_t>(blockIdx.x + 1) * sa.groups_per_block);
  const int my_groups = g_first < g_end ? static_cast<int>((g_end - g_first + kGroupsInBlock - 1) / kGroupsInBlock) : 0;
  const int batches_per_group = (ks + U - 1) / U;
  const int n_batches = my_groups * batches_per_group;  // the same for the warpgroup's 4 warps
  const float* scales = static_cast<const float*>(p.w.scales);
  const float* zeros = static_cast<const float*>(p.w.zeros);
  float* sums = reinterpret_cast<float*>(tiles + static_cast<size_t>(sa.quads_per_split) * kQuadX);

  auto row_of = [&](int64_t group, int half) {
    const int64_t row = group * kWgRows + 16 * wq + gq + 8 * half;
    return row < p.n ? row : p.n - 1;
  };

  // The load cursor (the mma.sync kernel's, one row tile a warp).
  int64_t lg = g_first;
  int lq = 0, loaded = 0;
  const int qs = quad_step16(a);
  const uint4* la = nullptr;
  const uint4* lb = nullptr;
  auto set_load_rows = [&](int64_t group) {
    la = row_codes16(a, row_of(group, 0)) + q;
    lb = row_codes16(a, row_of(group, 1)) + q;
  };
  set_load_rows(lg);
  auto load_batch = [&](uint4 (&va)[U][1], uint4 (&vb)[U][1]) {
    const bool live = loaded < n_batches;
    const int len = min(U, ks - lq);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int quad = qb + lq + u, chunk = quad * 4 + q;
      const bool in = live && u < len && chunk < n_chunks;
      va[u][0] = in ? load_stream16(la + quad * qs) : make_uint4(0, 0, 0, 0);
      vb[u][0] = in ? load_stream16(lb + quad * qs) : make_uint4(0, 0, 0, 0);
    }
    ++loaded;
    lq += len;
    if (lq == ks) {
      lq = 0;
      lg += kGroupsInBlock;
      set_load_rows(lg);
    }
  };

  uint4 va[U][1], vb[U][1];
  load_batch(va, vb);  // before the wait: the codes need no earlier kernel
  pdl_wait();

  // The slice's x in the codes' k order, every token of the pass. Thread i copies word
  // pw = i % 64 of tokens i / 64 + 4 j (j < NT / 4) of every quad: its source word, destination
  // chunk and swizzle (which only sees t % 8, so two bases) are fixed; each copy is a pointer step.
  {
    static_assert(kWgWarps * 32 == 256, "4 tokens x 64 words a pass of the block");
    const __nv_bfloat16* x = static_cast<const __nv_bfloat16*>(p.x);
    const int pw = threadIdx.x & 63, t0 = threadIdx.x >> 6;
    const int s = pw >> 3, w = pw & 7;
    const int jw = 2 * wg_x_source_word(s, w);  // its first k in the quad
    const uint32_t base_even = wg_x_offset<NT>(t0, s, w), base_odd = wg_x_offset<NT>(t0 + 4, s, w) - 4 * 128;
    const int64_t tok0 = m0 + t0, step = 4 * p.ld_x;
    // Copies j < jn are of tokens below m.
    const int jn = static_cast<int>(std::clamp<int64_t>(ceil_div(p.m - tok0, 4), 0, NT / 4));
    const __nv_bfloat16* xrow = x + tok0 * p.ld_x + jw;
    for (int ql = 0; ql < ks; ++ql) {
      const int64_t kq = static_cast<int64_t>(qb + ql) * 128;
      const int jk = kq + jw < p.k ? jn : 0;
      unsigned char* dst = tiles + ql * kQuadX;
      const __nv_bfloat16* src = xrow + kq;
#pragma unroll
      for (int j = 0; j < NT / 4; ++j) {
        cp_async<4>(dst + ((j & 1) ? base_odd : base_even) + 512 * j, j < jk ? src : x, j < jk);
        src += step;
      }
    }
    cp_async_commit();
    cp_async_wait<0>();
    fence_proxy_async();  // this thread's copies, for the wgmma (async proxy) reads after the barrier
    __syncthreads();
  }
  // Each (quad, token)'s x sum, for int4's +128 bias and the offsets (any order: a sum).
  for (int it = threadIdx.x; it < ks * NT; it += kWgWarps * 32) {
    const int ql = it / NT, t = it % NT;
    const unsigned char* tile = tiles + ql * kQuadX;
    float s0 = 0.f, s1 = 0.f;
#pragma unroll
    for (int c = 0; c < 16; ++c) {
      const uint4 v = *reinterpret_cast<const uint4*>(tile + sw128_offset(t, c, NT));
      const uint32_t wv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&wv[e]));
        s0 += f.x;
        s1 += f.y;
      }
    }
    sums[ql * NT + t] = s0 + s1;
  }
  __syncthreads();
  float dq[NJ][4] = {};  // one quad's product (each quad's first wgmma overwrites it)

  // The compute cursor and the current group's scale (and offset) rows.
  int64_t cg = g_first;
  int cq = 0;
  const float* sa_p[1];
  const float* sb_p[1];
  const float* za_p[1];
  const float* zb_p[1];
  auto set_group = [&](int64_t group) {
    const int64_t ra = row_of(group, 0), rb = row_of(group, 1);
    sa_p[0] = scales + (ra / a.group_n) * a.groups_k;
    sb_p[0] = scales + (rb / a.group_n) * a.groups_k;
    za_p[0] = kOffsets ? zeros + ra * a.groups_k : nullptr;
    zb_p[0] = kOffsets ? zeros + rb * a.groups_k : nullptr;
  };
  const bool split = gridDim.z > 1;
  float* part_out = split ? sa.partials + static_cast<int64_t>(blockIdx.z) * p.m * p.n : nullptr;
  float acc[NJ][4] = {};
  // Stores the group's outputs (y, or this slice's partials) and zeroes them for the next group.
  // acc[j][e]: row 16 wq + gq + 8 (e >> 1) of the group, token 8 j + 2 q + (e & 1) of the pass.
  auto store_group = [&](int64_t group) {
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float v = acc[j][e];
        acc[j][e] = 0.f;
        const int64_t row = group * kWgRows + 16 * wq + gq + 8 * (e >> 1), tok = m0 + 8 * j + 2 * q + (e & 1);
        if (row >= p.n || tok >= p.m) continue;
        if (split) {
          part_out[tok * p.n + row] = v;
        } else {
          store_y(p, row, tok, v);
        }
      }
  };
  if (n_batches > 0) set_group(cg);

  for (int b = 0; b < n_batches; ++b) {
    uint4 na[U][1], nb[U][1];
    load_batch(na, nb);  // the next batch's codes (zeros past the last)
    const int len = min(U, ks - cq);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (u >= len) break;  // uniform across the warpgroup
      uint32_t A[1][8][4];
      float sc_a[1], sc_b[1], of_a[1], of_b[1];
      const int ql = cq + u;
      const uint32_t g = quad_group(a, static_cast<uint32_t>(qb + ql));
      quad_operands<K, 1, kOffsets>(va[u], vb[u], g, sa_p, sb_p, za_p, zb_p, A, sc_a, sc_b, of_a, of_b);
      const uint64_t desc = wgmma_desc_sw128(tiles + ql * kQuadX);
      wgmma_sync_group(A[0], dq, [&] {
#pragma unroll
        for (int s = 0; s < 8; ++s) wg_step<NT>(dq, A[0][s], wg_step_desc<NT>(desc, s), s > 0);
      });
      const float* xs = sums + ql * NT + 2 * q;
#pragma unroll
      for (int j = 0; j < NJ; ++j) {
        const float2 x2 = *reinterpret_cast<const float2*>(xs + 8 * j);
        fold_quad<true>(acc[j], dq[j], sc_a[0], sc_b[0], of_a[0], of_b[0], x2.x, x2.y, x2.x, x2.y);
      }
    }
    cq += len;
    if (cq == ks) {  // the group's slice is done
      store_group(cg);
      cq = 0;
      cg += kGroupsInBlock;
      if (b + 1 < n_batches) set_group(cg);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      va[u][0] = na[u][0];
      vb[u][0] = nb[u][0];
    }
  }
}

}  // namespace

template <int NT, bool kOffsets>
cudaError_t run_wg(Op op, const OpArgs& o) {
  constexpr auto kernel = quant_gemm_wg_kernel<NT, kOffsets>;
  const cudaError_t raised = raise_dynamic_smem_once<kernel>(slab_smem_max());
  if (op == Op::kBlocksPerSm) {
    *o.out = cached_blocks_per_sm<kernel>(kWgWarps * 32, 0, 1);
    return raised;
  }
  if (raised != cudaSuccess) return raised;
  return launch_kernel(kernel, o.grid, dim3(kWgWarps * 32), o.smem, o.stream, *o.sa);
}
template cudaError_t run_wg<16, false>(Op op, const OpArgs& o);
template cudaError_t run_wg<16, true>(Op op, const OpArgs& o);
template cudaError_t run_wg<32, false>(Op op, const OpArgs& o);
template cudaError_t run_wg<32, true>(Op op, const OpArgs& o);
template cudaError_t run_wg<48, false>(Op op, const OpArgs& o);
template cudaError_t run_wg<48, true>(Op op, const OpArgs& o);
template cudaError_t run_wg<64, false>(Op op, const OpArgs& o);
template cudaError_t run_wg<64, true>(Op op, const OpArgs& o);

}  // namespace frugal::cuda::slab
