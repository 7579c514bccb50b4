// Attention (prefill tensor-core kernel, split-KV decode, generic fallback) against ops::ref
// over a paged cache whose blocks are scattered in random order.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
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
};

// How the backend is asked: prefill key split on or off; n_decode_seqs passed for the leading
// one-token sequences (a mixed step: they go to the decode kernel) or not.
struct Variant {
  bool split = true;
  bool decode_hint = false;
};

// Every variant against one reference run (the reference is the slow part).
void check_attention(const AttnCase& c, const std::vector<Variant>& variants = {Variant{}}) {
  SCOPED_TRACE(::testing::Message() << "n_head=" << c.n_head << " n_kv=" << c.n_kv << " hd=" << c.head_dim
                                    << " window=" << c.sliding_window << " act=" << dtype_name(c.act)
                                    << " n_seqs=" << c.seqs.size());
  std::mt19937 rng(static_cast<unsigned>(c.n_head * 131 + c.head_dim + c.seqs.size()));
  const int bs = 16, n_seqs = static_cast<int>(c.seqs.size());
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
  Tensor kc(c.act, int64_t{n_blocks} * bs * row), vc(c.act, int64_t{n_blocks} * bs * row);
  Tensor q(c.act, n_tokens * ld_q), out(c.act, n_tokens * ld_out);
  kc.fill_uniform(rng, -1, 1);
  vc.fill_uniform(rng, -1, 1);
  q.fill_uniform(rng, -3, 3);
  out.fill_nan();
  for (auto* t : {&kc, &vc, &q, &out}) t->to_device();
  DevInts di;
  ops::AttentionParams p{{kc.dev, vc.dev, c.act, n_blocks, bs, c.n_kv, c.head_dim},
                         q.dev, out.dev, c.act, ld_q, ld_out, n_seqs, n_tokens,
                         di(q_start), di(ctx_len), di(tables), max_blocks, max_ctx + c.max_ctx_slack,
                         c.n_head, c.sliding_window, 1.f / std::sqrt(static_cast<float>(c.head_dim))};
  std::vector<uint8_t> want(out.host.size());
  ops::AttentionParams r = p;
  r.cache.k_cache = kc.host.data();
  r.cache.v_cache = vc.host.data();
  r.q = q.host.data();
  r.out = want.data();
  r.q_start = q_start.data();
  r.ctx_len = ctx_len.data();
  r.block_tables = tables.data();
  ops::ref::attention(r);
  for (const Variant& v : variants) {
    SCOPED_TRACE(::testing::Message() << "prefill key split " << (v.split ? "on" : "off")
                                      << (v.decode_hint ? ", decoders to the decode kernel" : ""));
    out.fill_nan();
    out.to_device();
    p.n_decode_seqs = p.decode_max_ctx_len = 0;
    while (v.decode_hint && p.n_decode_seqs < n_seqs && c.seqs[static_cast<size_t>(p.n_decode_seqs)].n_new == 1) {
      p.decode_max_ctx_len = std::max(p.decode_max_ctx_len, c.seqs[static_cast<size_t>(p.n_decode_seqs)].ctx);
      ++p.n_decode_seqs;
    }
    set_prefill_split_enabled(v.split);
    const Status st = backend()->attention(p);
    set_prefill_split_enabled(true);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    // Each sequence against its own scale: a short context's rows are larger and carry larger
    // absolute rounding error (bf16 probabilities) than a long context's averaged ones.
    for (int s = 0; s < n_seqs; ++s) {
      std::vector<bool> mask(static_cast<size_t>(out.n));
      for (int64_t t = q_start[static_cast<size_t>(s)]; t < q_start[static_cast<size_t>(s) + 1]; ++t)
        for (int64_t j = 0; j < int64_t{c.n_head} * c.head_dim; ++j) mask[static_cast<size_t>(t * ld_out + j)] = true;
      expect_close(out, want, c.act == DType::kF32 ? 1e-4f : 2e-2f, "attention seq " + std::to_string(s), mask);
    }
  }
}

TEST(CudaAttention, PrefillGqaHead128) {
  check_attention({{{70, 70}, {33, 100}, {5, 5}, {130, 330}}, 8, 2, 128});
}

TEST(CudaAttention, PrefillHead64SlidingWindow) {
  check_attention({{{70, 70}, {64, 200}, {1, 17}}, 14, 2, 64, 40});
}

TEST(CudaAttention, PrefillLongOneSequence) {
  check_attention({{{600, 600}}, 4, 4, 128});
}

// Prefill chunks late in long prompts (contexts > 2048), decoders in the same step, a sliding
// window, head dim 64: with few query tiles the kernel splits the keys and the combine merges
// the splits. Each case runs with the split on (the default) and off, and where decoders lead
// the batch, with them handed to the decode kernel.
const std::vector<Variant> kAllPaths = {{true, false}, {false, false}, {true, true}};

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

// A large decode batch with one long context (as 64 short decoders plus a finished 10k prompt):
// splits are capped in length, so the long sequence gets many while the others exit early.
TEST(CudaAttention, DecodeLargeBatchOneLongContext) {
  std::vector<SeqSpec> seqs;
  for (int i = 0; i < 64; ++i) seqs.push_back({1, 100 + 9 * i});
  seqs.push_back({1, 10000});
  check_attention({seqs, 28, 4, 128, 0, DType::kBF16, 16384 - 10000});
}

TEST(CudaAttention, DecodeSplitKv) {
  check_attention({{{1, 1}, {1, 300}, {1, 2500}}, 28, 4, 128});
}

TEST(CudaAttention, DecodeLargeGroupWindowAndSlack) {
  check_attention({{{1, 700}, {1, 64}, {1, 65}}, 32, 2, 64, 100, DType::kBF16, 8192});
}

TEST(CudaAttention, DecodeManyShortSequences) {
  std::vector<SeqSpec> seqs;
  for (int i = 0; i < 40; ++i) seqs.push_back({1, 1 + 37 * i});
  check_attention({seqs, 8, 1, 128});
}

// Every query-heads-per-block variant of the decode kernel (1, 2, 4, 8 heads, padded groups
// of 3 and 12), both head dims, many splits over long contexts, and windows that leave most
// splits empty.
TEST(CudaAttention, DecodeEveryHeadGrouping) {
  check_attention({{{1, 1}, {1, 33}, {1, 1500}}, 8, 8, 128});       // MHA: 1 head per block
  check_attention({{{1, 5}, {1, 700}}, 8, 4, 64});                   // 2 per block
  check_attention({{{1, 2}, {1, 900}}, 16, 4, 128, 0, DType::kBF16, 3000});  // 4 per block
  check_attention({{{1, 1}, {1, 600}, {1, 97}}, 9, 3, 128, 50});     // 3 heads padded to 4, window
  check_attention({{{1, 1200}, {1, 31}}, 24, 2, 64, 0});             // 12 heads: 8 + 4 padded
  check_attention({{{1, 3000}}, 12, 1, 128, 129});                   // 12 heads, window 129
}

TEST(CudaAttention, DecodeLongContextManySplits) {
  check_attention({{{1, 9000}}, 28, 4, 128});
  check_attention({{{1, 4100}, {1, 3}}, 16, 2, 64, 0, DType::kBF16, 5000});
}

// n_tokens <= n_seqs but with a sequence of no new tokens and one of several: the decode
// kernel's per-token loop.
TEST(CudaAttention, DecodePathSeveralTokensOneSequence) {
  check_attention({{{0, 50}, {2, 40}, {0, 7}, {1, 300}}, 28, 4, 128});
  check_attention({{{3, 90}, {0, 10}, {0, 20}}, 8, 2, 64, 16});
}

TEST(CudaAttention, GenericFallbackF32AndOddHeadDim) {
  check_attention({{{9, 9}, {3, 40}}, 6, 3, 96, 0, DType::kF32});
  check_attention({{{1, 30}, {1, 600}}, 4, 2, 80, 0, DType::kBF16});
}

}  // namespace
}  // namespace frugal::cuda::testing
