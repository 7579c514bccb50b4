// Prefill attention for Hopper, FlashAttention-3 style (sm_90a; bf16 cache, head_dim 128, no
// window, no key split): one block of three warpgroups per (128-query tile of one sequence,
// query head), specialised by role.
//   - Warpgroup 0, the producer (40 registers: setmaxnreg gives the rest to the consumers),
//     gathers K and V tiles of 128 keys through the block table with cp.async into a ring of
//     two stages (K and V apart, 32 KB each, 128-byte swizzled as wgmma reads them). Each
//     thread's cp.async.mbarrier.arrive.noinc signals a stage's "full" barrier when its copies
//     land; it refills a stage once the consumers' arrivals complete its "empty" barrier.
//   - Warpgroups 1 and 2, the consumers (232 registers), own 64 query rows each. Their Q rows
//     sit in shared memory (swizzled), so S = Q K^T is a shared x shared wgmma (m64n128k16) and
//     O += P V takes P from registers (bf16) and V from shared memory (MN-major, n = 128).
//     Within a warpgroup the GEMMs of neighbouring tiles overlap the softmax: S(j) is issued
//     with PV(j - 1), and the softmax of S(j) runs while PV(j - 1) is still on the tensor
//     cores; O's rescale waits for it.
//   - Ping-pong (kPingPong, FRUGAL_PREFILL_FA3=2): the two consumers take turns issuing their
//     GEMMs (named barriers 3 and 4), so one's softmax runs while the other's GEMMs do.
// The softmax is attention_prefill.cu's: row max on raw scores, the scale folded into the
// exp2 FMA, ex2.approx, the O rescale skipped while no row max of a warp moved. Tiles are taken
// longest rows first; the causal mask is applied only to key tiles that reach past a warp's
// first row. Key positions past the last query (and so past ctx) are zero-filled by the gather.
//
// Every mbarrier wait counts its polls and traps past kMaxPolls, so a protocol bug fails the
// launch instead of hanging the GPU.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mbarrier.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/prefill_tiles.cuh"
#include "backend/cuda/wgmma.cuh"

namespace frugal::cuda {
namespace {

constexpr int kD = 128;        // head dim
constexpr int kBlockQ = 128;   // queries per block (64 per consumer)
constexpr int kThreads = 384;  // producer + 2 consumers
constexpr int kTileBytes = 128 * kD * 2;  // one Q, K or V tile: 32 KB
constexpr int kProducerRegs = 40, kConsumerRegs = 232;  // 128 x 40 + 256 x 232 <= 64K
static_assert(128 * kProducerRegs + 256 * kConsumerRegs <= 65536, "register file");
// Shared memory: 1 KB of slack to align the tiles to 1024 (the swizzle works on address bits),
// Q, K stages 0 and 1, V stages 0 and 1, then 8 mbarriers.
constexpr int kSmemBytes = 1024 + 5 * kTileBytes + 8 * 8;
static_assert(kSmemBytes <= 227 * 1024, "one block an SM on Hopper");
// Device code for sm_90a (setmaxnreg, wgmma); the host pass parses it too. Other device passes
// (the generic compute_90 PTX, older GPUs) get a kernel that traps: it is never launched there.
#if FRUGAL_WGMMA || !defined(__CUDA_ARCH__)
constexpr int kBlockK = 128;  // keys per tile
// Barrier indices: full_k[2], full_v[2] (128 producer arrivals each), empty_k[2], empty_v[2]
// (one arrival per consumer warp: 8).
constexpr int kFullK = 0, kFullV = 2, kEmptyK = 4, kEmptyV = 6;
// Named barriers (0 is __syncthreads): 1 + c for consumer c's Q tile; 3 + c: consumer c's turn
// to issue GEMMs (ping-pong).
constexpr int kBarQ = 1, kBarTurn = 3;
// Slot of key j in the paged cache, or -1 when j >= end (zero-filled). bs_shift: as in
// attention_prefill.cu (log2 of a power-of-two block size, else -1).
__device__ __forceinline__ int64_t key_slot(const int32_t* table, int j, int end, int bs, int bs_shift) {
  if (j >= end) return -1;
  const int page = bs_shift >= 0 ? j >> bs_shift : j / bs;
  const int32_t blk = table[page];
  return blk < 0 ? -1 : static_cast<int64_t>(blk) * bs + (j - page * bs);
}

// Slots of a tile's 128 keys, four a lane (key kb + lane + 32m in slots[m], -1 past `end` or
// unmapped): one table load each, all four in flight, once per tile for both K and V, so the
// gathers below issue their copies without a table load in front of each.
__device__ __forceinline__ void tile_slots(const int32_t* table, int kb, int end, int bs, int bs_shift, int (&slots)[4]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int m = 0; m < 4; ++m) slots[m] = static_cast<int>(key_slot(table, kb + lane + 32 * m, end, bs, bs_shift));
}

// The producer's part of one K or V tile: the tile's keys (slots from tile_slots) of kv head
// kvh from `cache` into the swizzled tile `dst`. Thread t copies 16-byte chunk t % 16 of rows
// t / 16 + 8i (i < 16): those rows share their swizzle (row % 8), so the destinations are 1024
// apart; row 8i + r0's slot is held by lane 8(i % 4) + r0 as slots[i / 4].
__device__ __forceinline__ void gather_tile(const ops::AttentionParams& p, const __nv_bfloat16* cache, unsigned char* dst,
                                            const int (&slots)[4], int kvh) {
  const int t = threadIdx.x, r0 = (t >> 4) & 7, ch = t & 15;
  unsigned char* d0 = dst + sw128_offset(r0, ch, kBlockK);
  const int n_kv = p.cache.n_head_kv;
#pragma unroll
  for (int i = 0; i < kBlockK / 8; ++i) {
    const int slot = __shfl_sync(0xffffffffu, slots[i >> 2], 8 * (i & 3) + r0);
    const int64_t off = slot < 0 ? 0 : (static_cast<int64_t>(slot) * n_kv + kvh) * kD + ch * 8;
    cp_async16(d0 + i * 1024, cache + off, slot >= 0);
  }
}

#endif

template <bool kPingPong>
__global__ void __launch_bounds__(kThreads, 1)
    attention_prefill_fa3_kernel(ops::AttentionParams p, float scale_log2, int bs_shift) {
#if FRUGAL_WGMMA || !defined(__CUDA_ARCH__)
  pdl_wait();
  extern __shared__ __align__(16) unsigned char smem_dyn[];
  const uint32_t a0 = smem_addr(smem_dyn);
  unsigned char* smem = smem_dyn + (((a0 + 1023u) & ~1023u) - a0);
  unsigned char* sq = smem;
  auto sk = [&](int st) { return smem + (1 + st) * kTileBytes; };
  auto sv = [&](int st) { return smem + (3 + st) * kTileBytes; };
  const uint32_t bar0 = smem_addr(smem + 5 * kTileBytes);
  auto bar = [&](int i) { return bar0 + 8u * static_cast<uint32_t>(i); };

  int seq, tile;
  if (threadIdx.x == 0) {
    for (int st = 0; st < 2; ++st) {
      mbar_init(bar(kFullK + st), 128);
      mbar_init(bar(kFullV + st), 128);
      mbar_init(bar(kEmptyK + st), 8);
      mbar_init(bar(kEmptyV + st), 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if (!find_query_tile<kBlockQ>(p, &seq, &tile)) return;  // its __syncthreads also publishes the barriers
  const int head = blockIdx.y;
  const int kvh = head / (p.n_head / p.cache.n_head_kv);
  const int q0 = p.q_start[seq], n_q = p.q_start[seq + 1] - q0, ctx = p.ctx_len[seq];
  const int i0 = tile * kBlockQ;
  const int n_valid = min(kBlockQ, n_q - i0);
  // Queries are positions ctx - n_q .. ctx - 1; this tile's last row sees keys [0, key_end).
  const int key_end = ctx - n_q + i0 + n_valid;
  const int n_tiles = (key_end + kBlockK - 1) / kBlockK;
  const int32_t* table = p.block_tables + static_cast<int64_t>(seq) * p.max_blocks_per_seq;
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);

  if (wg == 0) {
    // Producer: stage st's n-th fill waits for the (n - 1)-th completion of its empty barrier
    // (parity ((n & 1) ^ 1); a fresh barrier counts its phase "-1" as complete).
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kProducerRegs));
    const auto* kc = static_cast<const __nv_bfloat16*>(p.cache.k_cache);
    const auto* vc = static_cast<const __nv_bfloat16*>(p.cache.v_cache);
    for (int j = 0; j < n_tiles; ++j) {
      const int st = j & 1;
      const uint32_t parity = ((j >> 1) & 1) ^ 1;
      int slots[4];
      tile_slots(table, j * kBlockK, key_end, p.cache.block_size, bs_shift, slots);
      mbar_wait(bar(kEmptyK + st), parity);
      gather_tile(p, kc, sk(st), slots, kvh);
      mbar_arrive_cp_async(bar(kFullK + st));
      mbar_wait(bar(kEmptyV + st), parity);
      gather_tile(p, vc, sv(st), slots, kvh);
      mbar_arrive_cp_async(bar(kFullV + st));
    }
    asm volatile("cp.async.wait_all;" ::: "memory");  // leave no copy in flight behind an exited thread
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kConsumerRegs));
  const int c = wg - 1;  // consumer: rows 64c .. 64c + 63 of the tile
  const int ct = threadIdx.x - 128 * wg;
  const int warp = ct >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, tq = lane & 3;

  // Q rows into the swizzled tile (rows past n_valid are zeros), then to the tensor cores.
  {
    const auto* qg = static_cast<const __nv_bfloat16*>(p.q) + head * kD;
#pragma unroll
    for (int i = 0; i < 64 * 16 / 128; ++i) {
      const int idx = ct + i * 128, r = 64 * c + (idx >> 4), ch = idx & 15;
      const bool ok = r < n_valid;
      cp_async16(sq + sw128_offset(r, ch, kBlockQ), qg + (ok ? static_cast<int64_t>(q0 + i0 + r) * p.ld_q + ch * 8 : 0), ok);
    }
    cp_async_commit();
    cp_async_wait<0>();
    fence_proxy_async();
    named_sync(kBarQ + c, 128);
  }

  // Absolute positions of this thread's two rows; rows past n_q borrow the last valid row's
  // position so no row is fully masked. Key tiles that end at or before the warp's first row
  // need no mask.
  const int row0 = 64 * c + warp * 16 + g;
  int qpos[2];
  for (int h = 0; h < 2; ++h) qpos[h] = ctx - n_q + min(i0 + row0 + 8 * h, n_q - 1);
  const int wpos_lo = ctx - n_q + min(i0 + 64 * c + warp * 16, n_q - 1);

  // Descriptors: Q's 64-row slice and each k16 step's offset (bytes / 16; no carry, shared
  // addresses stay below 2^18). K is a K-major B, V an MN-major B whose two 64-dim column
  // blocks are kBlockK * 128 bytes apart (the LBO).
  const uint64_t dq = wgmma_desc_sw128(sq) + ((64 * c * 128) >> 4);
  auto k_step = [](int kk) { return static_cast<uint64_t>(((kk >> 2) * 128 * 128 + (kk & 3) * 32) >> 4); };
  const uint64_t dk0 = wgmma_desc_sw128(sk(0)), dv0 = wgmma_desc_sw128(sv(0), kBlockK * 128);
  constexpr uint64_t kStageStep = kTileBytes >> 4;  // stage 1's descriptor: stage 0's plus this

  float o[kD / 8][4] = {};
  float s[kBlockK / 8][4];
  uint32_t pa[kBlockK / 16][4];
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};

  auto issue_s = [&](int st) {
    const uint64_t dk = dk0 + st * kStageStep;
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) wgmma_m64n128k16_ss(s, dq + k_step(kk), dk + k_step(kk), kk > 0);
    wgmma_commit();
  };
  auto issue_pv = [&](int st) {
    const uint64_t dv = dv0 + st * kStageStep;
#pragma unroll
    for (int kk = 0; kk < kBlockK / 16; ++kk) wgmma_m64n128k16_rs<1>(o, pa[kk], dv + ((kk * 16 * 128) >> 4), true);
    wgmma_commit();
  };
  // Tells the producer this warp is done with a stage (all its wgmmas on it retired).
  auto release = [&](int b) {
    if (lane == 0) mbar_arrive(bar(b));
  };
  // Waits for tile j's K or V stage. The caller then orders the cp.async writes (generic
  // proxy) before the tensor cores' reads with fence_proxy_async().
  auto wait_full = [&](int b, int j) { mbar_wait(bar(b), (j >> 1) & 1); };
  // Ping-pong: wait for this consumer's turn to issue, then hand the turn to the other.
  auto turn_wait = [&] {
    if constexpr (kPingPong) named_sync(kBarTurn + c, 256);
  };
  auto turn_pass = [&] {
    if constexpr (kPingPong) named_arrive(kBarTurn + (c ^ 1), 256);
  };

  // Online softmax of tile kb in s (scores -> probabilities); alpha gets the factors O's two
  // rows must be scaled by.
  auto softmax = [&](int kb, float (&alpha)[2]) {
    if (kb + kBlockK - 1 > wpos_lo) {
#pragma unroll
      for (int nt = 0; nt < kBlockK / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (kb + nt * 8 + 2 * tq + (e & 1) > qpos[e >> 1]) s[nt][e] = -INFINITY;
    }
    float m_tile[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < kBlockK / 8; ++nt) {
      m_tile[0] = fmaxf(m_tile[0], fmaxf(s[nt][0], s[nt][1]));
      m_tile[1] = fmaxf(m_tile[1], fmaxf(s[nt][2], s[nt][3]));
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      m_tile[h] = fmaxf(m_tile[h], __shfl_xor_sync(0xffffffffu, m_tile[h], 1));
      m_tile[h] = fmaxf(m_tile[h], __shfl_xor_sync(0xffffffffu, m_tile[h], 2));
      const float m_new = fmaxf(m_run[h], m_tile[h] * scale_log2);  // log2 units
      const float base = m_new == -INFINITY ? 0.f : m_new;
      alpha[h] = fast_exp2(m_run[h] - base);
      m_run[h] = m_new;
      m_tile[h] = -base;
      l_run[h] *= alpha[h];
    }
#pragma unroll
    for (int nt = 0; nt < kBlockK / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[nt][e] = fast_exp2(fmaf(s[nt][e], scale_log2, m_tile[e >> 1]));
        l_run[e >> 1] += s[nt][e];
      }
  };
  auto pack_p = [&] {
#pragma unroll
    for (int kk = 0; kk < kBlockK / 16; ++kk) {
      pa[kk][0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
      pa[kk][1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
      pa[kk][2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      pa[kk][3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    }
  };

  // The turns: each consumer issues n_tiles + 1 times (S(0); S(j) with PV(j - 1); PV(last)).
  // Consumer 0 goes first: consumer 1 hands it the first turn and skips its own last hand-over,
  // so every named barrier completes as often as it is waited on.
  if (kPingPong && c == 1) turn_pass();

  float alpha[2];
  wait_full(kFullK, 0);
  fence_proxy_async();
  turn_wait();
  pin_regs(s);
  wgmma_fence();
  issue_s(0);
  turn_pass();
  wgmma_wait<0>();
  pin_regs(s);
  release(kEmptyK);
  softmax(0, alpha);
  pack_p();
  for (int j = 1; j < n_tiles; ++j) {
    const int st = j & 1;
    wait_full(kFullK + st, j);
    wait_full(kFullV + (st ^ 1), j - 1);
    fence_proxy_async();
    turn_wait();
    pin_regs(s);
    pin_regs(o);
    pin_regs(pa);
    wgmma_fence();
    issue_s(st);
    issue_pv(st ^ 1);
    turn_pass();
    wgmma_wait<1>();  // S(j) done; PV(j - 1) may still run
    pin_regs(s);
    release(kEmptyK + st);
    softmax(j * kBlockK, alpha);
    wgmma_wait<0>();
    pin_regs(o);
    pin_regs(pa);
    release(kEmptyV + (st ^ 1));
    // Once a row's max settles (most tiles of a long row), alpha is exactly 1: the warp skips
    // the rescale when all its rows have that.
    if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
      for (int dt = 0; dt < kD / 8; ++dt) {
        o[dt][0] *= alpha[0];
        o[dt][1] *= alpha[0];
        o[dt][2] *= alpha[1];
        o[dt][3] *= alpha[1];
      }
    }
    pack_p();
  }
  wait_full(kFullV + ((n_tiles - 1) & 1), n_tiles - 1);
  fence_proxy_async();
  turn_wait();
  pin_regs(o);
  pin_regs(pa);
  wgmma_fence();
  issue_pv((n_tiles - 1) & 1);
  if (c == 0) turn_pass();
  wgmma_wait<0>();
  pin_regs(o);

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 1);
    l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 2);
  }
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = row0 + 8 * h;
    if (r >= n_valid) continue;
    const float inv = l_run[h] > 0.f ? 1.f / l_run[h] : 0.f;
    __nv_bfloat16* orow = out + static_cast<int64_t>(q0 + i0 + r) * p.ld_out + head * kD + 2 * tq;
#pragma unroll
    for (int dt = 0; dt < kD / 8; ++dt)
      *reinterpret_cast<__nv_bfloat162*>(orow + dt * 8) = __floats2bfloat162_rn(o[dt][2 * h] * inv, o[dt][2 * h + 1] * inv);
  }
#else
  (void)p, (void)scale_log2, (void)bs_shift;
  __trap();
#endif
}

template <bool kPingPong>
cudaError_t launch_mode(const ops::AttentionParams& p, cudaStream_t stream) {
  if (cudaError_t e = raise_dynamic_smem_once<attention_prefill_fa3_kernel<kPingPong>>(kSmemBytes); e != cudaSuccess) return e;
  // Upper bound on tiles: each sequence adds at most one partial tile.
  const unsigned tiles = static_cast<unsigned>((p.n_tokens + kBlockQ - 1) / kBlockQ + p.n_seqs);
  const dim3 grid(tiles, static_cast<unsigned>(p.n_head));
  const int bs = p.cache.block_size;
  const int bs_shift = (bs & (bs - 1)) == 0 ? __builtin_ctz(static_cast<unsigned>(bs)) : -1;
  return launch_kernel(attention_prefill_fa3_kernel<kPingPong>, grid, kThreads, kSmemBytes, stream, p,
                       p.scale * 1.4426950408889634f, bs_shift);
}

}  // namespace

cudaError_t launch_attention_prefill_fa3(const ops::AttentionParams& p, bool ping_pong, cudaStream_t stream) {
  return ping_pong ? launch_mode<true>(p, stream) : launch_mode<false>(p, stream);
}

}  // namespace frugal::cuda
