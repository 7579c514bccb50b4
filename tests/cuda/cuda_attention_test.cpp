// Attention (prefill tensor-core kernel, split-KV decode, generic fallback) against ops::ref
// over a paged cache whose blocks are scattered in random order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"

namespace frugal::cuda::testing {
namespace {

struct SeqSpec {
  int n_new;
  int ctx;
};

struct AttnCase {
  std::vector<SeqSpec> seqs;
  int n_head;
  int n_kv;
  int head_dim;
  int sliding_window = 0;
  DType act = DType::kBF16;
  int max_ctx_slack = 0;  // max_ctx_len above the true max (as a captured graph passes)
  DType cache = DType::kBF16;  // kBF16 (or the act dtype when that is f32), kF8E4M3 or kI8
  int sinks = 0;               // attention sinks (with sliding_window > 0)
  bool shared_kv = false;      // MLA's latent cache: one buffer is both K and V (one kv head)
  int block_size = 16;         // tokens per cache block
};

// How the backend is asked: prefill key split on or off; n_decode_seqs passed for the leading
// one-token sequences (a mixed step: they go to the decode kernel) or not; the decode kernel's
// tensor-core variant on (1), off (0) or as configured (-1); the decode kernels' knobs
// (DecodeTuning: stages, fused or separate combine, split rounding, forced splits) when set;
// same_as_prev: the variant must give the same bits as the previous one (a repeat of the fused
// combine: its merge order does not depend on which block finishes last; the sliced combine or
// the block-table prefetch against the same tuning without them); the prefill kernel's
// wgmma variant on (1), off (0) or as configured (wg; it runs only where prefill_wgmma is
// available, sm_90a on a 9.0 device); the MLA kernel's tensor-core variant on (1), off (0) or as
// configured (mla), and mla_splits > 0: launch_mla_decode directly with that many splits instead
// of the backend's choice, its splits merged by the last blocks (mla_combine 1: the fused
// combine at any size, MlaMerge::kFused, which must leave its counters zero and give the same
// bits from a graph replayed twice), by the combine kernel (0) or as configured (-1); mla_early: the
// tensor-core MLA kernel copies its older cache rows before its PDL wait (1), after it (0) or as
// configured (-1); the FlashAttention-3-style prefill kernel's mode (fa3: 0 off, 1 on, 2
// ping-pong, -1 as configured; it too runs only where the wgmma variant can), and expect_fa3:
// the case must be one it takes.
struct Variant {
  bool split = true;
  bool decode_hint = false;
  int mma = -1;
  std::optional<DecodeTuning> tuning = std::nullopt;
  bool same_as_prev = false;
  int wg = -1;
  int mla = -1;
  int mla_splits = 0;
  int mla_combine = -1;
  int mla_early = -1;  // the tensor-core MLA kernel's older rows before the PDL wait (1) or after (0)
  int fa3 = -1;
  bool expect_fa3 = false;
};

// launch_mla_decode(p, splits) into out with fresh zeroed counters (the backend's are not
// reachable from here); when the launch merges in its last blocks, the counters must be zero
// again afterwards and a captured graph of the launch, replayed twice, must give the eager bits.
void run_mla_kernels(const ops::AttentionParams& p, int splits, Tensor& out) {
  void* partials = nullptr;
  if (size_t bytes = mla_decode_scratch_bytes(p, splits); bytes > 0) partials = backend()->alloc(bytes).value();
  auto* counters = static_cast<uint32_t*>(backend()->alloc(kDecodeCounters * sizeof(uint32_t)).value());
  ASSERT_TRUE(backend()->memset_zero(counters, kDecodeCounters * sizeof(uint32_t)).is_ok());
  auto launch = [&] { return launch_mla_decode(p, splits, partials, counters, backend()->stream()); };
  EXPECT_EQ(launch(), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(backend()->stream()), cudaSuccess);
  if (mla_decode_fuses_combine(p, splits, counters)) {
    std::vector<uint8_t> eager, replayed;
    out.from_device(&eager, "mla eager");
    static uint64_t key = 0x31A0000;
    ++key;
    EXPECT_TRUE(backend()->capture_graph(key, [&] { return launch() == cudaSuccess ? Status::ok() : internal_error("mla launch"); }).is_ok());
    for (int rep = 0; rep < 2; ++rep) {
      out.fill_nan();
      out.to_device();
      EXPECT_TRUE(backend()->replay_graph(key).is_ok());
      EXPECT_TRUE(backend()->synchronize().is_ok());
      out.from_device(&replayed, "mla replay");
      EXPECT_TRUE(replayed == eager) << "graph replay " << rep << " of the fused MLA merge changed the output bits";
    }
    std::vector<uint32_t> left(kDecodeCounters);
    ASSERT_TRUE(backend()->download(left.data(), counters, left.size() * sizeof(uint32_t)).is_ok());
    EXPECT_EQ(std::count(left.begin(), left.end(), 0u), kDecodeCounters) << "a split counter was left nonzero";
  }
  backend()->free(counters);
  if (partials != nullptr) backend()->free(partials);
}

// Every variant against one reference run (the reference is the slow part).
// Variants that differ only in `mma` are also compared with each other (the tensor-core decode
// kernel against the CUDA-core one on the same inputs), and so are those that differ only in `wg`
// or only in `mla`.
void check_attention(const AttnCase& c, const std::vector<Variant>& variants = {Variant{}}) {
  const DType kv = c.act == DType::kF32 ? DType::kF32 : c.cache;
  const bool fp8 = kv == DType::kF8E4M3, int8 = kv == DType::kI8;
  SCOPED_TRACE(::testing::Message() << "n_head=" << c.n_head << " n_kv=" << c.n_kv << " hd=" << c.head_dim
                                    << " window=" << c.sliding_window << " sinks=" << c.sinks << " act=" << dtype_name(c.act)
                                    << " cache=" << dtype_name(kv) << " n_seqs=" << c.seqs.size());
  std::mt19937 rng(static_cast<unsigned>(c.n_head * 131 + c.head_dim + c.seqs.size()));
  const int bs = c.block_size, n_seqs = static_cast<int>(c.seqs.size());
  int max_blocks = 0, n_tokens = 0, max_ctx = 0;
  for (const auto& s : c.seqs) {
    max_blocks = std::max(max_blocks, (s.ctx + bs - 1) / bs);
    n_tokens += s.n_new;
    max_ctx = std::max(max_ctx, s.ctx);
  }
  const int n_blocks = max_blocks * n_seqs + 3;
  std::vector<int32_t> perm(static_cast<size_t>(n_blocks));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int32_t> tables(static_cast<size_t>(n_seqs * max_blocks)), q_start(1, 0), ctx_len;
  for (int s = 0; s < n_seqs; ++s) {
    for (int b = 0; b < max_blocks; ++b) tables[static_cast<size_t>(s * max_blocks + b)] = perm[static_cast<size_t>(s * max_blocks + b)];
    q_start.push_back(q_start.back() + c.seqs[static_cast<size_t>(s)].n_new);
    ctx_len.push_back(c.seqs[static_cast<size_t>(s)].ctx);
  }
  const int64_t row = int64_t{c.n_kv} * c.head_dim;
  const int64_t ld_q = int64_t{c.n_head} * c.head_dim + 8, ld_out = int64_t{c.n_head} * c.head_dim + 16;
  Tensor kc(kv, int64_t{n_blocks} * bs * row), vc(kv, int64_t{n_blocks} * bs * row);
  Tensor q(c.act, n_tokens * ld_q), out(c.act, n_tokens * ld_out);
  // 8-bit caches hold codes over their whole range (fp8 e4m3 up to 448, int8 to 127) and
  // scales that bring the values back to about [-1, 1] (int8: one per slot and kv head).
  const float range = fp8 ? 448.f : int8 ? 127.f : 1.f;
  kc.fill_uniform(rng, -range, range);
  vc.fill_uniform(rng, -range, range);
  q.fill_uniform(rng, -3, 3);
  out.fill_nan();
  for (auto* t : {&kc, &vc, &q, &out}) t->to_device();
  Tensor& vsrc = c.shared_kv ? kc : vc;
  std::vector<float> k_scales, v_scales;
  std::uniform_real_distribution<float> sd(0.5f / 127, 1.5f / 127);
  for (int64_t i = 0; int8 && i < int64_t{n_blocks} * bs * c.n_kv; ++i) {
    k_scales.push_back(sd(rng));
    v_scales.push_back(sd(rng));
  }
  DevInts di;
  ops::AttentionParams p{{kc.dev, vsrc.dev, kv, n_blocks, bs, c.n_kv, c.head_dim, int8 ? di.floats(k_scales) : nullptr,
                          int8 ? di.floats(v_scales) : nullptr, fp8 ? 1.f / 300 : 1.f, fp8 ? 1.f / 500 : 1.f},
                         q.dev, out.dev, c.act, ld_q, ld_out, n_seqs, n_tokens,
                         di(q_start), di(ctx_len), di(tables), max_blocks, max_ctx + c.max_ctx_slack,
                         c.n_head, c.sliding_window, 1.f / std::sqrt(static_cast<float>(c.head_dim)), c.sinks};
  std::vector<uint8_t> want(out.host.size());
  ops::AttentionParams r = p;
  r.cache.k_cache = kc.host.data();
  r.cache.v_cache = vsrc.host.data();
  r.cache.k_scales = int8 ? k_scales.data() : nullptr;
  r.cache.v_scales = int8 ? v_scales.data() : nullptr;
  r.q = q.host.data();
  r.out = want.data();
  r.q_start = q_start.data();
  r.ctx_len = ctx_len.data();
  r.block_tables = tables.data();
  ops::ref::attention(r);
  std::vector<bool> rows_mask(static_cast<size_t>(out.n));  // every sequence's output rows
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t j = 0; j < int64_t{c.n_head} * c.head_dim; ++j) rows_mask[static_cast<size_t>(t * ld_out + j)] = true;
  std::vector<std::vector<uint8_t>> results;
  for (const Variant& v : variants) {
    SCOPED_TRACE(::testing::Message() << "prefill key split " << (v.split ? "on" : "off")
                                      << (v.fa3 >= 0 ? ", FA3 prefill mode " + std::to_string(v.fa3) : "")
                                      << (v.decode_hint ? ", decoders to the decode kernel" : "")
                                      << (v.mma == 1 ? ", tensor-core decode" : v.mma == 0 ? ", CUDA-core decode" : "")
                                      << (v.wg == 1 ? ", wgmma prefill" : v.wg == 0 ? ", mma.sync prefill" : "")
                                      << (v.mla == 1 ? ", tensor-core MLA" : v.mla == 0 ? ", CUDA-core MLA" : "")
                                      << (v.mla_splits > 0 ? ", MLA splits " + std::to_string(v.mla_splits) : "")
                                      << (v.mla_combine == 1 ? ", fused MLA merge" : v.mla_combine == 0 ? ", MLA combine kernel" : "")
                                      << (v.mla_early == 1 ? ", MLA rows early" : v.mla_early == 0 ? ", MLA rows after the wait" : ""));
    out.fill_nan();
    out.to_device();
    p.n_decode_seqs = p.decode_max_ctx_len = 0;
    while (v.decode_hint && p.n_decode_seqs < n_seqs && c.seqs[static_cast<size_t>(p.n_decode_seqs)].n_new == 1) {
      p.decode_max_ctx_len = std::max(p.decode_max_ctx_len, c.seqs[static_cast<size_t>(p.n_decode_seqs)].ctx);
      ++p.n_decode_seqs;
    }
    set_prefill_split_enabled(v.split);
    const bool mma_was = decode_mma_enabled();
    const DecodeTuning tuning_was = decode_tuning();
    if (v.mma >= 0) set_decode_mma_enabled(v.mma == 1);
    if (v.tuning) set_decode_tuning(*v.tuning);
    if (v.wg >= 0) set_prefill_wgmma_enabled(v.wg == 1);
    const bool mla_was = mla_mma_enabled();
    if (v.mla >= 0) set_mla_mma_enabled(v.mla == 1);
    const bool mla_early_was = mla_decode_early();
    if (v.mla_early >= 0) set_mla_decode_early(v.mla_early == 1);
    const int fa3_was = prefill_fa3_mode();
    if (v.fa3 >= 0) set_prefill_fa3_mode(v.fa3);
    if (v.expect_fa3) {
      EXPECT_TRUE(attention_prefill_fa3_applies(p, attention_prefill_splits(p, backend()->n_sms())));
    }
    if (v.mla == 1) {
      EXPECT_TRUE(mla_decode_mma_applies(p));  // the case runs the tensor-core MLA kernel
    }
    Status st = Status::ok();
    const MlaMerge mla_merge_was = mla_merge_mode();
    if (v.mla_combine >= 0) set_mla_merge_mode(v.mla_combine == 1 ? MlaMerge::kFused : MlaMerge::kCombineKernel);
    if (v.mla_splits > 0) {  // the MLA kernels themselves, with this many splits
      EXPECT_TRUE(mla_decode_supported(p));
      if (v.mla_combine == 1) {
        EXPECT_TRUE(v.mla_splits == 1 || mla_decode_fuses_combine(p, v.mla_splits, reinterpret_cast<const uint32_t*>(&p)));
      }
      run_mla_kernels(p, v.mla_splits, out);
    } else {
      st = backend()->attention(p);
    }
    set_mla_merge_mode(mla_merge_was);
    set_mla_decode_early(mla_early_was);
    set_mla_mma_enabled(mla_was);
    set_prefill_fa3_mode(fa3_was);
    set_decode_mma_enabled(mma_was);
    set_decode_tuning(tuning_was);
    set_prefill_wgmma_enabled(true);
    set_prefill_split_enabled(true);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    // Each sequence against its own scale: a short context's rows are larger and carry larger
    // absolute rounding error (bf16 probabilities) than a long context's averaged ones.
    results.emplace_back();
    out.from_device(&results.back(), "attention");
    for (int s = 0; s < n_seqs; ++s) {
      std::vector<bool> mask(static_cast<size_t>(out.n));
      for (int64_t t = q_start[static_cast<size_t>(s)]; t < q_start[static_cast<size_t>(s) + 1]; ++t)
        for (int64_t j = 0; j < int64_t{c.n_head} * c.head_dim; ++j) mask[static_cast<size_t>(t * ld_out + j)] = true;
      expect_close_host(out.dtype, results.back(), want, out.n, c.act == DType::kF32 ? 1e-4f : 2e-2f,
                        "attention seq " + std::to_string(s), mask);
    }
    if (v.same_as_prev && results.size() >= 2) {
      const auto& a = results[results.size() - 2];
      const auto& b = results.back();
      int64_t diff = 0;
      for (int64_t i = 0; i < out.n; ++i)
        if (rows_mask[static_cast<size_t>(i)] &&
            std::memcmp(a.data() + i * dtype_bytes(out.dtype, 1), b.data() + i * dtype_bytes(out.dtype, 1),
                        static_cast<size_t>(dtype_bytes(out.dtype, 1))) != 0)
          ++diff;
      EXPECT_EQ(diff, 0) << "a repeated run changed the output bits";
    }
  }
  for (size_t i = 0; i < variants.size(); ++i)
    for (size_t j = 0; j < variants.size(); ++j) {
      const Variant &a = variants[i], &b = variants[j];
      const bool mma_pair = a.mma == 1 && b.mma == 0 && a.wg == b.wg && !a.tuning && !b.tuning;
      const bool wg_pair = a.wg == 1 && b.wg == 0 && a.mma == b.mma && a.fa3 == b.fa3 && !a.tuning && !b.tuning;
      const bool mla_pair = a.mla == 1 && b.mla == 0 && a.mla_splits == b.mla_splits;
      if (!(mma_pair || wg_pair || mla_pair) || a.split != b.split || a.decode_hint != b.decode_hint) continue;
      SCOPED_TRACE(mma_pair  ? "tensor-core decode against the CUDA-core decode on the same inputs"
                   : wg_pair ? "wgmma prefill against the mma.sync prefill on the same inputs"
                             : "tensor-core MLA against the CUDA-core MLA on the same inputs");
      // Each is within tol of the oracle above, so within 2 tol of the other (they round
      // differently: bf16 probabilities on tensor cores, f32 on CUDA cores).
      expect_close_host(out.dtype, results[i], results[j], out.n, 2 * (c.act == DType::kF32 ? 1e-4f : 2e-2f),
                        mma_pair  ? "tensor-core vs CUDA-core decode"
                        : wg_pair ? "wgmma vs mma.sync prefill"
                                  : "tensor-core vs CUDA-core MLA",
                        rows_mask);
    }
}

// The prefill kernel's two variants (wgmma on sm_90a, mma.sync), each against the reference and
// against each other, and the FA3 kernel in both modes (where it applies: bf16 cache, head_dim
// 128, no window; the cases it does not take run the wgmma variant again).
const std::vector<Variant> kPrefillKernels = {Variant{.wg = 1, .fa3 = 0}, Variant{.wg = 0, .fa3 = 0},
                                              Variant{.wg = 1, .fa3 = 1}, Variant{.wg = 1, .fa3 = 2}};

TEST(CudaAttention, PrefillGqaHead128) {
  check_attention({{{70, 70}, {33, 100}, {5, 5}, {130, 330}}, 8, 2, 128}, kPrefillKernels);
}

TEST(CudaAttention, PrefillHead64SlidingWindow) {
  check_attention({{{70, 70}, {64, 200}, {1, 17}}, 14, 2, 64, 40}, kPrefillKernels);
}

TEST(CudaAttention, PrefillLongOneSequence) {
  check_attention({{{600, 600}}, 4, 4, 128}, kPrefillKernels);
}

// 8-bit caches widened into the wgmma kernel's swizzled tiles; sinks with a window.
TEST(CudaAttention, PrefillEightBitCachesBothKernels) {
  for (DType kv : {DType::kF8E4M3, DType::kI8}) {
    check_attention({{{70, 70}, {33, 100}, {130, 330}}, 8, 2, 128, 0, DType::kBF16, 0, kv}, kPrefillKernels);
    check_attention({{{100, 300}, {64, 64}}, 14, 2, 64, 90, DType::kBF16, 0, kv, 5}, kPrefillKernels);
  }
}

// Prefill chunks late in long prompts (contexts > 2048), decoders in the same step, a sliding
// window, head dim 64: with few query tiles the kernel splits the keys and the combine merges
// the splits. Each case runs with the split on (the default) and off, and where decoders lead
// the batch, with them handed to the decode kernel; the split one also on both prefill kernels.
const std::vector<Variant> kAllPaths = {Variant{.wg = 1, .fa3 = 0}, Variant{.split = false, .fa3 = 0},
                                        Variant{.decode_hint = true, .fa3 = 0}, Variant{.wg = 0, .fa3 = 0},
                                        Variant{.split = false, .fa3 = 1}, Variant{.split = false, .fa3 = 2}};

TEST(CudaAttention, PrefillChunkOverLongContextSplitsKeys) {
  check_attention({{{128, 6000}}, 7, 1, 128}, kAllPaths);
  check_attention({{{1, 700}, {1, 3000}, {70, 5100}, {1, 33}, {64, 4200}}, 7, 1, 128}, kAllPaths);
  check_attention({{{100, 5000}, {3, 20}}, 14, 2, 64, 3000}, kAllPaths);
}

// The ITL probe's mixed step: 64 decoders and a 64-token chunk at the end of a 9k prompt.
TEST(CudaAttention, PrefillChunkNextToManyDecodes) {
  std::vector<SeqSpec> seqs;
  for (int i = 0; i < 64; ++i) seqs.push_back({1, 130 + 3 * i});
  seqs.push_back({64, 9000});
  check_attention({seqs, 7, 1, 128}, kAllPaths);
}

// The FA3 kernel on ragged batches, where it must be the kernel that runs (modes 1 and 2, the
// wgmma variant beside them): chunks whose query offset ctx - n_q is not a multiple of the
// 128-key tile (the diagonal crosses two key tiles, and the two consumers' rows end in
// different tiles: offset 64 leaves the first consumer a fully masked last tile), n_q not a
// multiple of the 128-query tile and n_q = 1 (rows of padding), offsets 0 and 256, block sizes
// 16 and 32, groups of 4 and 7 query heads.
TEST(CudaAttention, PrefillFa3RaggedBatches) {
  (void)backend();  // creating it tells the prefill dispatch which device this is
  if (!prefill_wgmma_enabled()) GTEST_SKIP() << "the FA3 kernel needs sm_90a code and a 9.0 device";
  const std::vector<Variant> fa3 = {Variant{.split = false, .fa3 = 1, .expect_fa3 = true},
                                    Variant{.split = false, .fa3 = 2, .expect_fa3 = true},
                                    Variant{.split = false, .wg = 1, .fa3 = 0}};
  for (int bs : {16, 32}) {
    AttnCase a{{{1, 1}, {1, 300}, {70, 70}, {200, 263}, {128, 192}, {129, 2000}, {300, 1500}, {64, 1000}, {257, 257}, {128, 384}},
               8, 2, 128};
    a.block_size = bs;
    check_attention(a, fa3);
    AttnCase b{{{100, 1100}, {1, 50}, {33, 161}}, 28, 4, 128};
    b.block_size = bs;
    check_attention(b, fa3);
  }
}

// Decode tests run the tensor-core kernel and the CUDA-core one (which still takes MHA, groups
// past 16 and FRUGAL_DECODE_MMA=0), each against the reference and against each other.
const std::vector<Variant> kDecodeKernels = {{true, false, 1}, {true, false, 0}};

// A large decode batch with one long context (as 64 short decoders plus a finished 10k prompt):
// splits are capped in length, so the long sequence gets many while the others exit early.
TEST(CudaAttention, DecodeLargeBatchOneLongContext) {
  std::vector<SeqSpec> seqs;
  for (int i = 0; i < 64; ++i) seqs.push_back({1, 100 + 9 * i});
  seqs.push_back({1, 10000});
  check_attention({seqs, 28, 4, 128, 0, DType::kBF16, 16384 - 10000}, kDecodeKernels);
}

TEST(CudaAttention, DecodeSplitKv) {
  check_attention({{{1, 1}, {1, 300}, {1, 2500}}, 28, 4, 128}, kDecodeKernels);
}

TEST(CudaAttention, DecodeLargeGroupWindowAndSlack) {
  check_attention({{{1, 700}, {1, 64}, {1, 65}}, 32, 2, 64, 100, DType::kBF16, 8192}, kDecodeKernels);
}

TEST(CudaAttention, DecodeManyShortSequences) {
  std::vector<SeqSpec> seqs;
  for (int i = 0; i < 40; ++i) seqs.push_back({1, 1 + 37 * i});
  check_attention({seqs, 8, 1, 128}, kDecodeKernels);
}

// Every query-heads-per-block variant of the CUDA-core decode kernel (1, 2, 4, 8 heads, padded
// groups of 3 and 12; the tensor-core kernel takes the same groups whole), both head dims, many splits over long contexts, and windows that leave most
// splits empty.
TEST(CudaAttention, DecodeEveryHeadGrouping) {
  check_attention({{{1, 1}, {1, 33}, {1, 1500}}, 8, 8, 128}, kDecodeKernels);       // MHA: 1 head per block
  check_attention({{{1, 5}, {1, 700}}, 8, 4, 64}, kDecodeKernels);                   // 2 per block
  check_attention({{{1, 2}, {1, 900}}, 16, 4, 128, 0, DType::kBF16, 3000}, kDecodeKernels);  // 4 per block
  check_attention({{{1, 1}, {1, 600}, {1, 97}}, 9, 3, 128, 50}, kDecodeKernels);     // 3 heads padded to 4, window
  check_attention({{{1, 1200}, {1, 31}}, 24, 2, 64, 0}, kDecodeKernels);             // 12 heads: 8 + 4 padded
  check_attention({{{1, 3000}}, 12, 1, 128, 129}, kDecodeKernels);                   // 12 heads, window 129
}

TEST(CudaAttention, DecodeLongContextManySplits) {
  check_attention({{{1, 9000}}, 28, 4, 128}, kDecodeKernels);
  check_attention({{{1, 4100}, {1, 3}}, 16, 2, 64, 0, DType::kBF16, 5000}, kDecodeKernels);
}

// n_tokens <= n_seqs but with a sequence of no new tokens and one of several: the decode
// kernel's per-token loop.
TEST(CudaAttention, DecodePathSeveralTokensOneSequence) {
  check_attention({{{0, 50}, {2, 40}, {0, 7}, {1, 300}}, 28, 4, 128}, kDecodeKernels);
  check_attention({{{3, 90}, {0, 10}, {0, 20}}, 8, 2, 64, 16}, kDecodeKernels);
}

// The tensor-core decode kernel (attention_decode_mma.cu) against the reference and against the
// CUDA-core kernel on the same inputs, for every cache type: the 7B group (7 heads per kv head,
// rows padded to 16), groups of 2, 8 and 16 (all 16 rows), head dims 128 and 64, contexts that
// are not multiples of any key tile (1, 17, 100, 1000+), several sequences of different lengths
// split over many blocks, a sliding window with sinks (two key ranges in one split), and several
// new tokens of one sequence (the kernel's per-token loop).

TEST(CudaAttention, DecodeMmaMatchesReferenceAndCudaCoreKernel) {
  for (DType kv : {DType::kBF16, DType::kF8E4M3, DType::kI8}) {
    check_attention({{{1, 1}, {1, 17}, {1, 100}, {1, 1000}, {1, 1537}}, 28, 4, 128, 0, DType::kBF16, 0, kv}, kDecodeKernels);
    check_attention({{{1, 1}, {1, 17}, {1, 100}, {1, 1030}}, 16, 1, 64, 0, DType::kBF16, 0, kv}, kDecodeKernels);
    check_attention({{{1, 5}, {1, 70}, {1, 1000}}, 8, 4, 128, 64, DType::kBF16, 3000, kv, 4}, kDecodeKernels);
    check_attention({{{1, 33}, {1, 2100}, {1, 300}}, 32, 4, 64, 200, DType::kBF16, 0, kv, 37}, kDecodeKernels);
    check_attention({{{1, 4100}, {1, 9}}, 28, 2, 128, 0, DType::kBF16, 0, kv}, kDecodeKernels);  // 14 heads a kv head
    check_attention({{{0, 50}, {2, 40}, {0, 7}, {1, 300}}, 28, 4, 128, 0, DType::kBF16, 0, kv}, kDecodeKernels);
  }
}

// Which decode kernel runs and how it splits (host side): the tensor-core one for groups of
// 2..16 heads at head_dim 64/128 unless switched off; the 160 x 900 batch below is one split.
// A 7B-shaped decode launch for the host-side dispatch tests (no device buffers: nothing runs).
ops::AttentionParams dispatch_params(int n_seqs, int max_ctx) {
  ops::AttentionParams p{};
  p.cache = {nullptr, nullptr, DType::kBF16, 100, 16, 4, 128};
  p.act_dtype = DType::kBF16;
  p.ld_q = p.ld_out = 28 * 128;
  p.n_head = 28;
  p.n_seqs = p.n_tokens = n_seqs;
  p.max_ctx_len = max_ctx;
  p.scale = 1.f;
  return p;
}

TEST(CudaAttention, DecodeMmaDispatch) {
  ops::AttentionParams p = dispatch_params(160, 900);
  const bool mma_was = decode_mma_enabled();
  set_decode_mma_enabled(true);
  for (DType kv : {DType::kBF16, DType::kF8E4M3}) {
    p.cache.cache_dtype = kv;
    EXPECT_TRUE(attention_decode_mma_applies(p));
    EXPECT_EQ(attention_decode_splits(p, backend()->n_sms()), 1);
    p.n_seqs = p.n_tokens = 1;
    p.max_ctx_len = 32768;
    EXPECT_GE(attention_decode_splits(p, backend()->n_sms()), 48);  // one wave: 2+ blocks per SM
    p.n_seqs = p.n_tokens = 160;
    p.max_ctx_len = 900;
  }
  set_decode_mma_enabled(false);
  EXPECT_FALSE(attention_decode_mma_applies(p));
  set_decode_mma_enabled(true);
  p.n_head = 4;  // MHA
  EXPECT_FALSE(attention_decode_mma_applies(p));
  p.n_head = 4 * 17;  // 17 heads a kv head
  EXPECT_FALSE(attention_decode_mma_applies(p));
  p.n_head = 4 * 16;
  p.cache.head_dim = 96;
  EXPECT_FALSE(attention_decode_mma_applies(p));
  set_decode_mma_enabled(mma_was);
}

// Which prefill launches the FA3 kernel takes (host side): bf16 cache, head_dim 128, no window,
// one split, and only with its mode on (1 is the default).
TEST(CudaAttention, PrefillFa3Dispatch) {
  (void)backend();  // creating it tells the prefill dispatch which device this is
  if (!prefill_wgmma_enabled()) GTEST_SKIP() << "the FA3 kernel needs sm_90a code and a 9.0 device";
  ops::AttentionParams p = dispatch_params(1, 32768);
  p.n_tokens = 8192;
  const int was = prefill_fa3_mode();
  set_prefill_fa3_mode(0);
  EXPECT_FALSE(attention_prefill_fa3_applies(p, 1));
  for (int mode : {1, 2}) {
    set_prefill_fa3_mode(mode);
    EXPECT_TRUE(attention_prefill_fa3_applies(p, 1));
    EXPECT_FALSE(attention_prefill_fa3_applies(p, 3));  // a key split stays on the other kernel
    p.sliding_window = 4096;
    EXPECT_FALSE(attention_prefill_fa3_applies(p, 1));
    p.sliding_window = 0;
    p.cache.cache_dtype = DType::kF8E4M3;
    EXPECT_FALSE(attention_prefill_fa3_applies(p, 1));
    p.cache.cache_dtype = DType::kBF16;
    p.cache.head_dim = 64;
    p.ld_q = p.ld_out = 28 * 64;
    EXPECT_FALSE(attention_prefill_fa3_applies(p, 1));
    p.cache.head_dim = 128;
    p.ld_q = p.ld_out = 28 * 128;
  }
  set_prefill_fa3_mode(was);
}

// A batch large enough that every (sequence, kv head) block fills the GPU on its own: one
// split, the kernel writes the normalized output itself (no combine).
TEST(CudaAttention, DecodeMmaNoSplitLargeBatch) {
  std::vector<SeqSpec> seqs;
  for (int i = 0; i < 160; ++i) seqs.push_back({1, 1 + (i * 53) % 900});
  for (DType kv : {DType::kBF16, DType::kF8E4M3, DType::kI8})
    check_attention({seqs, 28, 4, 128, 0, DType::kBF16, 0, kv}, kDecodeKernels);
}

// A batch whose (sequence, kv head) blocks are fewer than the SMs (16 x 4 on an H100 / H200):
// the default runs it in blocks of 8 warps at 3 stages (attention_decode_mma_shape), every
// cache type, against the reference and the CUDA-core kernel.
TEST(CudaAttention, DecodeBatchFewerBlocksThanSms) {
  std::vector<SeqSpec> seqs;
  for (int i = 0; i < 16; ++i) seqs.push_back({1, 1 + (i * 211) % 1000});
  for (DType kv : {DType::kBF16, DType::kF8E4M3, DType::kI8})
    check_attention({seqs, 28, 4, 128, 0, DType::kBF16, 0, kv}, kDecodeKernels);
}

// The decode kernels' knobs (DecodeTuning), each against the reference: the tensor-core kernel
// with 2, 3 and 4 cp.async stages, the splits merged by the combine kernel or fused into the
// last split block (repeated: the same bits), the original block-rounded splits, a forced split
// count that leaves splits empty, and the CUDA-core kernel with the fused merge. The sliced
// combine (one block per 32 dims) and the block-table prefetch must give the same bits as the
// separate combine without prefetch (the same splits summed in the same order), with 500
// forced splits too (several row batches per warp, more splits than threads). prefetch: bit 0
// the block-table L1 prefetch, bit 1 the K/V rows' L2 prefetch.
DecodeTuning tuned(int stages, int combine, bool warp_grain = true, int splits = 0, int prefetch = 0, int warps = 0) {
  DecodeTuning t;
  t.mma_warps = warps;
  t.mma_stages = stages;
  t.combine = combine;
  t.warp_grain = warp_grain;
  t.splits = splits;
  t.table_prefetch = (prefetch & 1) != 0;
  t.l2_prefetch = (prefetch & 2) != 0;
  return t;
}

std::vector<Variant> decode_tunings() {
  const int sep = DecodeTuning::kSeparate, fused = DecodeTuning::kFused, sliced = DecodeTuning::kSliced;
  DecodeTuning original_sliced = DecodeTuning::original();
  original_sliced.combine = sliced;
  return {{true, false, 1, DecodeTuning{}},
          {true, false, 1, DecodeTuning::original()},
          {true, false, 1, original_sliced, true},
          {true, false, 1, tuned(2, fused)},
          {true, false, 1, tuned(3, sep)},
          {true, false, 1, tuned(3, sliced), true},
          {true, false, 1, tuned(3, sliced, true, 0, 1), true},
          {true, false, 1, tuned(3, sliced, true, 0, 2), true},
          {true, false, 1, tuned(3, sep, true, 500)},
          {true, false, 1, tuned(3, sliced, true, 500, 3), true},
          {true, false, 1, tuned(2, sep, true, 0, 3)},
          {true, false, 1, tuned(2, sliced), true},
          {true, false, 1, tuned(3, fused)},
          {true, false, 1, tuned(3, fused), true},
          {true, false, 1, tuned(4, fused)},
          {true, false, 1, tuned(4, sep, false)},
          {true, false, 1, tuned(3, fused, true, 500)},
          {true, false, 1, tuned(2, sep, true, 0, 0, 8)},  // 8 warps a block
          {true, false, 1, tuned(2, sliced, true, 0, 0, 8), true},
          {true, false, 1, tuned(3, fused, true, 0, 0, 8)},
          {true, false, 1, tuned(3, sep, true, 500, 0, 8)},
          {true, false, 1, tuned(0, sliced, true, 0, 0, 8)},
          {true, false, 0, tuned(0, fused)},
          {true, false, 0, tuned(0, fused), true},
          {true, false, 0, DecodeTuning::original()},
          {true, false, 0, original_sliced, true}};
}

// One 32k sequence (the acceptance shape: 28 query heads over 4 kv heads, head_dim 128), every
// cache type, with max_ctx_len = ctx and as a captured graph passes it (the power of two above).
TEST(CudaAttention, DecodeLongContextTunings) {
  for (DType kv : {DType::kBF16, DType::kF8E4M3, DType::kI8})
    for (int slack : {0, 65536 - 32768})
      check_attention({{{1, 32768}}, 28, 4, 128, 0, DType::kBF16, slack, kv}, decode_tunings());
}

// Windows and sinks (two key ranges, most splits empty), several sequences of different lengths
// (counters per token and kv head), several new tokens of one sequence (the per-token loop with
// a counter per token), head dim 64 and groups of 2 and 16.
TEST(CudaAttention, DecodeTuningsWindowsSinksAndBatches) {
  for (DType kv : {DType::kBF16, DType::kF8E4M3, DType::kI8}) {
    check_attention({{{1, 20000}, {1, 3000}}, 28, 4, 128, 4096, DType::kBF16, 12000, kv, 4}, decode_tunings());
    check_attention({{{1, 9}, {1, 700}, {1, 5000}, {1, 1}}, 32, 2, 64, 0, DType::kBF16, 0, kv}, decode_tunings());
    check_attention({{{0, 50}, {3, 4000}, {0, 7}, {1, 300}}, 8, 4, 128, 0, DType::kBF16, 0, kv}, decode_tunings());
  }
  std::vector<SeqSpec> seqs;
  for (int i = 0; i < 40; ++i) seqs.push_back({1, 1 + 97 * i});
  check_attention({seqs, 28, 4, 128}, decode_tunings());
}

// Host side of the knobs: the auto stage choice, the split counts it leads to, and when the
// merge is fused.
TEST(CudaAttention, DecodeTuningDispatch) {
  ops::AttentionParams p = dispatch_params(1, 32768);
  const bool mma_was = decode_mma_enabled();
  const DecodeTuning was = decode_tuning();
  set_decode_mma_enabled(true);
  uint32_t fake_counters = 0;
  set_decode_tuning(DecodeTuning{});
  const int n32k = attention_decode_splits(p, backend()->n_sms());
  EXPECT_EQ(attention_decode_mma_shape(p, backend()->n_sms(), n32k).stages, 3);  // 4 units: a few long sequences
  EXPECT_GE(n32k, 33);
  EXPECT_FALSE(decode_fused_combine(p, n32k, 4, 7, &fake_counters));  // the default merges separately
  p.cache.cache_dtype = DType::kF8E4M3;
  EXPECT_EQ(attention_decode_mma_shape(p, backend()->n_sms(), n32k).stages, 2);  // 8-bit caches keep 2 stages
  p.cache.cache_dtype = DType::kBF16;
  DecodeTuning auto_combine;
  auto_combine.combine = DecodeTuning::kAuto;
  set_decode_tuning(auto_combine);
  // 7 heads x n32k rows of 512 bytes: more than the auto limit at 32k, fused when forced.
  EXPECT_EQ(decode_fused_combine(p, n32k, 4, 7, &fake_counters), 7u * n32k * 512 <= kFusedCombineAutoBytes);
  EXPECT_FALSE(decode_fused_combine(p, n32k, 4, 7, nullptr));
  set_decode_tuning(tuned(0, DecodeTuning::kSliced));
  EXPECT_FALSE(decode_fused_combine(p, n32k, 4, 7, &fake_counters));  // sliced: the combine kernel
  set_decode_tuning(tuned(4, DecodeTuning::kFused));
  EXPECT_EQ(attention_decode_mma_shape(p, backend()->n_sms(), n32k).stages, 4);
  EXPECT_TRUE(decode_fused_combine(p, n32k, 4, 7, &fake_counters));
  EXPECT_FALSE(decode_fused_combine(p, kFusedCombineMaxSplits + 1, 4, 7, &fake_counters));
  EXPECT_FALSE(decode_fused_combine(p, 1, 4, 7, &fake_counters));
  EXPECT_LE(attention_decode_splits(p, backend()->n_sms()), n32k);  // one block an SM: fewer, longer splits
  set_decode_tuning(tuned(0, DecodeTuning::kAuto, true, 77));
  EXPECT_EQ(attention_decode_splits(p, backend()->n_sms()), 77);
  set_decode_tuning(auto_combine);
  p.n_seqs = p.n_tokens = 256;
  p.max_ctx_len = 1024;
  EXPECT_EQ(attention_decode_splits(p, backend()->n_sms()), 1);
  // 1,024 blocks: more than two waves at any depth (H100 / H200), so the original pipeline.
  EXPECT_EQ(attention_decode_mma_shape(p, backend()->n_sms(), 1).stages, 2);
  // Fewer blocks than SMs: 3 stages of 8 warps (one block an SM); up to twice the SMs: 3 stages
  // of 4 (two an SM at head_dim 128, bf16); the 8-bit caches and forced stages keep theirs.
  // Whole units: one split.
  p.n_seqs = p.n_tokens = 16;  // 64 blocks
  EXPECT_EQ(attention_decode_splits(p, backend()->n_sms()), 1);
  EXPECT_EQ(attention_decode_mma_shape(p, 132, 1).stages, 3);
  EXPECT_EQ(attention_decode_mma_shape(p, 132, 1).warps, 8);
  EXPECT_EQ(attention_decode_mma_shape(p, 132, 3).stages, 3);  // 192 blocks
  EXPECT_EQ(attention_decode_mma_shape(p, 132, 3).warps, 4);
  EXPECT_EQ(attention_decode_mma_shape(p, 132, 5).stages, 2);  // 320 blocks
  DecodeTuning four = DecodeTuning{};
  four.mma_warps = 4;
  set_decode_tuning(four);
  EXPECT_EQ(attention_decode_mma_shape(p, 132, 1).stages, 4);  // 4 warps forced: one block an SM at 4 stages
  EXPECT_EQ(attention_decode_mma_shape(p, 132, 1).warps, 4);
  set_decode_tuning(auto_combine);
  p.n_seqs = p.n_tokens = 64;                            // 256 blocks
  EXPECT_EQ(attention_decode_mma_shape(p, 132, 1).stages, 3);
  p.cache.cache_dtype = DType::kI8;
  EXPECT_EQ(attention_decode_mma_shape(p, 132, 1).stages, 2);
  p.cache.cache_dtype = DType::kBF16;
  set_decode_tuning(tuned(2, DecodeTuning::kAuto));
  EXPECT_EQ(attention_decode_mma_shape(p, 132, 1).stages, 2);
  // 8 warps: 3 stages where one block an SM holds the launch, else 2; never 4.
  set_decode_tuning(tuned(0, DecodeTuning::kAuto, true, 0, 0, 8));
  EXPECT_EQ(attention_decode_mma_shape(p, 132, 1).warps, 8);
  EXPECT_EQ(attention_decode_mma_shape(p, 132, 1).stages, 2);  // 256 blocks
  p.n_seqs = p.n_tokens = 16;
  EXPECT_EQ(attention_decode_mma_shape(p, 132, 1).stages, 3);  // 64 blocks
  set_decode_tuning(tuned(4, DecodeTuning::kAuto, true, 0, 0, 8));
  EXPECT_EQ(attention_decode_mma_shape(p, 132, 1).stages, 3);
  set_decode_tuning(DecodeTuning{});
  p.n_seqs = p.n_tokens = 64;
  EXPECT_EQ(attention_decode_mma_shape(p, 132, 1).warps, 4);  // 256 blocks: 4 warps
  set_decode_tuning(auto_combine);
  p.n_seqs = p.n_tokens = 32;
  p.max_ctx_len = 2048;
  const int n32 = attention_decode_splits(p, backend()->n_sms());
  EXPECT_GE(n32, 2);
  EXPECT_TRUE(decode_fused_combine(p, n32, 4, 7, &fake_counters));  // 7 x n32 rows: a short merge
  // From a quarter of the SMs' worth of (sequence, kv head) units each runs whole in one block
  // up to kMaxChunkKeys (1024) keys, and in ceil(max_ctx / 1024) splits past it; fewer units
  // keep the wave rule; whole_units 0 is the wave rule everywhere.
  const int n_sms = backend()->n_sms();
  const int whole_seqs = (decode_whole_units(n_sms) + 3) / 4;
  p.n_seqs = p.n_tokens = whole_seqs;
  p.max_ctx_len = 1024;
  EXPECT_EQ(attention_decode_splits(p, n_sms), 1);
  p.max_ctx_len = 4096;
  EXPECT_EQ(attention_decode_splits(p, n_sms), 4);
  p.max_ctx_len = 1024;
  if (whole_seqs > 1) {
    p.n_seqs = p.n_tokens = whole_seqs - 1;
    EXPECT_GT(attention_decode_splits(p, n_sms), 1);
    p.n_seqs = p.n_tokens = whole_seqs;
  }
  DecodeTuning waves = auto_combine;
  waves.whole_units = 0;
  set_decode_tuning(waves);
  EXPECT_GT(attention_decode_splits(p, n_sms), 1);
  set_decode_tuning(was);
  set_decode_mma_enabled(mma_was);
}

// MLA's latent cache (DeepSeek V2 / V3: one kv head that is both K and V, 576 wide) on the
// tensor-core MLA kernel and the CUDA-core one, each against the reference and against each
// other: contexts that are not multiples of the 32-key tile (1, 17, 100, 300, 1000, 4097),
// several sequences of different lengths, the backend's split choice (many splits for a few
// tokens, one for a batch) and forced 1, 3 and 64 splits (most of them empty for the short
// contexts), prefill chunks after decodes (each token causal over its own prefix), 16 heads
// (V2-Lite), 17 and 3 (a partial group of 16). Forced splits run merged by the combine kernel,
// then by the last blocks (the same bits); the tensor-core kernel also with its older rows copied
// after the PDL wait instead of before it (the same bits; 4097 keys go on through the ring).
std::vector<Variant> mla_kernels(std::initializer_list<int> split_counts) {
  std::vector<Variant> v = {Variant{.mla = 1, .mla_early = 1}, Variant{.same_as_prev = true, .mla = 1, .mla_early = 0},
                            Variant{.mla = 0}};
  for (int s : split_counts)
    for (int mla : {1, 0}) {
      v.push_back(Variant{.mla = mla, .mla_splits = s, .mla_combine = 0, .mla_early = mla == 1 ? 1 : -1});
      if (mla == 1) v.push_back(Variant{.same_as_prev = true, .mla = 1, .mla_splits = s, .mla_combine = 0, .mla_early = 0});
      v.push_back(Variant{.same_as_prev = true, .mla = mla, .mla_splits = s, .mla_combine = 1});
    }
  return v;
}
const std::vector<Variant> kMlaKernels = mla_kernels({1, 3, 64});

AttnCase mla_case(std::vector<SeqSpec> seqs, int n_head) {
  AttnCase c{std::move(seqs), n_head, 1, 576};
  c.shared_kv = true;
  return c;
}

TEST(CudaAttention, MlaMmaMatchesReferenceAndCudaCoreKernel) {
  check_attention(mla_case({{1, 1}, {1, 17}, {1, 100}, {1, 300}, {1, 1000}}, 16), kMlaKernels);
  check_attention(mla_case({{1, 37}, {1, 300}, {5, 5}, {7, 40}, {33, 120}}, 17), kMlaKernels);  // decodes, then chunks
  check_attention(mla_case({{1, 4097}}, 3), kMlaKernels);
}

// The fused merge over split counts from 2 to 64 (empty splits, a last block that may be an
// empty one, more splits than a warp's lanes), decodes of odd contexts and prefill chunks.
TEST(CudaAttention, MlaFusedCombineSplitCounts) {
  const std::vector<Variant> v = mla_kernels({2, 4, 5, 7, 16, 33, 63, 64});
  check_attention(mla_case({{1, 1}, {1, 31}, {1, 129}, {1, 333}, {1, 2049}}, 16), v);
  check_attention(mla_case({{1, 77}, {3, 50}, {1, 1000}}, 33), v);
}

// A V2-Lite decode batch (16 heads): 140 sequences fill the GPU, so the backend runs one split.
TEST(CudaAttention, MlaMmaDecodeBatch) {
  std::vector<SeqSpec> seqs;
  for (int i = 0; i < 140; ++i) seqs.push_back({1, 129 + (i * 37) % 160});
  check_attention(mla_case(seqs, 16), {Variant{.mla = 1}, Variant{.mla = 0}, Variant{.mla = 1, .mla_splits = 2, .mla_combine = 0},
                                       Variant{.same_as_prev = true, .mla = 1, .mla_splits = 2, .mla_combine = 1}});
}

// Which MLA kernel runs and how it splits (host side): the tensor-core one for 576-wide bf16
// latent caches unless switched off; a 256-token batch is one split, one long sequence many.
TEST(CudaAttention, MlaMmaDispatch) {
  ops::AttentionParams p{};
  p.cache = {nullptr, nullptr, DType::kBF16, 100, 16, 1, 576};
  p.act_dtype = DType::kBF16;
  p.ld_q = p.ld_out = 16 * 576;
  p.n_head = 16;
  p.n_seqs = p.n_tokens = 256;
  p.max_ctx_len = 256;
  p.scale = 1.f;
  const bool was = mla_mma_enabled();
  set_mla_mma_enabled(true);
  ASSERT_TRUE(mla_decode_supported(p));
  EXPECT_TRUE(mla_decode_mma_applies(p));
  EXPECT_EQ(mla_decode_splits(p, backend()->n_sms()), 1);
  p.n_seqs = p.n_tokens = 1;
  p.max_ctx_len = 4096;
  EXPECT_EQ(mla_decode_splits(p, backend()->n_sms()), 64);  // two 32-key tiles a split
  p.max_ctx_len = 100;
  EXPECT_EQ(mla_decode_splits(p, backend()->n_sms()), 2);
  // The fused merge: split launches with counters, while (tokens x head groups) fit the counters
  // and (auto) a group's partial rows are at most kMlaFusedMergeMaxBytes: 7 splits of 16 x 576.
  const uint32_t* fake_counters = reinterpret_cast<const uint32_t*>(&p);
  const MlaMerge merge_was = mla_merge_mode();
  set_mla_merge_mode(MlaMerge::kAuto);
  EXPECT_TRUE(mla_decode_fuses_combine(p, 2, fake_counters));
  EXPECT_TRUE(mla_decode_fuses_combine(p, 7, fake_counters));
  EXPECT_FALSE(mla_decode_fuses_combine(p, 8, fake_counters));
  EXPECT_FALSE(mla_decode_fuses_combine(p, 1, fake_counters));
  EXPECT_FALSE(mla_decode_fuses_combine(p, 2, nullptr));
  set_mla_merge_mode(MlaMerge::kFused);
  EXPECT_TRUE(mla_decode_fuses_combine(p, 64, fake_counters));
  p.n_tokens = kDecodeCounters;
  EXPECT_TRUE(mla_decode_fuses_combine(p, 2, fake_counters));
  p.n_head = 17;  // two head groups a token
  EXPECT_FALSE(mla_decode_fuses_combine(p, 2, fake_counters));
  p.n_head = 16;
  p.n_tokens = 1;
  set_mla_merge_mode(MlaMerge::kCombineKernel);
  EXPECT_FALSE(mla_decode_fuses_combine(p, 2, fake_counters));
  set_mla_merge_mode(merge_was);
  set_mla_mma_enabled(false);
  EXPECT_FALSE(mla_decode_mma_applies(p));
  set_mla_mma_enabled(true);
  p.cache.head_dim = 136;  // the CUDA-core kernel's other widths
  p.ld_q = p.ld_out = 16 * 136;
  EXPECT_TRUE(mla_decode_supported(p));
  EXPECT_FALSE(mla_decode_mma_applies(p));
  set_mla_mma_enabled(was);
}

TEST(CudaAttention, GenericFallbackF32AndOddHeadDim) {
  check_attention({{{9, 9}, {3, 40}}, 6, 3, 96, 0, DType::kF32});
  check_attention({{{1, 30}, {1, 600}}, 4, 2, 80, 0, DType::kBF16});
}

}  // namespace
}  // namespace frugal::cuda::testing
