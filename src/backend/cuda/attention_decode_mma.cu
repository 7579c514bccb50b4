// Decode attention on the tensor cores (FlashDecoding on mma.sync m16n8k16, f32 accumulators).
//
// Grid (n_splits, n_head_kv, n_seqs), 128 threads: a block takes the G query heads (2..16) of
// one kv head, which are the rows of the A operand (padded to 16 with zeros), and one chunk of
// keys, split like attention_decode.cu (each sequence divides its own context; the same partial
// (o, max, sum) format and combine). The 4 warps work independently: each gathers its own 16
// keys (bf16) or 32 keys (8-bit caches: the same bytes) per iteration through the block table
// into its own NS shared stages (cp.async; NS - 1 iterations' copies in flight while one
// computes; keys past the range are zero-filled and masked), computes S = Q K^T, keeps an online
// softmax in registers and adds P V with P's accumulator fragment reused as the A operand. The
// warps' states merge once in shared memory at the end; with split counters the last split
// block of each (token, kv head) merges the splits too (decode_combine.cuh). With
// DecodeTuning::table_prefetch the block first asks L1 for the block-table lines of its keys;
// with DecodeTuning::l2_prefetch every K/V copy asks L2 for its whole row (256 bytes, or 128
// for rows of 128) as one DRAM request (a 64-byte row brings its neighbor kv head's along).
// Stages (DecodeTuning::mma_stages): 2 (68-72 KB of shared memory at head_dim 128: 3 blocks an
// SM) for batches, 3 (2 blocks an SM) or 4 (1) for a few long sequences, where fewer, longer
// splits keep as many bytes in flight per SM with fewer partial rows to merge.
//
// Fragments are read from the raw cache rows in shared memory with plain 16-byte loads; the
// dimension order inside the mma's k steps is free (a dot product does not care), so each lane
// reads whole 16-byte pieces of a row and the queries' A fragments are loaded in the same order:
//   K (B operand of Q K^T, n = key): lane (g, tq) reads key g's pieces k_piece(tq, j); its
//     consecutive elements 4s..4s+3 are the k indices (2tq, 2tq+1, 2tq+8, 2tq+9) of step s.
//   V (B operand of P V, k = key, n = dim): lane (g, tq) reads keys 2tq, 2tq+1, 2tq+8, 2tq+9
//     at the D/8 dims v_dim(g, .); PV n-tile i is dim v_dim(., i) of each lane's column.
// Rows are padded by 16 bytes (an odd number of pieces), so both patterns are conflict-free for
// head_dim 128.
// Element types: a bf16 cache feeds bf16 mmas directly. fp8 e4m3 codes widen exactly to f16
// (one cvt per pair) for f16 mmas; the queries enter f16 as q / 16 (exact for |q| in
// [2^-10, 2^20)) and the probabilities as f16 in [0, 1]. int8 codes widen exactly to bf16 (bf16
// mmas, as the prefill kernel). Scales as attention_decode.cu: fp8's k_scale goes into the score
// scale and v_scale onto the output; int8's per-(key, head) scales multiply each score and each
// probability before the PV product (rounded to bf16 there, as the prefill kernel does).
// Attention sinks: a token's keys are [0, min(S, lo)) then [lo, pos]; the split's part of both
// is numbered as one list of "virtual" keys, so a tile may hold sinks and window keys at once.
#include <cstdlib>

#include "backend/cuda/common.cuh"
#include "backend/cuda/decode_combine.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_quant.cuh"
#include "backend/cuda/mma.cuh"

namespace frugal::cuda {
namespace {

// Warps a block (W): 4, or 8 for a launch whose blocks leave SMs idle (DecodeTuning::mma_warps).
constexpr int kWarps = 4;
constexpr float kQueryF16 = 0.0625f; // fp8: queries enter the f16 mma as q / 16

template <int D, KvElem E>
struct Tile {
  static constexpr int kEB = KvElemTraits<E>::kBytes;
  static constexpr bool kF16 = E == KvElem::kFp8;
  static constexpr bool kInt8 = E == KvElem::kInt8;
  static constexpr int kKW = kEB == 2 ? 16 : 32;  // keys per warp per iteration
  static constexpr int kNT = kKW / 8;              // S n-tiles of a warp
  static constexpr int kRowBytes = D * kEB;
  static constexpr int kRowStride = kRowBytes + 16;
  static constexpr int kPieces = kRowBytes / 16;   // 16-byte pieces per row
  static constexpr int kEPP = 16 / kEB;            // elements per piece
  static constexpr int kKPieces = kPieces / 4;     // K pieces a lane reads per key: 1, 2 or 4
  static constexpr int kVPT = D / 8;               // V dims per lane = PV n-tiles
  static constexpr int kVBytes = kVPT * kEB;       // 8, 16 or 32
  // One stage: K rows [kKW], V rows [kKW], then for int8 the K and V scales [2][kKW].
  static constexpr int kStageBytes = 2 * kKW * kRowStride + (kInt8 ? 2 * kKW * 4 : 0);
};

// Shared memory of a block of W warps with NS stages each (also the warps' merge, o [W][16][D],
// max and sum, and the fused combine's weights).
template <int D, KvElem E, int W, int NS>
constexpr int block_smem() {
  constexpr int stages = NS * W * Tile<D, E>::kStageBytes, merge = W * 16 * (D + 2) * 4;
  return stages > merge ? stages : merge;
}

struct MmaArgs {
  int chunk;          // keys per split at most (from max_ctx_len, a multiple of grain)
  int grain;          // a sequence's chunk is a multiple of this many keys
  int n_splits;
  float score_scale;  // softmax scale in log2 units (fp8: times k_scale and 16 for the q / 16)
  float v_mult;       // fp8's v_scale, else 1
  float* part_o;      // [n_tokens, n_head, n_splits, D] or nullptr when n_splits == 1
  float2* part_ml;    // [n_tokens, n_head, n_splits] (max, sum)
  uint32_t* counters; // [n_tokens, n_head_kv] zeroed: the last split block merges; nullptr: the combine kernel
  int table_prefetch; // 1: the split's block-table lines go to L1 first (DecodeTuning::table_prefetch)
  int l2_prefetch;    // 1: K/V rows are fetched from DRAM as whole rows (DecodeTuning::l2_prefetch)
};

// Asks L1 for the 128-byte lines of the block-table entries of keys [j0, j1) (one line a
// thread), so that the warps' per-iteration slot lookups hit L1. A hint: no values change.
__device__ __forceinline__ void prefetch_table_l1(const int32_t* table, int bs, int j0, int j1) {
  if (j0 >= j1) return;
  const uintptr_t first = reinterpret_cast<uintptr_t>(table + j0 / bs) & ~uintptr_t{127};
  const uintptr_t last = reinterpret_cast<uintptr_t>(table + (j1 - 1) / bs);
  for (uintptr_t line = first + threadIdx.x * uintptr_t{128}; line <= last; line += blockDim.x * uintptr_t{128})
    asm volatile("prefetch.global.L1 [%0];" ::"l"(line));
}

// Piece of a key row that lane tq reads j-th (of kKPieces): with 2 or 4 pieces a lane, lanes
// tq take pieces 2tq, 2tq + 1 (+ 8): 8 lanes of a quarter warp (2 keys) hit 8 distinct bank quads.
template <int KP>
__device__ __forceinline__ int k_piece(int tq, int j) {
  return KP == 1 ? tq : 8 * (j >> 1) + 2 * tq + (j & 1);
}

// Dim of the i-th of the D/8 V elements lane column x holds (x = g for the B fragment).
template <int D, KvElem E>
__device__ __forceinline__ int v_dim(int x, int i) {
  using T = Tile<D, E>;
  if constexpr (T::kVBytes == 32) {
    return (x + 8 * (i / T::kEPP)) * T::kEPP + i % T::kEPP;  // pieces x and x + 8
  } else {
    return x * T::kVPT + i;
  }
}

// Two 8-bit cache codes (the low 16 bits of v, lower element first) as the mma's 16-bit pair,
// exactly: e4m3 -> f16, int8 -> bf16 (x + 2^23 + 128 built in the mantissa, then subtracted).
template <KvElem E>
__device__ __forceinline__ uint32_t widen2(uint32_t v) {
  if constexpr (E == KvElem::kFp8) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v & 0xffffu), __NV_E4M3);
    return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
  } else {
    const uint32_t u = v ^ 0x8080u;
    const float a = __uint_as_float(0x4B000000u | (u & 0xffu)) - 8388736.f;
    const float b = __uint_as_float(0x4B000000u | ((u >> 8) & 0xffu)) - 8388736.f;
    return pack_bf16(a, b);
  }
}

// The B pair of V dim i from the words of two key rows (ra: the lower k index).
template <KvElem E, int N>
__device__ __forceinline__ uint32_t v_pair(const uint32_t (&ra)[N], const uint32_t (&rb)[N], int i) {
  if constexpr (KvElemTraits<E>::kBytes == 2) {
    return __byte_perm(ra[i / 2], rb[i / 2], (i & 1) ? 0x7632 : 0x5410);
  } else {
    const int b = i & 3;
    return widen2<E>(__byte_perm(ra[i / 4], rb[i / 4], b | ((4 + b) << 4)));
  }
}

template <KvElem E>
__device__ __forceinline__ void mma16(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  if constexpr (E == KvElem::kFp8) {
    mma_f16(c, a, b0, b1);
  } else {
    mma_bf16(c, a, b0, b1);
  }
}

template <KvElem E>
__device__ __forceinline__ uint32_t pack16(float lo, float hi) {
  if constexpr (E == KvElem::kFp8) {
    return pack_f16(lo, hi);
  } else {
    return pack_bf16(lo, hi);
  }
}

template <int N>
__device__ __forceinline__ void load_words(uint32_t* w, const unsigned char* src) {
  if constexpr (N == 2) {
    const uint2 x = *reinterpret_cast<const uint2*>(src);
    w[0] = x.x, w[1] = x.y;
  } else {
    const uint4 x = *reinterpret_cast<const uint4*>(src);
    w[0] = x.x, w[1] = x.y, w[2] = x.z, w[3] = x.w;
  }
}

// A fragments of one token's queries (rows g and g + 8 = heads h0 + row; rows past the group,
// and with !kHi rows 8..15, are zeros), dims in the K fragments' order. fp8: q / 16 as f16.
template <int D, KvElem E, bool kHi>
__device__ __forceinline__ void load_query_fragments(const __nv_bfloat16* q, int group, uint32_t (&qf)[D / 16][4]) {
  using T = Tile<D, E>;
  const int lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    const int d = k_piece<T::kKPieces>(tq, (4 * ks) / T::kEPP) * T::kEPP + (4 * ks) % T::kEPP;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = g + 8 * r;
      uint32_t w[2] = {0u, 0u};
      if ((r == 0 || kHi) && row < group) {
        w[0] = *reinterpret_cast<const uint32_t*>(q + row * D + d);
        w[1] = *reinterpret_cast<const uint32_t*>(q + row * D + d + 2);
        if constexpr (T::kF16) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w[h]));
            w[h] = pack_f16(f.x * kQueryF16, f.y * kQueryF16);
          }
        }
      }
      qf[ks][r] = w[0];
      qf[ks][2 + r] = w[1];
    }
  }
}

// s = Q K^T for the warp's kNT tiles of 8 keys (rows of sk), D/16 k steps.
template <int D, KvElem E>
__device__ __forceinline__ void qk_tile(const unsigned char* sk, const uint32_t (&qf)[D / 16][4],
                                        float (&s)[Tile<D, E>::kNT][4]) {
  using T = Tile<D, E>;
  constexpr int NT = T::kNT, KP = T::kKPieces;
  const int lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
  uint32_t kw[NT][4 * KP];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int j = 0; j < KP; ++j) load_words<4>(&kw[nt][4 * j], sk + (nt * 8 + g) * T::kRowStride + k_piece<KP>(tq, j) * 16);
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      uint32_t b0, b1;
      if constexpr (T::kEB == 2) {
        b0 = kw[nt][2 * ks];
        b1 = kw[nt][2 * ks + 1];
      } else {
        b0 = widen2<E>(kw[nt][ks]);
        b1 = widen2<E>(kw[nt][ks] >> 16);
      }
      mma16<E>(s[nt], qf[ks], b0, b1);
    }
  }
}

// o += P V over the warp's keys (rows of sv), 16 keys a step; P (the probabilities in s's
// accumulator layout) is the A fragment.
template <int D, KvElem E>
__device__ __forceinline__ void pv_tile(const unsigned char* sv, const float (&s)[Tile<D, E>::kNT][4],
                                        float (&o)[D / 8][4]) {
  using T = Tile<D, E>;
  constexpr int VW = T::kVBytes / 4, RS = T::kRowStride;
  const int lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int kk = 0; kk < T::kKW / 16; ++kk) {
    const uint32_t pa[4] = {pack16<E>(s[2 * kk][0], s[2 * kk][1]), pack16<E>(s[2 * kk][2], s[2 * kk][3]),
                            pack16<E>(s[2 * kk + 1][0], s[2 * kk + 1][1]), pack16<E>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
    uint32_t vw[4][VW];  // keys 2tq, 2tq + 1, 2tq + 8, 2tq + 9 of the step
#pragma unroll
    for (int rr = 0; rr < 4; ++rr) {
      const unsigned char* row = sv + (16 * kk + 2 * tq + (rr & 1) + 8 * (rr >> 1)) * RS;
      if constexpr (VW == 8) {
        load_words<4>(vw[rr], row + 16 * g);
        load_words<4>(vw[rr] + 4, row + 16 * g + 128);
      } else if constexpr (VW == 4) {
        load_words<4>(vw[rr], row + 16 * g);
      } else {
        load_words<2>(vw[rr], row + 8 * g);
      }
    }
#pragma unroll
    for (int v = 0; v < D / 8; ++v) mma16<E>(o[v], pa, v_pair<E>(vw[0], vw[1], v), v_pair<E>(vw[2], vw[3], v));
  }
}

// Merges the warps' (max, sum, o) through shared memory (the stages, no longer read) and writes
// the token's output rows (one split) or its partial rows and (max, sum) for the combine.
template <int D, KvElem E, int W>
__device__ __forceinline__ void merge_and_store(const ops::AttentionParams& p, const MmaArgs& a, unsigned char* smem,
                                                const float (&o)[D / 8][4], const float (&m_run)[2],
                                                const float (&l_run)[2], int group, int t, int h0, int64_t ml_base) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
  __syncthreads();
  float* mo = reinterpret_cast<float*>(smem);  // [W][16][D]
  float* mm = mo + W * 16 * D;                 // [W][16]
  float* ml = mm + W * 16;                     // [W][16]
#pragma unroll
  for (int v = 0; v < D / 8; ++v)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = g + 8 * (e >> 1);
      if (row < group) mo[(warp * 16 + row) * D + v_dim<D, E>(2 * tq + (e & 1), v)] = o[v][e];
    }
  if (tq == 0) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mm[warp * 16 + g + 8 * r] = m_run[r];
      ml[warp * 16 + g + 8 * r] = l_run[r];
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < group * D; idx += W * 32) {
    const int r = idx / D, d = idx % D;
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < W; ++w) m = fmaxf(m, mm[w * 16 + r]);
    float l = 0.f, acc = 0.f;
#pragma unroll
    for (int w = 0; w < W; ++w) {
      const float mw = mm[w * 16 + r];
      const float wt = mw == -INFINITY ? 0.f : exp2f(mw - m);
      l = fmaf(wt, ml[w * 16 + r], l);
      acc = fmaf(wt, mo[(w * 16 + r) * D + d], acc);
    }
    acc *= a.v_mult;
    if (a.part_o == nullptr) {
      static_cast<__nv_bfloat16*>(p.out)[static_cast<int64_t>(t) * p.ld_out + (h0 + r) * D + d] =
          __float2bfloat16(l > 0.f ? acc / l : 0.f);
    } else {
      a.part_o[(ml_base + static_cast<int64_t>(r) * a.n_splits) * D + d] = acc;
      if (d == 0) a.part_ml[ml_base + static_cast<int64_t>(r) * a.n_splits] = make_float2(m, l);
    }
  }
}

// kHi: the group has more than 8 heads (A rows 8..15 hold queries, else zeros). NS: stages.
// W: warps, each with its own NS stages and its own keys of every block iteration.
template <int D, KvElem E, bool kHi, int NS, int W>
__global__ void __launch_bounds__(W * 32) attention_decode_mma_kernel(ops::AttentionParams p, MmaArgs a) {
  using T = Tile<D, E>;
  constexpr int KW = T::kKW, NT = T::kNT, KPI = W * T::kKW, RS = T::kRowStride, VPT = T::kVPT;
  pdl_wait();
  extern __shared__ __align__(16) unsigned char smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, tq = lane & 3;
  const int split = blockIdx.x, kvh = blockIdx.y, seq = blockIdx.z;
  const int group = p.n_head / p.cache.n_head_kv, h0 = kvh * group;
  const int q0 = p.q_start[seq], n_q = p.q_start[seq + 1] - q0, ctx = p.ctx_len[seq];
  const int32_t* table = p.block_tables + static_cast<int64_t>(seq) * p.max_blocks_per_seq;
  const int bs = p.cache.block_size;
  const int64_t row_stride = static_cast<int64_t>(p.cache.n_head_kv) * T::kRowBytes;  // bytes per slot
  const char* kbase = static_cast<const char*>(p.cache.k_cache) + kvh * T::kRowBytes;
  const char* vbase = static_cast<const char*>(p.cache.v_cache) + kvh * T::kRowBytes;
  unsigned char* wstage = smem + warp * NS * T::kStageBytes;  // this warp's NS stages

  for (int i = 0; i < n_q; ++i) {
    const int t = q0 + i, pos = ctx - n_q + i;
    const int lo = p.sliding_window > 0 ? max(0, pos - p.sliding_window + 1) : 0;
    const int sink_end = p.sliding_window > 0 ? min(p.sink_tokens, lo) : 0;
    // This split's keys, as attention_decode.cu: [s0, s1) of the sinks, then [w0, w1).
    const int seq_chunk = min(a.chunk, ((ctx + a.n_splits - 1) / a.n_splits + a.grain - 1) / a.grain * a.grain);
    const int c0 = split * seq_chunk, c1 = c0 + seq_chunk;
    const int s0 = c0, s1 = min(sink_end, c1);
    const int w0 = max(lo, c0), w1 = min(pos + 1, c1);
    const int ns = max(0, s1 - s0), n_keys = ns + max(0, w1 - w0);
    const int64_t ml_base = (static_cast<int64_t>(t) * p.n_head + h0) * a.n_splits + split;
    // The last split block of this (token, kv head) merges the splits (a.counters).
    auto combine = [&] {
      if (a.counters != nullptr)
        fused_combine<D, W * 32>(p, a.n_splits, a.part_o, a.part_ml,
                                   a.counters + static_cast<int64_t>(t - p.q_start[0]) * p.cache.n_head_kv + kvh, t, h0,
                                   group, reinterpret_cast<float*>(smem));
    };
    if (n_keys == 0) {  // block-uniform
      if (a.part_ml != nullptr) {
        if (threadIdx.x < group)
          a.part_ml[ml_base + static_cast<int64_t>(threadIdx.x) * a.n_splits] = make_float2(-INFINITY, 0.f);
        combine();
      } else {  // only for a context longer than max_ctx_len (a contract violation): zeros, not garbage
        for (int idx = threadIdx.x; idx < group * D; idx += W * 32)
          static_cast<__nv_bfloat16*>(p.out)[static_cast<int64_t>(t) * p.ld_out + h0 * D + idx] = __float2bfloat16(0.f);
      }
      continue;
    }
    __syncthreads();  // the previous token's merge no longer reads shared memory
    if (a.table_prefetch) {
      prefetch_table_l1(table, bs, s0, s1);
      prefetch_table_l1(table, bs, w0, w1);
    }
    uint32_t qf[D / 16][4];
    load_query_fragments<D, E, kHi>(static_cast<const __nv_bfloat16*>(p.q) + static_cast<int64_t>(t) * p.ld_q + h0 * D,
                                    group, qf);

    // Slot of this lane's key (lane % KW) of iteration it, -1 past the keys (zero-filled).
    auto slot_at = [&](int it) {
      const int v = it * KPI + warp * KW + lane % KW;
      if (v >= n_keys) return -1;
      const int j = v < ns ? s0 + v : w0 + (v - ns);
      const int blk = table[j / bs];
      return blk < 0 ? -1 : blk * bs + j % bs;
    };
    // Gathers the warp's K and V rows (and int8 scales) of one iteration into stage st: each
    // copy instruction of the warp moves whole rows, coalesced.
    auto issue = [&](int st, int my_slot) {
      unsigned char* sk = wstage + st * T::kStageBytes;
      unsigned char* sv = sk + KW * RS;
      constexpr int kCopies = KW * 2 * T::kPieces / 32;
#pragma unroll
      for (int c = 0; c < kCopies; ++c) {
        const int idx = c * 32 + lane;
        const int key = idx / (2 * T::kPieces), part = (idx / T::kPieces) & 1, piece = idx % T::kPieces;
        const int slot = __shfl_sync(0xffffffffu, my_slot, key);
        const bool ok = slot >= 0;
        const char* src = (part ? vbase : kbase) + (ok ? slot * row_stride : 0) + piece * 16;
        unsigned char* dst = (part ? sv : sk) + key * RS + piece * 16;
        if (a.l2_prefetch) {
          cp_async16_l2<(T::kRowBytes >= 256 ? 256 : 128)>(dst, src, ok);
        } else {
          cp_async<16>(dst, src, ok);
        }
      }
      if constexpr (T::kInt8) {
        static_assert(KW == 32, "one key per lane");
        float* sc = reinterpret_cast<float*>(sv + KW * RS);
        const bool ok = my_slot >= 0;
        const int64_t o = ok ? static_cast<int64_t>(my_slot) * p.cache.n_head_kv + kvh : 0;
        cp_async<4>(sc + lane, p.cache.k_scales + o, ok);
        cp_async<4>(sc + KW + lane, p.cache.v_scales + o, ok);
      }
      cp_async_commit();
    };

    float o[VPT][4];
#pragma unroll
    for (int v = 0; v < VPT; ++v) o[v][0] = o[v][1] = o[v][2] = o[v][3] = 0.f;
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};  // rows g, g + 8 (l: this lane's columns)
    // NS - 1 iterations' copies go out first; each iteration then issues the copies NS - 1
    // ahead (an empty group past the keys keeps the count of groups uniform) and waits for its
    // own. The table entry of the next issue loads under the current iteration.
    const int n_it = (n_keys + KPI - 1) / KPI;
    int slot_next = cp_ring_start<NS>(n_it, issue, slot_at);
    for (int it = 0; it < n_it; ++it) {
      cp_ring_advance<NS>(it, n_it, slot_next, issue, slot_at);
      cp_async_wait<NS - 1>();
      __syncwarp();  // every lane's copies of this stage are visible to the warp
      const unsigned char* sk = wstage + (it % NS) * T::kStageBytes;
      const unsigned char* sv = sk + KW * RS;
      const float* sc = reinterpret_cast<const float*>(sv + KW * RS);
      const int key0 = it * KPI + warp * KW;  // virtual index of the stage's first key
      float s[NT][4];
      qk_tile<D, E>(sk, qf, s);

      // Scale into log2 units, mask keys past the split's list, online softmax per row.
      float mt[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = nt * 8 + 2 * tq + (e & 1);
          float v = s[nt][e] * a.score_scale;
          if constexpr (T::kInt8) v *= sc[col];
          if (key0 + col >= n_keys) v = -INFINITY;
          s[nt][e] = v;
          mt[e >> 1] = fmaxf(mt[e >> 1], v);
        }
      float alpha[2], base[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        mt[r] = fmaxf(mt[r], __shfl_xor_sync(0xffffffffu, mt[r], 1));
        mt[r] = fmaxf(mt[r], __shfl_xor_sync(0xffffffffu, mt[r], 2));
        const float m_new = fmaxf(m_run[r], mt[r]);
        base[r] = m_new == -INFINITY ? 0.f : m_new;  // a row with no key yet stays at zero
        alpha[r] = exp2f(m_run[r] - base[r]);
        m_run[r] = m_new;
        l_run[r] *= alpha[r];
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float pr = exp2f(s[nt][e] - base[e >> 1]);
          l_run[e >> 1] += pr;
          if constexpr (T::kInt8) pr *= sc[KW + nt * 8 + 2 * tq + (e & 1)];  // V's scale, after the sum
          s[nt][e] = pr;
        }
#pragma unroll
      for (int v = 0; v < VPT; ++v) {
        o[v][0] *= alpha[0];
        o[v][1] *= alpha[0];
        o[v][2] *= alpha[1];
        o[v][3] *= alpha[1];
      }
      pv_tile<D, E>(sv, s, o);
      __syncwarp();  // the stage is refilled from the next iteration on
    }

#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
      l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
    }
    merge_and_store<D, E, W>(p, a, smem, o, m_run, l_run, group, t, h0, ml_base);
    if (a.part_o != nullptr) combine();
  }
}

KvElem kv_elem(DType t) { return t == DType::kF8E4M3 ? KvElem::kFp8 : t == DType::kI8 ? KvElem::kInt8 : KvElem::kBF16; }

// The (stages, warps) pairs instantiated: 2-4 stages at 4 warps, 2 or 3 at 8 (4 would not fit
// the shared memory at head_dim 128).
constexpr bool shape_built(int ns, int warps) {
  return warps == kWarps ? ns >= 2 && ns <= 4 : warps == 8 && (ns == 2 || ns == 3);
}

// Calls f.template operator()<D, E, kHi, NS, W>() for the instantiation of (d, e, hi, ns,
// warps) (shape_built; any other stage count at 8 warps takes 2).
template <int D, KvElem E, bool kHi, typename F>
decltype(auto) with_stages(int ns, int warps, F&& f) {
  if (warps == 8) return ns == 3 ? f.template operator()<D, E, kHi, 3, 8>() : f.template operator()<D, E, kHi, 2, 8>();
  switch (ns) {
    case 3: return f.template operator()<D, E, kHi, 3, kWarps>();
    case 4: return f.template operator()<D, E, kHi, 4, kWarps>();
    default: return f.template operator()<D, E, kHi, 2, kWarps>();
  }
}

template <int D, typename F>
decltype(auto) with_elem(KvElem e, bool hi, int ns, int warps, F&& f) {
  switch (e) {
    case KvElem::kFp8:
      return hi ? with_stages<D, KvElem::kFp8, true>(ns, warps, f) : with_stages<D, KvElem::kFp8, false>(ns, warps, f);
    case KvElem::kInt8:
      return hi ? with_stages<D, KvElem::kInt8, true>(ns, warps, f) : with_stages<D, KvElem::kInt8, false>(ns, warps, f);
    default:
      return hi ? with_stages<D, KvElem::kBF16, true>(ns, warps, f) : with_stages<D, KvElem::kBF16, false>(ns, warps, f);
  }
}

template <typename F>
decltype(auto) dispatch(int d, KvElem e, bool hi, int ns, int warps, F&& f) {
  return d == 64 ? with_elem<64>(e, hi, ns, warps, f) : with_elem<128>(e, hi, ns, warps, f);
}

bool high_rows(const ops::AttentionParams& p) { return p.n_head / p.cache.n_head_kv > 8; }

template <typename F>
decltype(auto) dispatch(const ops::AttentionParams& p, int ns, int warps, F&& f) {
  return dispatch(p.cache.head_dim, kv_elem(p.cache.cache_dtype), high_rows(p), ns, warps, f);
}

// Keys of one warp's (kw) or the block's (!kw) iteration; they depend on the element size only.
int keys_per_iteration(const ops::AttentionParams& p, bool kw = false) {
  const bool wide = kv_elem(p.cache.cache_dtype) == KvElem::kBF16;
  using W = Tile<128, KvElem::kBF16>;
  using N = Tile<128, KvElem::kFp8>;
  const int keys = wide ? W::kKW : N::kKW;
  return kw ? keys : kWarps * keys;  // a 4-warp block's
}

// Raises the shared-memory limit once and caches the occupancy of one instantiation.
struct Occupancy {
  template <int D, KvElem E, bool kHi, int NS, int W>
  int operator()() const {
    return cached_blocks_per_sm<attention_decode_mma_kernel<D, E, kHi, NS, W>>(W * 32, block_smem<D, E, W, NS>(), 1);
  }
};

int occupancy(const ops::AttentionParams& p, int ns, int warps = kWarps) { return dispatch(p, ns, warps, Occupancy{}); }

// Launches one instantiation, then the combine kernel unless there is one split or the last
// split blocks merge.
struct Launch {
  const ops::AttentionParams& p;
  const MmaArgs& a;
  cudaStream_t stream;
  template <int D, KvElem E, bool kHi, int NS, int W>
  cudaError_t operator()() const {
    constexpr int smem = block_smem<D, E, W, NS>();
    static_assert(16 * (kFusedCombineMaxSplits + 1) * 4 <= smem, "the fused merge's weights fit");
    if (cudaError_t e = raise_dynamic_smem_once<attention_decode_mma_kernel<D, E, kHi, NS, W>>(smem); e != cudaSuccess) return e;
    const dim3 grid(static_cast<unsigned>(a.n_splits), static_cast<unsigned>(p.cache.n_head_kv), static_cast<unsigned>(p.n_seqs));
    cudaError_t e = launch_kernel(attention_decode_mma_kernel<D, E, kHi, NS, W>, grid, W * 32, smem, stream, p, a);
    if (e != cudaSuccess || a.part_o == nullptr || a.counters != nullptr) return e;
    return launch_attention_combine(p, a.n_splits, a.part_o, a.part_ml, stream);
  }
};

bool aligned(const void* ptr, uintptr_t n) { return (reinterpret_cast<uintptr_t>(ptr) & (n - 1)) == 0; }

DefaultOnSwitch g_mma("FRUGAL_DECODE_MMA");  // set_decode_mma_enabled

}  // namespace

bool decode_mma_enabled() { return g_mma.on(); }

void set_decode_mma_enabled(bool on) { g_mma.set(on); }

cudaError_t prepare_attention_decode_mma() {
  int sum = 0;
  for (int d : {64, 128})
    for (KvElem e : {KvElem::kBF16, KvElem::kFp8, KvElem::kInt8})
      for (bool hi : {false, true})
        for (int ns : {2, 3, 4})
          for (int warps : {kWarps, 8})
            if (shape_built(ns, warps)) sum += dispatch(d, e, hi, ns, warps, Occupancy{});
  (void)sum;
  return cudaGetLastError();
}

bool attention_decode_mma_applies(const ops::AttentionParams& p) {
  if (!decode_mma_enabled()) return false;
  const auto& c = p.cache;
  if (c.n_head_kv <= 0) return false;
  const int group = p.n_head / c.n_head_kv;
  const bool int8 = c.cache_dtype == DType::kI8;
  // Queries are read as bf16 pairs, cache rows as 16-byte pieces, int8 scales as 4 bytes.
  return group >= 2 && group <= 16 && (c.head_dim == 64 || c.head_dim == 128) && p.ld_q % 2 == 0 &&
         aligned(p.q, 4) && aligned(c.k_cache, 16) && aligned(c.v_cache, 16) &&
         (!int8 || (aligned(c.k_scales, 4) && aligned(c.v_scales, 4)));
}

namespace {

// The stages the split count is planned at: forced, 3 for a bf16 cache with at most
// kDecodeDeepMaxUnits units, else 2. Measured on the H200 (2026-12-03, 1 x 32k): 3 stages gain
// for bf16 KV (33.8 -> 29.6 us) and lose for the 8-bit caches (fp8 23.3 -> 24.4, int8 29.3 ->
// 32.1 us).
int planned_stages(const ops::AttentionParams& p) {
  const int ns = decode_tuning().mma_stages;
  if (ns >= 2 && ns <= 4) return ns;
  const bool bf16 = p.cache.cache_dtype == DType::kBF16;
  return bf16 && int64_t{p.n_seqs} * p.cache.n_head_kv <= kDecodeDeepMaxUnits ? 3 : 2;
}

}  // namespace

DecodeMmaShape attention_decode_mma_shape(const ops::AttentionParams& p, int n_sms, int n_splits) {
  const int forced_ns = decode_tuning().mma_stages, forced_w = decode_tuning().mma_warps;
  const int warps = forced_w == 8 ? 8 : kWarps;
  const int planned = planned_stages(p);
  const bool batch = planned == 2 && forced_ns != 2 && p.cache.cache_dtype == DType::kBF16;
  if (!batch) return {warps == 8 ? std::min(planned, 3) : planned, warps};
  // A batch of bf16 caches: the deepest pipeline whose residency still holds the whole launch
  // in one wave (the blocks' count is fixed by then; deeper stages only cost occupancy the
  // launch does not use). Measured (H100, 2026-12-06, 7B int4, 512-token prompts, one split a
  // unit): 16 sequences (64 blocks) 4 stages +1.7% (3 -0.4%), 64 sequences (256 blocks, two an
  // SM at 3 stages) 3 stages +2.8%, end to end.
  const int64_t blocks = int64_t{p.n_seqs} * p.cache.n_head_kv * n_splits;
  // Where one block an SM holds the launch: 8 warps at 3 stages unless the warps are forced
  // (same machine: 16 sequences 3,706.0 -> 3,752.5 tok/s int4 (+1.3%), 2,541.2 -> 2,557.1 bf16;
  // 32 sequences, 128 blocks, +0.3%; where it does not fit (64 sequences; 16 of 2048 keys, 3
  // splits a unit) it would lose or tie, so 4 warps there).
  if (forced_w == 0 && blocks <= int64_t{n_sms} * occupancy(p, 3, 8)) return {3, 8};
  for (int ns : {4, 3})
    if (shape_built(ns, warps) && blocks <= int64_t{n_sms} * occupancy(p, ns, warps)) return {ns, warps};
  return {2, warps};
}

int attention_decode_mma_splits(const ops::AttentionParams& p, int n_sms) {
  // decode_split_count's rule, at the planned stages' occupancy and this kernel's block iteration.
  return decode_split_count(p, n_sms, int64_t{p.n_seqs} * p.cache.n_head_kv, keys_per_iteration(p),
                            occupancy(p, planned_stages(p)));  // (4 warps: its keys a block iteration too)
}

cudaError_t launch_attention_decode_mma(const ops::AttentionParams& p, int n_splits, void* partials,
                                        uint32_t* counters, cudaStream_t stream, int n_sms) {
  const int grain = keys_per_iteration(p, decode_tuning().warp_grain);
  const bool fp8 = p.cache.cache_dtype == DType::kF8E4M3;
  MmaArgs a{static_cast<int>(ceil_div(ceil_div(p.max_ctx_len, n_splits), grain) * grain), grain, n_splits,
            p.scale * 1.4426950408889634f * (fp8 ? p.cache.k_scale / kQueryF16 : 1.f), fp8 ? p.cache.v_scale : 1.f,
            nullptr, nullptr, nullptr, decode_tuning().table_prefetch ? 1 : 0, decode_tuning().l2_prefetch ? 1 : 0};
  if (n_splits > 1) {
    a.part_o = static_cast<float*>(partials);
    a.part_ml = reinterpret_cast<float2*>(a.part_o + static_cast<size_t>(p.n_tokens) * p.n_head * n_splits * p.cache.head_dim);
    // The merge's weights (group x (n_splits + 1) floats) fit every instantiation's shared
    // memory for up to kFusedCombineMaxSplits splits (Launch asserts it).
    if (decode_fused_combine(p, n_splits, p.cache.n_head_kv, p.n_head / p.cache.n_head_kv, counters)) a.counters = counters;
  }
  const DecodeMmaShape shape = attention_decode_mma_shape(p, n_sms, n_splits);
  return dispatch(p, shape.stages, shape.warps, Launch{p, a, stream});
}

}  // namespace frugal::cuda
