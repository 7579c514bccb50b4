// Prefill attention over the paged KV cache, FlashAttention-2 style: one block per (64-query
// tile of one sequence, query head); four warps own 16 query rows each; K/V tiles of 64 keys
// are gathered through the block table into shared memory; S = QK^T and O += PV run on tensor
// cores (mma.sync m16n8k16 bf16, fp32 accumulate) with the online softmax in registers.
// The P accumulator fragment is reused directly as the A operand of PV (no shared round trip).
// K fragments come by ldmatrix; key tiles that every row of a warp sees whole skip the mask.
// fp8 e4m3 and int8 caches (template E) are gathered raw and widened to bf16 in shared memory
// (both are exact in bf16); fp8's per-layer scales go into the score scale and the output,
// int8's per-key scales multiply the scores and the probabilities of the PV product. Attention
// sinks: the key tiles holding [0, S) are visited before the window's, the ones between skipped.
// On sm_90a (kWg) the same block is one warpgroup: S = QK^T and O += PV run as wgmma with Q and
// P from registers and K / V read by the tensor cores straight from 128-byte-swizzled shared
// tiles (wgmma.cuh), so no ldmatrix traffic; the softmax, masks, splits and the 8-bit widening
// are shared with the mma.sync variant, which stays for other GPUs and as the A/B baseline
// (FRUGAL_PREFILL_WGMMA=0). launch_attention_prefill hands the bf16, head_dim 128 cases without
// window or key split to attention_prefill_fa3.cu's warp-specialised kernel (unless
// FRUGAL_PREFILL_FA3=0); this file's kernels take the rest.
#include <algorithm>
#include <cstdlib>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_quant.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/prefill_tiles.cuh"
#include "backend/cuda/wgmma.cuh"

namespace frugal::cuda {
namespace {

constexpr int kBlockQ = 64;
constexpr int kBlockK = 64;
constexpr int kPad = 8;  // bf16 per row: 16 bytes, so fragment loads and ldmatrix hit 32 banks
constexpr int kThreads = 128;

__device__ __forceinline__ uint32_t lds32(const __nv_bfloat16* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// Element offset of (key row r, 8-value chunk ch) in a bf16 K or V tile: padded rows of D + kPad
// for the mma.sync kernel, the 128-byte swizzle of wgmma.cuh for the wgmma one.
template <int D, bool kWg>
__device__ __forceinline__ int tile_off(int r, int ch) {
  if constexpr (kWg) {
    return static_cast<int>(sw128_offset(r, ch, kBlockK) / 2);
  } else {
    return r * (D + kPad) + ch * 8;
  }
}


// Copies rows [0, kBlockQ) of a tile into shared memory; invalid rows become zeros.
template <int D>
__device__ __forceinline__ void load_q_tile(const ops::AttentionParams& p, __nv_bfloat16* sq, int t0,
                                            int n_valid, int head) {
  constexpr int kChunks = D / 8;
  for (int idx = threadIdx.x; idx < kBlockQ * kChunks; idx += kThreads) {
    int r = idx / kChunks, ch = idx % kChunks;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r < n_valid)
      v = *reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.q) +
                                          static_cast<int64_t>(t0 + r) * p.ld_q + head * D + ch * 8);
    *reinterpret_cast<uint4*>(sq + r * (D + kPad) + ch * 8) = v;
  }
}

// Slot of key j in the paged cache, or -1 when j >= end or its block was released (-1: behind
// the window, no sink; never visible, zero-filled). bs_shift = log2(block_size) when the block
// size is a power of two (the division is most of a gather's integer work otherwise), else -1.
__device__ __forceinline__ int64_t key_slot(const int32_t* table, int j, int end, int bs, int bs_shift) {
  if (j >= end) return -1;
  const int page = bs_shift >= 0 ? j >> bs_shift : j / bs;
  const int32_t blk = table[page];
  return blk < 0 ? -1 : static_cast<int64_t>(blk) * bs + (j - page * bs);
}

// Starts the asynchronous gather of keys [kb, kb + kBlockK) of kv head kvh through the block
// table; keys >= end are zero-filled so masked probabilities (exactly 0) never multiply garbage.
template <int D, bool kWg>
__device__ __forceinline__ void load_kv_tile(const ops::AttentionParams& p, const int32_t* table,
                                             __nv_bfloat16* sk, __nv_bfloat16* sv, int kb, int end,
                                             int kvh, int bs_shift) {
  constexpr int kChunks = D / 8;
  const auto& c = p.cache;
  const auto* kc = static_cast<const __nv_bfloat16*>(c.k_cache);
  const auto* vc = static_cast<const __nv_bfloat16*>(c.v_cache);
#pragma unroll
  for (int it = 0; it < kBlockK * kChunks / kThreads; ++it) {
    const int idx = threadIdx.x + it * kThreads;
    const int r = idx / kChunks, ch = idx % kChunks;
    const int64_t slot = key_slot(table, kb + r, end, c.block_size, bs_shift);
    const int64_t off = slot < 0 ? 0 : (slot * c.n_head_kv + kvh) * D + ch * 8;
    cp_async16(sk + tile_off<D, kWg>(r, ch), kc + off, slot >= 0);
    cp_async16(sv + tile_off<D, kWg>(r, ch), vc + off, slot >= 0);
  }
  cp_async_commit();
}

// 8-bit caches (fp8 e4m3, int8): the raw K and V rows of keys [kb, kb + kBlockK) ([kBlockK][D]
// bytes each) and, for int8, their scales ([2][kBlockK] f32: K then V) are gathered into one raw
// stage; convert_kv_tile then widens them to bf16 for the tensor cores.
template <int D, bool kInt8>
__device__ __forceinline__ void load_kv_tile8(const ops::AttentionParams& p, const int32_t* table, uint8_t* rk,
                                              uint8_t* rv, float* rscale, int kb, int end, int kvh,
                                              int bs_shift) {
  constexpr int kChunks = D / 16;
  const auto& c = p.cache;
  const auto* kc = static_cast<const uint8_t*>(c.k_cache);
  const auto* vc = static_cast<const uint8_t*>(c.v_cache);
#pragma unroll
  for (int it = 0; it < kBlockK * kChunks / kThreads; ++it) {
    const int idx = threadIdx.x + it * kThreads;
    const int r = idx / kChunks, ch = idx % kChunks;
    const int64_t slot = key_slot(table, kb + r, end, c.block_size, bs_shift);
    const int64_t off = slot < 0 ? 0 : (slot * c.n_head_kv + kvh) * D + ch * 16;
    cp_async16(rk + r * D + ch * 16, kc + off, slot >= 0);
    cp_async16(rv + r * D + ch * 16, vc + off, slot >= 0);
  }
  if constexpr (kInt8) {
    static_assert(kThreads == 2 * kBlockK, "one scale per thread");
    const int r = threadIdx.x % kBlockK;
    const bool is_v = threadIdx.x >= kBlockK;
    const int64_t slot = key_slot(table, kb + r, end, c.block_size, bs_shift);
    const int64_t off = slot < 0 ? 0 : slot * c.n_head_kv + kvh;
    cp_async<4>(rscale + threadIdx.x, (is_v ? c.v_scales : c.k_scales) + off, slot >= 0);
  }
  cp_async_commit();
}

// 16 cache bytes (fp8 e4m3 or int8 codes) to 16 bf16 values, exactly (no scale applied): the
// first 8 to lo, the last 8 to hi.
template <KvElem E>
__device__ __forceinline__ void widen16(uint4 raw, __nv_bfloat16* lo, __nv_bfloat16* hi) {
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
  uint32_t o[8];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float f[4];
    if constexpr (E == KvElem::kFp8) {
      const float2 a = fp8x2_to_float2(static_cast<uint16_t>(w[i] & 0xffffu));
      const float2 b = fp8x2_to_float2(static_cast<uint16_t>(w[i] >> 16));
      f[0] = a.x, f[1] = a.y, f[2] = b.x, f[3] = b.y;
    } else {
#pragma unroll
      for (int b = 0; b < 4; ++b) f[b] = static_cast<float>(static_cast<int8_t>((w[i] >> (8 * b)) & 0xffu));
    }
    o[2 * i] = pack_bf16(f[0], f[1]);
    o[2 * i + 1] = pack_bf16(f[2], f[3]);
  }
  *reinterpret_cast<uint4*>(lo) = make_uint4(o[0], o[1], o[2], o[3]);
  *reinterpret_cast<uint4*>(hi) = make_uint4(o[4], o[5], o[6], o[7]);
}

template <int D, KvElem E, bool kWg>
__device__ __forceinline__ void convert_kv_tile(const uint8_t* rk, const uint8_t* rv, __nv_bfloat16* sk,
                                                __nv_bfloat16* sv) {
  constexpr int kChunks = D / 16;
#pragma unroll
  for (int it = 0; it < kBlockK * kChunks / kThreads; ++it) {
    const int idx = threadIdx.x + it * kThreads;
    const int r = idx / kChunks, ch = idx % kChunks;
    const int lo = tile_off<D, kWg>(r, 2 * ch), hi = tile_off<D, kWg>(r, 2 * ch + 1);
    widen16<E>(*reinterpret_cast<const uint4*>(rk + r * D + ch * 16), sk + lo, sk + hi);
    widen16<E>(*reinterpret_cast<const uint4*>(rv + r * D + ch * 16), sv + lo, sv + hi);
  }
}

// Split along the keys (grid.z = split, kv_chunk keys each, a multiple of kBlockK): each split
// writes its unnormalized output rows and (max, sum) to part_o / part_ml for
// attention_combine_kernel; with one split the block writes the normalized output itself.
struct PrefillSplit {
  int kv_chunk;
  int n_splits;
  float* part_o;    // [n_tokens, n_head, n_splits, D]
  float2* part_ml;  // [n_tokens, n_head, n_splits]
};

// Shared memory, in bf16 rows of D + kPad:
//   bf16 cache:  Q [kBlockQ] (its fragments go to registers first, then the rows are free),
//                2 stages x (K, V) [kBlockK]
//   8-bit cache: Q [kBlockQ], one bf16 (K, V) tile, then 2 raw stages of (K, V) [kBlockK][D]
//                bytes and [2][kBlockK] f32 scales.
// The wgmma variant has no Q rows (its fragments are loaded from global memory) and unpadded
// swizzled K / V tiles, 1024-aligned: 1 KB of slack lets the kernel align the base.
template <int D, KvElem E, bool kWg>
constexpr int smem_bytes() {
  constexpr int kRaw = 2 * (2 * kBlockK * D + 2 * kBlockK * 4);
  if constexpr (kWg) {
    return 1024 + (E == KvElem::kBF16 ? 4 : 2) * kBlockK * D * 2 + (E == KvElem::kBF16 ? 0 : kRaw);
  } else if constexpr (E == KvElem::kBF16) {
    return (kBlockQ + 4 * kBlockK) * (D + kPad) * 2;
  } else {
    return (kBlockQ + 2 * kBlockK) * (D + kPad) * 2 + kRaw;
  }
}

template <int D, KvElem E, bool kWg>
__global__ void __launch_bounds__(kThreads, kWg ? 3 : 1) attention_prefill_kernel(ops::AttentionParams p, float scale_log2,
                                                                     float v_mult, PrefillSplit sp, int bs_shift) {
  pdl_wait();
  static_assert(!kWg || kThreads == 128, "the wgmma variant is one warpgroup");
  constexpr int SD = kWg ? D : D + kPad;  // K / V tile row pitch in bf16 (wgmma: swizzled, unpadded)
  constexpr bool kQuant = E != KvElem::kBF16;
  constexpr bool kInt8 = E == KvElem::kInt8;
  constexpr int kRawStage = 2 * kBlockK * D + 2 * kBlockK * 4;  // bytes: K, V, scales
  extern __shared__ __align__(16) unsigned char smem_dyn[];
  // wgmma: the swizzle works on address bits, so the tiles start 1024-aligned.
  unsigned char* smem_raw = smem_dyn;
  if constexpr (kWg) {
    const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(smem_dyn));
    smem_raw += ((a + 1023u) & ~1023u) - a;
  }
  __nv_bfloat16* sq = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  constexpr int kQRows = kWg ? 0 : kBlockQ;
  // Two K/V stages (K then V, kBlockK rows each): the next tile's gather overlaps this tile's
  // math. Addressed arithmetically: a pointer array indexed by stage would live in local memory.
  auto stage_k = [&](int st) { return sq + (kQRows + st * 2 * kBlockK) * SD; };
  uint8_t* raw0 = smem_raw + (kQRows + 2 * kBlockK) * SD * 2;  // 8-bit caches only
  auto raw_k = [&](int st) { return raw0 + st * kRawStage; };
  auto raw_scale = [&](int st) { return reinterpret_cast<float*>(raw0 + st * kRawStage + 2 * kBlockK * D); };

  int seq, tile;
  if (!find_query_tile<kBlockQ>(p, &seq, &tile)) return;
  const int head = blockIdx.y;
  const int kvh = head / (p.n_head / p.cache.n_head_kv);
  const int q0 = p.q_start[seq], n_q = p.q_start[seq + 1] - q0, ctx = p.ctx_len[seq];
  // Partial rows count from the launch's first token (q_start may be offset past decoders
  // that another kernel handles); out rows are absolute.
  const int pr0 = q0 - p.q_start[0];
  const int i0 = tile * kBlockQ;
  const int n_valid = min(kBlockQ, n_q - i0);
  const int32_t* table = p.block_tables + static_cast<int64_t>(seq) * p.max_blocks_per_seq;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, tq = lane & 3;
  // Absolute positions of this thread's two rows (g and g + 8 of the warp's 16); rows past
  // n_q borrow the last valid row's position so no row is fully masked.
  int qpos[2];
  for (int h = 0; h < 2; ++h) qpos[h] = ctx - n_q + min(i0 + warp * 16 + g + 8 * h, n_q - 1);
  // The warp's rows span positions [wpos_lo, wpos_hi]: a key tile inside every row's visible
  // range needs no mask.
  const int wpos_lo = ctx - n_q + min(i0 + warp * 16, n_q - 1), wpos_hi = ctx - n_q + min(i0 + warp * 16 + 15, n_q - 1);
  const int first_pos = ctx - n_q + i0, last_pos = ctx - n_q + i0 + n_valid - 1;
  const int window = p.sliding_window;
  const int key_lo = window > 0 ? max(0, first_pos - window + 1) : 0;
  const int key_end = last_pos + 1;
  // Attention sinks: keys [0, sinks) below the window are visited in tiles [0, sink_tiles_end);
  // the tiles between it and the window's first tile (win_start) are skipped.
  const int sinks = window > 0 ? p.sink_tokens : 0;
  const int sink_end = min(sinks, key_lo);
  const int sink_tiles_end = ((sink_end + kBlockK - 1) / kBlockK) * kBlockK;
  const int win_start = (key_lo / kBlockK) * kBlockK;
  const bool gap = sink_end > 0 && sink_tiles_end < win_start;
  auto skip_gap = [&](int kb) { return gap && kb >= sink_tiles_end && kb < win_start ? win_start : kb; };

  // This split's keys: [kb_first, kb_end), tiles aligned to kBlockK (kv_chunk is a multiple).
  // A tile whose keys all lie in one split (a decoder, a short prompt) is finished by that
  // split's block, which writes the output itself and flags the rows (sum -1) so the combine
  // leaves them alone; its other splits are empty.
  const int split = blockIdx.z;
  int kb_first = sink_end > 0 ? 0 : win_start, kb_end = key_end;
  bool write_final = sp.n_splits == 1;
  if (sp.n_splits > 1) {
    const int s_lo = kb_first / sp.kv_chunk, s_hi = (key_end - 1) / sp.kv_chunk;
    bool empty;
    if (s_lo == s_hi) {
      write_final = split == s_lo;
      empty = !write_final;
    } else {
      kb_first = skip_gap(max(kb_first, split * sp.kv_chunk));
      kb_end = min(kb_end, (split + 1) * sp.kv_chunk);
      empty = kb_first >= kb_end;
    }
    if (empty || write_final) {
      const float2 mark = empty ? make_float2(-INFINITY, 0.f) : make_float2(0.f, -1.f);
      for (int r = threadIdx.x; r < n_valid; r += kThreads)
        sp.part_ml[(static_cast<int64_t>(pr0 + i0 + r) * p.n_head + head) * sp.n_splits + split] = mark;
      if (empty) return;
    }
  }

  uint32_t qf[D / 16][4];
  if constexpr (kWg) {
    // The A fragments straight from global memory (rows past n_valid are zeros).
    const auto* qg = static_cast<const __nv_bfloat16*>(p.q) + head * D + 2 * tq;
    const int r_lo = warp * 16 + g, r_hi = r_lo + 8;
    const __nv_bfloat16* q_lo = qg + static_cast<int64_t>(q0 + i0 + r_lo) * p.ld_q;
    const __nv_bfloat16* q_hi = qg + static_cast<int64_t>(q0 + i0 + r_hi) * p.ld_q;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      qf[kk][0] = r_lo < n_valid ? lds32(q_lo + kk * 16) : 0u;
      qf[kk][1] = r_hi < n_valid ? lds32(q_hi + kk * 16) : 0u;
      qf[kk][2] = r_lo < n_valid ? lds32(q_lo + kk * 16 + 8) : 0u;
      qf[kk][3] = r_hi < n_valid ? lds32(q_hi + kk * 16 + 8) : 0u;
    }
  } else {
    load_q_tile<D>(p, sq, q0 + i0, n_valid, head);
    __syncthreads();
    const __nv_bfloat16* qrow = sq + (warp * 16 + g) * SD + 2 * tq;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      qf[kk][0] = lds32(qrow + kk * 16);
      qf[kk][1] = lds32(qrow + 8 * SD + kk * 16);
      qf[kk][2] = lds32(qrow + kk * 16 + 8);
      qf[kk][3] = lds32(qrow + 8 * SD + kk * 16 + 8);
    }
  }

  float o[D / 8][4] = {};
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
  // Keys past kb_end inside the last tile are zero-filled; they lie past the causal diagonal
  // (kb_end < key_end only at a split boundary, which is tile-aligned).
  if constexpr (kQuant) {
    load_kv_tile8<D, kInt8>(p, table, raw_k(0), raw_k(0) + kBlockK * D, raw_scale(0), kb_first, kb_end, kvh, bs_shift);
  } else {
    load_kv_tile<D, kWg>(p, table, stage_k(0), stage_k(0) + kBlockK * SD, kb_first, kb_end, kvh, bs_shift);
  }
  for (int kb = kb_first, stage = 0; kb < kb_end; stage ^= 1) {
    const int kb_next = skip_gap(kb + kBlockK);
    if (kb_next < kb_end) {
      if constexpr (kQuant) {
        load_kv_tile8<D, kInt8>(p, table, raw_k(stage ^ 1), raw_k(stage ^ 1) + kBlockK * D, raw_scale(stage ^ 1),
                                kb_next, kb_end, kvh, bs_shift);
      } else {
        load_kv_tile<D, kWg>(p, table, stage_k(stage ^ 1), stage_k(stage ^ 1) + kBlockK * SD, kb_next, kb_end, kvh,
                             bs_shift);
      }
      cp_async_wait<1>();  // this tile's group is done, the next one may still be in flight
    } else {
      cp_async_wait<0>();
    }
    if constexpr (kWg && !kQuant) fence_proxy_async();  // the gathered tile, to the tensor cores' reads
    __syncthreads();
    const __nv_bfloat16* sk = kQuant ? stage_k(0) : stage_k(stage);
    const __nv_bfloat16* sv = sk + kBlockK * SD;
    const float* ssc = kQuant ? raw_scale(stage) : nullptr;  // int8: K scales [kBlockK], V scales [kBlockK]
    if constexpr (kQuant) {
      convert_kv_tile<D, E, kWg>(raw_k(stage), raw_k(stage) + kBlockK * D, stage_k(0), stage_k(0) + kBlockK * SD);
      if constexpr (kWg) fence_proxy_async();
      __syncthreads();
    }

    // S = Q K^T. K fragments by ldmatrix (non-transposed): one x4 load gives the B fragments of
    // two 8-key column tiles at one 16-dim step. kk outer, nt inner: consecutive mmas write
    // different accumulators (no dependent chain).
    float s[kBlockK / 8][4] = {};
    if constexpr (kWg) {
      // K as a K-major B: the k16 step kk reads dims [16 kk, 16 kk + 16) of every key row.
      // Descriptors of later steps: the base's plus the byte offset / 16 (no carry: shared
      // addresses stay below 2^18).
      const uint64_t dk = wgmma_desc_sw128(sk);
      wgmma_sync_group(qf, s, [&] {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
          wgmma_m64n64k16_bf16<0>(s, qf[kk], dk + (((kk / 4) * kBlockK * 128 + (kk % 4) * 32) >> 4), kk > 0);
      });
    } else {
      const __nv_bfloat16* krow = sk + ((lane >> 4) * 8 + (lane & 7)) * SD + ((lane >> 3) & 1) * 8;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
        for (int nt = 0; nt < kBlockK / 8; nt += 2) {
          uint32_t b[4];
          ldmatrix_x4(b, krow + nt * 8 * SD + kk * 16);
          mma_bf16(s[nt], qf[kk], b[0], b[1]);
          mma_bf16(s[nt + 1], qf[kk], b[2], b[3]);
        }
      }
    }

    // Mask (causal, window, sinks); tiles every row of the warp sees whole skip the compares.
    // The row max is taken on the raw scores and scaled once (the scale is positive), and the
    // scale goes into each exponent's FMA; int8 scales its scores per key first.
    const bool full = kb + kBlockK - 1 <= wpos_lo && (window <= 0 || kb > wpos_hi - window);
    constexpr bool kPerKeyScale = kInt8;
    const float sl = kPerKeyScale ? 1.f : scale_log2;
    float m_tile[2] = {-INFINITY, -INFINITY};
    if constexpr (kPerKeyScale) {
#pragma unroll
      for (int nt = 0; nt < kBlockK / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[nt][e] *= scale_log2 * ssc[nt * 8 + 2 * tq + (e & 1)];
    }
    if (!full) {
#pragma unroll
      for (int nt = 0; nt < kBlockK / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int h = e >> 1, j = kb + nt * 8 + 2 * tq + (e & 1);
          const bool ok = j <= qpos[h] && (window <= 0 || j > qpos[h] - window || j < sinks);
          s[nt][e] = ok ? s[nt][e] : -INFINITY;
        }
      }
    }
#pragma unroll
    for (int nt = 0; nt < kBlockK / 8; ++nt) {
      m_tile[0] = fmaxf(m_tile[0], fmaxf(s[nt][0], s[nt][1]));
      m_tile[1] = fmaxf(m_tile[1], fmaxf(s[nt][2], s[nt][3]));
    }
    float alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      m_tile[h] = fmaxf(m_tile[h], __shfl_xor_sync(0xffffffffu, m_tile[h], 1));
      m_tile[h] = fmaxf(m_tile[h], __shfl_xor_sync(0xffffffffu, m_tile[h], 2));
      float m_new = fmaxf(m_run[h], m_tile[h] * sl);  // log2 units
      float base = m_new == -INFINITY ? 0.f : m_new;  // a fully masked row so far stays at zero
      alpha[h] = fast_exp2(m_run[h] - base);
      m_run[h] = m_new;
      m_tile[h] = -base;
      l_run[h] *= alpha[h];
    }
#pragma unroll
    for (int nt = 0; nt < kBlockK / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[nt][e] = fast_exp2(fmaf(s[nt][e], sl, m_tile[e >> 1]));
        l_run[e >> 1] += s[nt][e];
        if constexpr (kInt8) s[nt][e] *= ssc[kBlockK + nt * 8 + 2 * tq + (e & 1)];  // V's scale, after the sum
      }
    }
    // Once a row's max settles (most tiles of a long row), alpha is exactly 1: the warp skips
    // the rescale when all its rows have that.
    if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        o[dt][0] *= alpha[0];
        o[dt][1] *= alpha[0];
        o[dt][2] *= alpha[1];
        o[dt][3] *= alpha[1];
      }
    }
    uint32_t pa[kBlockK / 16][4];
#pragma unroll
    for (int kk = 0; kk < kBlockK / 16; ++kk) {
      pa[kk][0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
      pa[kk][1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
      pa[kk][2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      pa[kk][3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    }
    if constexpr (kWg) {
      // V as an MN-major B: the k16 step kk reads key rows [16 kk, 16 kk + 16), one wgmma per
      // 64-wide block of head dims.
      const uint64_t dv = wgmma_desc_sw128(sv);
      wgmma_sync_group(pa, o, [&] {
#pragma unroll
        for (int kk = 0; kk < kBlockK / 16; ++kk) {
#pragma unroll
          for (int h = 0; h < D / 64; ++h)
            wgmma_m64n64k16_bf16<1>(*reinterpret_cast<float(*)[8][4]>(&o[8 * h][0]), pa[kk],
                                    dv + ((h * kBlockK * 128 + kk * 16 * 128) >> 4), true);
        }
      });
    } else {
#pragma unroll
      for (int kk = 0; kk < kBlockK / 16; ++kk) {
        const __nv_bfloat16* vrow = sv + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * SD + (lane >> 4) * 8;
#pragma unroll
        for (int dt = 0; dt < D / 8; dt += 2) {
          uint32_t b[4];
          ldmatrix_x4_trans(b, vrow + dt * 8);
          mma_bf16(o[dt], pa[kk], b[0], b[1]);
          mma_bf16(o[dt + 1], pa[kk], b[2], b[3]);
        }
      }
    }
    __syncthreads();  // the next iteration's gather overwrites the stage read two tiles ahead
    kb = kb_next;
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 1);
    l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 2);
  }
  if (!write_final) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = warp * 16 + g + 8 * h;
      if (r >= n_valid) continue;
      const int64_t row = (static_cast<int64_t>(pr0 + i0 + r) * p.n_head + head) * sp.n_splits + split;
      if (tq == 0) sp.part_ml[row] = l_run[h] > 0.f ? make_float2(m_run[h], l_run[h]) : make_float2(-INFINITY, 0.f);
      float* prow = sp.part_o + row * D + 2 * tq;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt)
        *reinterpret_cast<float2*>(prow + dt * 8) = make_float2(o[dt][2 * h] * v_mult, o[dt][2 * h + 1] * v_mult);
    }
    return;
  }
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = warp * 16 + g + 8 * h;
    if (r >= n_valid) continue;
    const float inv = l_run[h] > 0.f ? v_mult / l_run[h] : 0.f;
    __nv_bfloat16* orow = out + static_cast<int64_t>(q0 + i0 + r) * p.ld_out + head * D + 2 * tq;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
      *reinterpret_cast<__nv_bfloat162*>(orow + dt * 8) =
          __floats2bfloat162_rn(o[dt][2 * h] * inv, o[dt][2 * h + 1] * inv);
  }
}

template <int D, KvElem E, bool kWg>
cudaError_t configure() {
  return raise_dynamic_smem_once<attention_prefill_kernel<D, E, kWg>>(smem_bytes<D, E, kWg>());
}

// Blocks of the kernel resident per SM.
template <int D, KvElem E, bool kWg>
int resident_blocks() {
  return cached_blocks_per_sm<attention_prefill_kernel<D, E, kWg>>(kThreads, smem_bytes<D, E, kWg>(), 1);
}

KvElem kv_elem(DType t) { return t == DType::kF8E4M3 ? KvElem::kFp8 : t == DType::kI8 ? KvElem::kInt8 : KvElem::kBF16; }

template <int D, bool kWg>
int resident_blocks_dw(const ops::AttentionParams& p) {
  switch (kv_elem(p.cache.cache_dtype)) {
    case KvElem::kFp8: return resident_blocks<D, KvElem::kFp8, kWg>();
    case KvElem::kInt8: return resident_blocks<D, KvElem::kInt8, kWg>();
    default: return resident_blocks<D, KvElem::kBF16, kWg>();
  }
}

template <int D>
int resident_blocks_d(const ops::AttentionParams& p) {
  return prefill_wgmma_enabled() ? resident_blocks_dw<D, true>(p) : resident_blocks_dw<D, false>(p);
}

template <int D, KvElem E, bool kWg>
cudaError_t launch_dew(const ops::AttentionParams& p, const PrefillSplit& sp, cudaStream_t stream) {
  const int smem = smem_bytes<D, E, kWg>();
  if (cudaError_t e = configure<D, E, kWg>(); e != cudaSuccess) return e;
  // Upper bound on tiles: each sequence adds at most one partial tile.
  const unsigned tiles = static_cast<unsigned>((p.n_tokens + kBlockQ - 1) / kBlockQ + p.n_seqs);
  dim3 grid(tiles, static_cast<unsigned>(p.n_head), static_cast<unsigned>(sp.n_splits));
  // fp8: the per-layer K scale goes into the scores' scale, the V scale onto the output.
  const bool fp8 = E == KvElem::kFp8;
  const float scale_log2 = p.scale * 1.4426950408889634f * (fp8 ? p.cache.k_scale : 1.f);
  const float v_mult = fp8 ? p.cache.v_scale : 1.f;
  const int bs = p.cache.block_size;
  const int bs_shift = (bs & (bs - 1)) == 0 ? __builtin_ctz(static_cast<unsigned>(bs)) : -1;
  cudaError_t e = launch_kernel(attention_prefill_kernel<D, E, kWg>, grid, kThreads, smem, stream, p, scale_log2,
                                v_mult, sp, bs_shift);
  if (e != cudaSuccess || sp.n_splits == 1) return e;
  return launch_attention_combine(p, sp.n_splits, sp.part_o, sp.part_ml, stream);
}

template <int D, KvElem E>
cudaError_t launch_de(const ops::AttentionParams& p, const PrefillSplit& sp, cudaStream_t stream) {
  return prefill_wgmma_enabled() ? launch_dew<D, E, true>(p, sp, stream) : launch_dew<D, E, false>(p, sp, stream);
}

template <int D>
cudaError_t launch_d(const ops::AttentionParams& p, const PrefillSplit& sp, cudaStream_t stream) {
  switch (kv_elem(p.cache.cache_dtype)) {
    case KvElem::kFp8: return launch_de<D, KvElem::kFp8>(p, sp, stream);
    case KvElem::kInt8: return launch_de<D, KvElem::kInt8>(p, sp, stream);
    default: return launch_de<D, KvElem::kBF16>(p, sp, stream);
  }
}

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

}  // namespace

bool attention_prefill_supported(const ops::AttentionParams& p) {
  const auto& c = p.cache;
  // int8 scales are gathered 4 bytes at a time (cp.async), the codes 16 bytes at a time.
  const bool cache_ok = c.cache_dtype == DType::kBF16 || c.cache_dtype == DType::kF8E4M3 ||
                        (c.cache_dtype == DType::kI8 && c.k_scales != nullptr && c.v_scales != nullptr &&
                         (reinterpret_cast<uintptr_t>(c.k_scales) & 3u) == 0 && (reinterpret_cast<uintptr_t>(c.v_scales) & 3u) == 0);
  return p.act_dtype == DType::kBF16 && cache_ok &&
         (c.head_dim == 64 || c.head_dim == 128) && p.ld_q % 8 == 0 && p.ld_out % 2 == 0 &&
         aligned16(p.q) && aligned16(c.k_cache) && aligned16(c.v_cache) && aligned16(p.out) &&
         c.n_head_kv > 0 && p.n_head % c.n_head_kv == 0;
}

// A chunk late in a long prompt has few query tiles, each walking the whole context: 128
// queries over 10k keys are 2 tiles x 28 heads = 56 blocks of 156 key tiles on 132 SMs. Such
// steps split the keys. The split count minimizes (waves of resident blocks) x (key tiles per
// split), fewer splits on ties: 10 splits of 64 queries x 28 heads are 280 blocks, two waves
// of 264 slots, as slow as 20 splits; 9 splits fit one wave. Launches with many query tiles
// already fill the GPU (and would only add partial traffic): only those under
// kSplitMaxBlocksPerSm tiles per SM split. Partials are capped at kMaxPartialBytes.
constexpr int64_t kSplitAbove = 2048, kMinSplitKeys = 256, kSplitMaxBlocksPerSm = 4;
constexpr int64_t kMaxPartialBytes = int64_t{256} << 20;

namespace {
DefaultOnSwitch g_split("FRUGAL_PREFILL_SPLIT");  // set_prefill_split_enabled
}  // namespace

// The wgmma variant needs an sm_90a cubin in this build and a compute capability 9.0 device
// (set by the backend at creation); FRUGAL_PREFILL_WGMMA=0 or set_prefill_wgmma_enabled(false)
// keep the mma.sync kernel. Same threading rule as the split mode.
namespace {
bool g_wgmma_device = false;
DefaultOnSwitch g_wgmma("FRUGAL_PREFILL_WGMMA");
}  // namespace

void set_prefill_wgmma_device(int cc_major, int cc_minor) {
#if defined(FRUGAL_HAVE_SM90A)
  g_wgmma_device = cc_major == 9 && cc_minor == 0;
#else
  (void)cc_major, (void)cc_minor;
  g_wgmma_device = false;
#endif
}

bool prefill_wgmma_enabled() { return g_wgmma_device && g_wgmma.on(); }

void set_prefill_wgmma_enabled(bool on) { g_wgmma.set(on); }

// The FlashAttention-3-style kernel (attention_prefill_fa3.cu): on by default (H200, 2026-12-03:
// 484 against 303 TFLOP/s on an 8k chunk at a 32k context; ping-pong 480). Same device
// condition and threading rule as the wgmma variant.
namespace {
int g_fa3_mode = -1;  // -1: unset (read FRUGAL_PREFILL_FA3 on first use), 0 off, 1 on, 2 ping-pong
}  // namespace

int prefill_fa3_mode() {
  if (g_fa3_mode < 0) {
    const char* e = std::getenv("FRUGAL_PREFILL_FA3");
    g_fa3_mode = (e != nullptr && (e[0] == '0' || e[0] == '2')) ? e[0] - '0' : 1;
  }
  return g_fa3_mode;
}

void set_prefill_fa3_mode(int mode) { g_fa3_mode = mode; }

bool attention_prefill_fa3_applies(const ops::AttentionParams& p, int n_splits) {
  return prefill_fa3_mode() != 0 && g_wgmma_device && n_splits <= 1 && p.cache.cache_dtype == DType::kBF16 &&
         p.cache.head_dim == 128 && p.sliding_window <= 0 && attention_prefill_supported(p);
}

bool prefill_split_enabled() { return g_split.on(); }

void set_prefill_split_enabled(bool on) { g_split.set(on); }

int attention_prefill_splits(const ops::AttentionParams& p, int n_sms) {
  if (p.max_ctx_len <= kSplitAbove || !prefill_split_enabled()) return 1;
  // Query tiles: exact for one sequence; each further sequence may add a partial tile. Many
  // one-token sequences (decoders the caller did not hand to the decode kernel) fill the GPU
  // with tiles already, and every split would multiply their launches.
  const int64_t blocks = (ceil_div(p.n_tokens, kBlockQ) + p.n_seqs - 1) * p.n_head;
  if (blocks >= kSplitMaxBlocksPerSm * std::max(1, n_sms)) return 1;
  const int64_t slots = int64_t{std::max(1, n_sms)} * (p.cache.head_dim == 64 ? resident_blocks_d<64>(p) : resident_blocks_d<128>(p));
  const int64_t key_tiles = ceil_div(p.max_ctx_len, kBlockK);
  const int64_t per_split = static_cast<int64_t>(p.n_tokens) * p.n_head * (p.cache.head_dim + 2) * 4;
  const int64_t n_max = std::min<int64_t>({ceil_div(p.max_ctx_len, kMinSplitKeys), kMaxPartialBytes / std::max<int64_t>(1, per_split), 1024});
  int64_t best = 1, best_cost = ceil_div(blocks, slots) * key_tiles;
  for (int64_t n = 2; n <= n_max; ++n) {
    const int64_t cost = ceil_div(blocks * n, slots) * ceil_div(key_tiles, n);
    if (cost < best_cost) {
      best = n;
      best_cost = cost;
    }
  }
  return static_cast<int>(best);
}

size_t attention_prefill_scratch_bytes(const ops::AttentionParams& p, int n_splits) {
  if (n_splits <= 1) return 0;
  return static_cast<size_t>(p.n_tokens) * p.n_head * n_splits * (p.cache.head_dim + 2) * sizeof(float);
}

cudaError_t launch_attention_prefill(const ops::AttentionParams& p, int n_splits, void* partials, cudaStream_t stream) {
  if (p.n_tokens == 0 || p.n_seqs == 0) return cudaSuccess;
  PrefillSplit sp{0, 1, nullptr, nullptr};
  if (n_splits > 1 && partials != nullptr) {
    sp.n_splits = n_splits;
    sp.kv_chunk = static_cast<int>(ceil_div(ceil_div(p.max_ctx_len, n_splits), kBlockK) * kBlockK);
    sp.part_o = static_cast<float*>(partials);
    sp.part_ml = reinterpret_cast<float2*>(sp.part_o + static_cast<size_t>(p.n_tokens) * p.n_head * n_splits * p.cache.head_dim);
  }
  if (attention_prefill_fa3_applies(p, sp.n_splits)) return launch_attention_prefill_fa3(p, prefill_fa3_mode() == 2, stream);
  return p.cache.head_dim == 64 ? launch_d<64>(p, sp, stream) : launch_d<128>(p, sp, stream);
}

}  // namespace frugal::cuda
