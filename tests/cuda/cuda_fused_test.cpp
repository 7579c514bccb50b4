// The CUDA backend's fused ops (ops/op_list.h FRUGAL_FUSED_OPS) against the same op run as its
// sequence of kernels (CudaBackend::set_fuse_*(false)), bit for bit, eagerly and replayed from a
// captured graph, on 7B decode shapes (28 q heads, 4 kv heads of 128; the MLP's k) and DeepSeek's
// (MLA's latent row, the MoE router, the input norm in the q / kv_a projection). The op harness
// (cuda_harness_test) checks both paths against ops::ref on odd shapes; this test checks the
// fused kernels really ran (the backend's counters) and equal what the unfused kernels give.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/kernels.h"
#include "cuda_quant_util.h"
#include "cuda_test_util.h"
#include "ops/weight_format.h"

namespace frugal::cuda::testing {
namespace {

// Runs `op` on fresh copies of `inputs` (uploaded before each run) fused and unfused, eagerly and
// (fused) from a graph, and compares every tensor of `inputs` afterwards byte for byte. The
// backend's setting is restored to `was` afterwards.
void expect_fused_equals_sequence(const std::vector<Tensor*>& inputs, const std::function<Status()>& op,
                                  const std::function<void(bool)>& set_fused, const std::function<int64_t()>& fused_calls,
                                  const std::string& what, bool was) {
  auto run = [&](bool fused, bool graph) {
    for (Tensor* t : inputs) t->to_device();
    set_fused(fused);
    const int64_t before = fused_calls();
    if (graph) {
      static uint64_t key = 0x5EED0000;
      ++key;
      EXPECT_TRUE(backend()->capture_graph(key, op).is_ok()) << what;
      for (Tensor* t : inputs) t->to_device();  // capture enqueues nothing: the replay runs it
      EXPECT_TRUE(backend()->replay_graph(key).is_ok()) << what;
    } else {
      EXPECT_TRUE(op().is_ok()) << what;
    }
    EXPECT_TRUE(backend()->synchronize().is_ok());
    EXPECT_EQ(fused_calls() > before, fused) << what << (fused ? ": the fused kernel did not run" : ": fused while off");
    std::vector<std::vector<uint8_t>> out(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) inputs[i]->from_device(&out[i], what);
    return out;
  };
  const auto seq = run(false, false), fused = run(true, false), graph = run(true, true);
  set_fused(was);
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_TRUE(seq[i] == fused[i]) << what << ": tensor " << i << " differs between the fused and unfused paths";
    EXPECT_TRUE(seq[i] == graph[i]) << what << ": tensor " << i << " differs in the graph replay";
  }
}

TEST(CudaFused, RopeKvWriteEqualsRopeThenKvWrite) {
  const int n_head = 28, n_kv = 4, hd = 128, bs = 16, n_blocks = 80;
  const int64_t q_dim = int64_t{n_head} * hd, kv_dim = int64_t{n_kv} * hd, ld = q_dim + 2 * kv_dim;
  const int64_t n_slots = int64_t{n_blocks} * bs;
  for (DType cache_t : {DType::kBF16, DType::kF8E4M3, DType::kI8})
    for (int rot : {128, 64})
      for (int64_t n_tok : {1, 3, 600}) {  // 600: one block a token, its warps over the rows in turn
        const std::string what = std::string("rope_kv_write cache=") + dtype_name(cache_t) + " rotary_dim=" +
                                 std::to_string(rot) + " n_tokens=" + std::to_string(n_tok);
        std::mt19937 rng(static_cast<unsigned>(rot + n_tok));
        Tensor qkv(DType::kBF16, n_tok * ld), kc(cache_t, n_slots * kv_dim), vc(cache_t, n_slots * kv_dim);
        Tensor ks(DType::kF32, n_slots * n_kv), vs(DType::kF32, n_slots * n_kv);
        qkv.fill_uniform(rng, -4, 4);
        for (Tensor* t : {&kc, &vc, &ks, &vs}) std::fill(t->host.begin(), t->host.end(), uint8_t{0x11});
        std::vector<int32_t> pos, slots;
        for (int64_t t = 0; t < n_tok; ++t) {
          pos.push_back(static_cast<int32_t>(1000 + 977 * t));
          slots.push_back(t == 1 ? -1 : static_cast<int32_t>((37 * t + 5) % n_slots));
        }
        std::vector<float> inv(static_cast<size_t>(rot / 2));
        for (int i = 0; i < rot / 2; ++i) inv[static_cast<size_t>(i)] = std::pow(1e6f, -2.f * i / rot);
        DevInts di;
        auto* q = static_cast<uint8_t*>(qkv.dev);
        const bool int8 = cache_t == DType::kI8, fp8 = cache_t == DType::kF8E4M3;
        const ops::RopeKvWriteParams p{
            .rope = {.q = q, .k = q + 2 * q_dim, .act_dtype = DType::kBF16, .positions = di(pos), .inv_freq = di.floats(inv),
                     .n_tokens = n_tok, .ld_q = ld, .ld_k = ld, .n_head = n_head, .n_head_kv = n_kv, .head_dim = hd,
                     .rotary_dim = rot, .attention_factor = 1.f},
            .kv = {.cache = {.k_cache = kc.dev, .v_cache = vc.dev, .cache_dtype = cache_t, .n_blocks = n_blocks,
                             .block_size = bs, .n_head_kv = n_kv, .head_dim = hd,
                             .k_scales = int8 ? static_cast<float*>(ks.dev) : nullptr,
                             .v_scales = int8 ? static_cast<float*>(vs.dev) : nullptr,
                             .k_scale = fp8 ? 0.05f : 1.f, .v_scale = fp8 ? 0.02f : 1.f},
                   .k = q + 2 * q_dim, .v = q + 2 * (q_dim + kv_dim), .act_dtype = DType::kBF16, .ld_k = ld, .ld_v = ld,
                   .slot_mapping = di(slots), .n_tokens = n_tok}};
        expect_fused_equals_sequence(
            {&qkv, &kc, &vc, &ks, &vs}, [&] { return backend()->rope_kv_write(p); },
            [](bool on) { backend()->set_fuse_rope_kv(on); }, [] { return backend()->fused_rope_kv_calls(); }, what,
            backend()->fuse_rope_kv());
      }
}

// MLA's latent-row prologue on V2-Lite's shapes (16 heads of [q_nope 128 | q_pe 64], rows [c 512 |
// k_pe 64]): one kernel against rms_norm, rope and kv_write, interleaved (V2) and rotate_half
// (V3 without rope_interleave) pairs, YaRN's attention factor, a padding token (slot -1), every
// latent cache dtype.
TEST(CudaFused, MlaKvPrologueEqualsNormRopeKvWrite) {
  const int n_head = 16, dim = 512, rot = 64, nope = 128, bs = 16, n_blocks = 8;
  const int64_t lat = dim + rot, ld = lat + 8, q_ld = int64_t{n_head} * (nope + rot), n_slots = int64_t{n_blocks} * bs;
  for (DType cache_t : {DType::kBF16, DType::kF8E4M3, DType::kF32})
    for (bool interleaved : {true, false})
      for (int64_t n_tok : {1, 3}) {
        const std::string what = std::string("mla_kv_prologue cache=") + dtype_name(cache_t) +
                                 (interleaved ? " interleaved" : " rotate_half") + " n_tokens=" + std::to_string(n_tok);
        std::mt19937 rng(static_cast<unsigned>(n_tok * 3 + interleaved));
        Tensor kva(DType::kBF16, n_tok * ld), q(DType::kBF16, n_tok * q_ld), w(DType::kBF16, dim), cache(cache_t, n_slots * lat);
        kva.fill_uniform(rng, -4, 4);
        q.fill_uniform(rng, -4, 4);
        w.fill_uniform(rng, 0.5f, 1.5f);
        std::fill(cache.host.begin(), cache.host.end(), uint8_t{0x11});
        std::vector<int32_t> pos, slots;
        for (int64_t t = 0; t < n_tok; ++t) {
          pos.push_back(static_cast<int32_t>(129 + 977 * t));
          slots.push_back(t == 1 ? -1 : static_cast<int32_t>((37 * t + 5) % n_slots));
        }
        std::vector<float> inv(static_cast<size_t>(rot / 2));
        for (int i = 0; i < rot / 2; ++i) inv[static_cast<size_t>(i)] = std::pow(1e4f, -2.f * i / rot);
        DevInts di;
        w.to_device();
        auto* row = static_cast<uint8_t*>(kva.dev);
        const ops::MlaKvPrologueParams p{
            .norm = {.x = row, .residual = nullptr, .y = row, .weight = w.dev, .act_dtype = DType::kBF16,
                     .weight_dtype = DType::kBF16, .rows = n_tok, .dim = dim, .ld_x = ld, .ld_res = ld, .ld_y = ld,
                     .eps = 1e-6f},
            .rope = {.q = static_cast<uint8_t*>(q.dev) + 2 * nope, .k = row + 2 * dim, .act_dtype = DType::kBF16,
                     .positions = di(pos), .inv_freq = di.floats(inv), .n_tokens = n_tok, .ld_q = q_ld, .ld_k = ld,
                     .n_head = n_head, .n_head_kv = 1, .head_dim = nope + rot, .rotary_dim = rot,
                     .attention_factor = interleaved ? 1.f : 1.2f, .interleaved = interleaved},
            .kv = {.cache = {.k_cache = cache.dev, .v_cache = cache.dev, .cache_dtype = cache_t, .n_blocks = n_blocks,
                             .block_size = bs, .n_head_kv = 1, .head_dim = static_cast<int32_t>(lat),
                             .k_scale = cache_t == DType::kF8E4M3 ? 0.05f : 1.f,
                             .v_scale = cache_t == DType::kF8E4M3 ? 0.05f : 1.f},
                   .k = row, .v = row, .act_dtype = DType::kBF16, .ld_k = ld, .ld_v = ld, .slot_mapping = di(slots),
                   .n_tokens = n_tok}};
        EXPECT_TRUE(mla_kv_prologue_fusable(p)) << what;
        expect_fused_equals_sequence(
            {&kva, &q, &cache}, [&] { return backend()->mla_kv_prologue(p); },
            [](bool on) { backend()->set_fuse_mla_prologue(on); }, [] { return backend()->fused_mla_prologue_calls(); },
            what, backend()->fuse_mla_prologue());
      }
}

// MLA's attention then W_UV on V2-Lite's shapes (16 heads, latent rows of 576, W_UV 128 x 512 a
// head inside kv_b's [nope 128 | v 128] x 512 blocks): the decode kernel's splits merged straight
// into the per-head matmul against attention then batched_matmul, bit for bit (ocat is the fused
// op's scratch: not compared), for one long decode, several decodes, 16 of them and a mixed step,
// and a partial group of 17 heads; with the weights' first loads before the PDL wait and after it.
TEST(CudaFused, AttentionBatchedMatmulEqualsAttentionThenMatmul) {
  const int D = 576, rank = 512, vdim = 128, nope = 128, bs = 16;
  struct Case {
    std::vector<std::pair<int32_t, int32_t>> seqs;  // (new tokens, context)
    int32_t n_decode;
    int32_t n_head;
  };
  const Case cases[] = {{{{1, 300}}, 1, 16},
                        {{{1, 37}, {1, 300}, {1, 1000}}, 3, 16},
                        {{{1, 300}, {1, 41}, {1, 700}, {1, 129}, {1, 2}, {1, 64}, {1, 65}, {1, 999},
                          {1, 300}, {1, 41}, {1, 700}, {1, 129}, {1, 2}, {1, 64}, {1, 65}, {1, 999}}, 16, 16},
                        {{{1, 300}, {1, 77}, {5, 200}}, 2, 16},
                        {{{1, 300}, {1, 511}}, 2, 17}};
  for (const Case& c : cases) {
    const int32_t H = c.n_head, n_seqs = static_cast<int32_t>(c.seqs.size());
    int32_t n_tok = 0, max_ctx = 0, dec_ctx = 0, blocks = 0, max_blocks = 0;
    for (size_t s = 0; s < c.seqs.size(); ++s) {
      n_tok += c.seqs[s].first;
      max_ctx = std::max(max_ctx, c.seqs[s].second);
      if (static_cast<int32_t>(s) < c.n_decode) dec_ctx = std::max(dec_ctx, c.seqs[s].second);
      const int32_t nb = (c.seqs[s].second + bs - 1) / bs;
      blocks += nb;
      max_blocks = std::max(max_blocks, nb);
    }
    const std::string what = "attention_batched_matmul seqs=" + std::to_string(n_seqs) + " tokens=" + std::to_string(n_tok) +
                             " heads=" + std::to_string(H) + " max_ctx=" + std::to_string(max_ctx);
    std::mt19937 rng(static_cast<unsigned>(n_tok * 7 + H));
    const int64_t cat_ld = int64_t{H} * D, n_slots = int64_t{blocks} * bs;
    Tensor q(DType::kBF16, n_tok * cat_ld), cache(DType::kBF16, n_slots * D), kvb(DType::kBF16, int64_t{H} * (nope + vdim) * rank);
    Tensor y(DType::kBF16, n_tok * int64_t{H} * vdim + 8);
    Tensor ocat(DType::kBF16, n_tok * cat_ld);
    q.fill_uniform(rng, -2, 2);
    cache.fill_uniform(rng, -1, 1);
    kvb.fill_uniform(rng, -0.1f, 0.1f);
    y.fill_uniform(rng, -1, 1);
    ocat.fill_uniform(rng, -1, 1);
    ocat.to_device();
    std::vector<int32_t> tables(static_cast<size_t>(n_seqs) * max_blocks, -1), q_start{0}, ctx;
    std::vector<int32_t> pool(static_cast<size_t>(blocks));
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), rng);
    size_t next = 0;
    for (int32_t s = 0; s < n_seqs; ++s) {
      const auto [nq, cl] = c.seqs[static_cast<size_t>(s)];
      for (int32_t j = 0; j < (cl + bs - 1) / bs; ++j) tables[static_cast<size_t>(s * max_blocks + j)] = pool[next++];
      q_start.push_back(q_start.back() + nq);
      ctx.push_back(cl);
    }
    DevInts di;
    const ops::AttentionBatchedMatmulParams f{
        .attn = {.cache = {.k_cache = cache.dev, .v_cache = cache.dev, .cache_dtype = DType::kBF16,
                           .n_blocks = blocks, .block_size = bs, .n_head_kv = 1, .head_dim = D},
                 .q = q.dev, .out = ocat.dev, .act_dtype = DType::kBF16, .ld_q = cat_ld, .ld_out = cat_ld,
                 .n_seqs = n_seqs, .n_tokens = n_tok, .q_start = di(q_start), .ctx_len = di(ctx),
                 .block_tables = di(tables), .max_blocks_per_seq = max_blocks, .max_ctx_len = max_ctx, .n_head = H,
                 .sliding_window = 0, .scale = 0.07f, .n_decode_seqs = c.n_decode, .decode_max_ctx_len = dec_ctx},
        .mm = {.x = ocat.dev, .x_dtype = DType::kBF16, .ld_x = cat_ld, .stride_x = D,
               .w = static_cast<const uint8_t*>(kvb.dev) + 2 * int64_t{nope} * rank, .w_dtype = DType::kBF16,
               .stride_w = int64_t{nope + vdim} * rank, .y = y.dev, .y_dtype = DType::kBF16, .ld_y = int64_t{H} * vdim,
               .stride_y = vdim, .batch = H, .m = n_tok, .n = vdim, .k = rank}};
    const int splits = mla_decode_splits(f.attn, backend()->n_sms());
    EXPECT_TRUE(mla_combine_uv_fusable(f.attn, f.mm, splits)) << what << " splits=" << splits;
    const bool early_was = batched_gemv_early();
    for (bool early : {true, false}) {  // W_UV's first weights before the PDL wait, or after it
      set_batched_gemv_early(early);
      expect_fused_equals_sequence(
          {&q, &cache, &kvb, &y}, [&] { return backend()->attention_batched_matmul(f); },
          [](bool on) { backend()->set_fuse_mla_uv(on); }, [] { return backend()->fused_mla_uv_calls(); },
          what + (early ? " early weights" : " weights after the wait"), backend()->fuse_mla_uv());
    }
    set_batched_gemv_early(early_was);
  }
}

// MLA's whole attention part (mla_attention) for one decode token on V2-Lite's shapes (hidden
// 2048, 16 heads, c 512, rope 64, nope 128, v 128) as the persistent kernel (mla_attention.cu)
// against the op's sequence of kernels (FRUGAL_FUSE_MLA_ATTN=0's path): within bf16 rounding,
// not bit for bit (its sums run in another order). The residual stream is small (0.1) against
// the projection's output, so the comparison sees the attention part; the cache rows of this
// token must be within rounding too and every other row untouched. W_abs has the model's
// structure, so the sequence with its prologue and absorbed projection in one launch
// (absorb_rope_identity) must give the sequence's bits. Contexts from one key (the
// token's own) to several tiles a split; the kernel run twice eagerly and replayed twice from a
// graph must give the same bits each time (its barrier counter goes on counting).
TEST(CudaFused, MlaAttentionPersistentKernelWithinRoundingOfSequence) {
  const int64_t hidden = 2048;
  const int H = 16, rank = 512, rope = 64, nope = 128, vdim = 128, bs = 16;
  const int lat = rank + rope, qk = nope + rope;
  const int64_t qout = int64_t{H} * qk, q_ld = qout + lat, cat_ld = int64_t{H} * lat, v_w = int64_t{H} * vdim;
  for (int ctx : {1, 37, 256, 300, 1030, 4100}) {
    const std::string what = "mla_attention V2-Lite ctx=" + std::to_string(ctx);
    std::mt19937 rng(static_cast<unsigned>(ctx));
    const int32_t blocks = (ctx + bs - 1) / bs + 3;
    const int64_t n_slots = int64_t{blocks} * bs;
    Tensor resid(DType::kBF16, hidden), wn(DType::kBF16, hidden), wq(DType::kBF16, q_ld * hidden);
    Tensor wkvn(DType::kBF16, rank), wabs(DType::kBF16, int64_t{H} * lat * qk);
    Tensor kvb(DType::kBF16, int64_t{H} * (nope + vdim) * rank), wo(DType::kBF16, hidden * v_w);
    Tensor cache(DType::kBF16, n_slots * lat), xn(DType::kBF16, hidden), qbuf(DType::kBF16, q_ld);
    Tensor qcat(DType::kBF16, cat_ld), ocat(DType::kBF16, cat_ld), attn(DType::kBF16, v_w);
    resid.fill_uniform(rng, -0.1f, 0.1f);
    wn.fill_uniform(rng, 5.f, 15.f);  // xn of a few units from the small stream
    wkvn.fill_uniform(rng, 0.5f, 1.5f);
    const float sq = 1.7f / std::sqrt(static_cast<float>(hidden)), sa = 1.7f / std::sqrt(static_cast<float>(qk));
    wq.fill_uniform(rng, -sq, sq);
    wabs.fill_uniform(rng, -sa, sa);
    // The model's absorbed weight (model/deepseek.cpp): zeros over the rope columns, [0 | I] rows.
    for (int h = 0; h < H; ++h)
      for (int r = 0; r < lat; ++r)
        for (int j = 0; j < qk; ++j)
          if (r >= rank || j >= nope) wabs.set((int64_t{h} * lat + r) * qk + j, r >= rank && j == nope + (r - rank) ? 1.f : 0.f);
    kvb.fill_uniform(rng, -0.07f, 0.07f);
    wo.fill_uniform(rng, -0.04f, 0.04f);
    cache.fill_uniform(rng, -1, 1);
    for (Tensor* t : {&xn, &qbuf, &qcat, &ocat, &attn}) t->fill_uniform(rng, -1, 1);
    for (Tensor* t : {&wn, &wq, &wkvn, &wabs, &kvb, &wo, &xn, &qbuf, &qcat, &ocat, &attn}) t->to_device();
    std::vector<int32_t> pool(static_cast<size_t>(blocks));
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), rng);
    std::vector<int32_t> table(pool.begin(), pool.begin() + (ctx + bs - 1) / bs);
    const int32_t slot = table[static_cast<size_t>((ctx - 1) / bs)] * bs + (ctx - 1) % bs;
    std::vector<float> inv_freq(static_cast<size_t>(rope / 2));
    for (size_t i = 0; i < inv_freq.size(); ++i) inv_freq[i] = static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(i) / rope));
    DevInts di;
    auto at = [](void* p, int64_t el) { return static_cast<uint8_t*>(p) + 2 * el; };
    void* kva = at(qbuf.dev, qout);
    const ops::KvCacheLayer kc{.k_cache = cache.dev, .v_cache = cache.dev, .cache_dtype = DType::kBF16,
                               .n_blocks = blocks, .block_size = bs, .n_head_kv = 1, .head_dim = lat};
    const ops::RmsNormParams norm{.x = resid.dev, .residual = nullptr, .y = xn.dev, .weight = wn.dev,
                                  .act_dtype = DType::kBF16, .weight_dtype = DType::kBF16, .rows = 1, .dim = hidden,
                                  .ld_x = hidden, .ld_res = hidden, .ld_y = hidden, .eps = 1e-6f};
    const ops::MlaAttentionParams p{
        .qkv = {.norm = norm,
                .mm = {.x = xn.dev, .x_dtype = DType::kBF16, .ld_x = hidden, .w = ops::dense_weight(wq.dev, DType::kBF16),
                       .bias = nullptr, .bias_dtype = DType::kBF16, .y = qbuf.dev, .y_dtype = DType::kBF16, .ld_y = q_ld,
                       .m = 1, .n = q_ld, .k = hidden, .accumulate = false}},
        .prologue = {.norm = {.x = kva, .residual = nullptr, .y = kva, .weight = wkvn.dev, .act_dtype = DType::kBF16,
                              .weight_dtype = DType::kBF16, .rows = 1, .dim = rank, .ld_x = q_ld, .ld_res = q_ld,
                              .ld_y = q_ld, .eps = 1e-6f},
                     .rope = {.q = at(qbuf.dev, nope), .k = at(kva, rank), .act_dtype = DType::kBF16,
                              .positions = di(std::vector<int32_t>{ctx - 1}), .inv_freq = di.floats(inv_freq),
                              .n_tokens = 1, .ld_q = q_ld, .ld_k = q_ld, .n_head = H, .n_head_kv = 1, .head_dim = qk,
                              .rotary_dim = rope, .attention_factor = 1.0f, .interleaved = ctx % 2 == 1},
                     .kv = {.cache = kc, .k = kva, .v = kva, .act_dtype = DType::kBF16, .ld_k = q_ld, .ld_v = q_ld,
                            .slot_mapping = di(std::vector<int32_t>{slot}), .n_tokens = 1}},
        .absorb = {.x = qbuf.dev, .x_dtype = DType::kBF16, .ld_x = q_ld, .stride_x = qk, .w = wabs.dev,
                   .w_dtype = DType::kBF16, .stride_w = int64_t{lat} * qk, .y = qcat.dev, .y_dtype = DType::kBF16,
                   .ld_y = cat_ld, .stride_y = lat, .batch = H, .m = 1, .n = lat, .k = qk},
        .attn = {.attn = {.cache = kc, .q = qcat.dev, .out = ocat.dev, .act_dtype = DType::kBF16, .ld_q = cat_ld,
                          .ld_out = cat_ld, .n_seqs = 1, .n_tokens = 1, .q_start = di(std::vector<int32_t>{0, 1}),
                          .ctx_len = di(std::vector<int32_t>{ctx}), .block_tables = di(table),
                          .max_blocks_per_seq = static_cast<int32_t>(table.size()), .max_ctx_len = ctx, .n_head = H,
                          .sliding_window = 0, .scale = 1.0f / std::sqrt(static_cast<float>(qk)), .n_decode_seqs = 1,
                          .decode_max_ctx_len = ctx},
                 .mm = {.x = ocat.dev, .x_dtype = DType::kBF16, .ld_x = cat_ld, .stride_x = lat,
                        .w = at(kvb.dev, int64_t{nope} * rank), .w_dtype = DType::kBF16,
                        .stride_w = int64_t{nope + vdim} * rank, .y = attn.dev, .y_dtype = DType::kBF16, .ld_y = v_w,
                        .stride_y = vdim, .batch = H, .m = 1, .n = vdim, .k = rank}},
        .o = {.x = attn.dev, .x_dtype = DType::kBF16, .ld_x = v_w, .w = ops::dense_weight(wo.dev, DType::kBF16),
              .bias = nullptr, .bias_dtype = DType::kBF16, .y = resid.dev, .y_dtype = DType::kBF16, .ld_y = hidden,
              .m = 1, .n = hidden, .k = v_w, .accumulate = true}};
    const bool was = mla_attention_enabled();
    set_mla_attention_enabled(true);
    const MlaAttentionPlan plan = plan_mla_attention(p, backend()->n_sms(), 200 << 10);
    EXPECT_TRUE(plan.applies) << what;
    // Each run from the same inputs; returns (residual stream, cache).
    auto run_with = [&](const ops::MlaAttentionParams& pp, bool fused, int graph_replays) {
      resid.to_device();
      cache.to_device();
      set_mla_attention_enabled(fused);
      const int64_t before = backend()->fused_mla_attention_calls();
      if (graph_replays > 0) {
        static uint64_t key = 0x3A7A0000;
        ++key;
        EXPECT_TRUE(backend()->capture_graph(key, [&] { return backend()->mla_attention(pp); }).is_ok()) << what;
        for (int r = 0; r < graph_replays; ++r) {
          resid.to_device();
          cache.to_device();
          EXPECT_TRUE(backend()->replay_graph(key).is_ok()) << what;
        }
      } else {
        EXPECT_TRUE(backend()->mla_attention(pp).is_ok()) << what;
      }
      EXPECT_TRUE(backend()->synchronize().is_ok()) << what;
      EXPECT_EQ(backend()->fused_mla_attention_calls() > before, fused) << what;
      std::pair<std::vector<uint8_t>, std::vector<uint8_t>> out;
      resid.from_device(&out.first, what);
      cache.from_device(&out.second, what);
      return out;
    };
    auto run = [&](bool fused, int graph_replays) { return run_with(p, fused, graph_replays); };
    const auto seq = run(false, 0), fused = run(true, 0), again = run(true, 0), graph = run(true, 2);
    // The sequence with the prologue and the absorbed projection in one launch (the Params'
    // promise, which this W_abs keeps): the sequence's bits, eager and from a graph.
    ops::MlaAttentionParams promised = p;
    promised.absorb_rope_identity = true;
    const int64_t pro_abs_before = backend()->fused_mla_prologue_absorb_calls();
    const auto combined = run_with(promised, false, 0), combined_graph = run_with(promised, false, 2);
    EXPECT_EQ(backend()->fused_mla_prologue_absorb_calls(), pro_abs_before + 2) << what << ": not the one launch";
    EXPECT_TRUE(combined == seq) << what << ": the prologue + absorb launch gave other bits than the sequence";
    EXPECT_TRUE(combined_graph == seq) << what << ": its graph replays gave other bits than the sequence";
    set_mla_attention_enabled(was);
    expect_close_host(DType::kBF16, fused.first, seq.first, hidden, 2e-2f, what + " (residual stream)");
    std::vector<bool> row(static_cast<size_t>(n_slots * lat), false);
    for (int i = 0; i < lat; ++i) row[static_cast<size_t>(int64_t{slot} * lat + i)] = true;
    expect_close_host(DType::kBF16, fused.second, seq.second, n_slots * lat, 2e-2f, what + " (this token's cache row)", row);
    int64_t moved = 0;
    for (int64_t i = 0; i < n_slots * lat; ++i)
      if (!row[static_cast<size_t>(i)] && (fused.second[2 * i] != cache.host[2 * i] || fused.second[2 * i + 1] != cache.host[2 * i + 1])) ++moved;
    EXPECT_EQ(moved, 0) << what << ": cache values outside the token's row changed";
    EXPECT_TRUE(fused == again) << what << ": a second launch gave other bits";
    EXPECT_TRUE(fused == graph) << what << ": the graph replays gave other bits";

    // The diagnostic stamps (kernels.h, launch_mla_attention): the stamped instance gives the same
    // bits; one eager launch and two graph replays leave three launches, each block's stamps in
    // order, and no block leaves a barrier before the last block arrives at it.
    const int G = backend()->n_sms();
    ASSERT_TRUE(backend()->set_mla_attention_stamps(4).is_ok()) << what;
    set_mla_attention_enabled(true);
    const auto stamped = run(true, 0), stamped_graph = run(true, 2);
    set_mla_attention_enabled(was);
    EXPECT_TRUE(stamped == fused) << what << ": the stamped kernel gave other bits";
    EXPECT_TRUE(stamped_graph == fused) << what << ": the stamped graph replays gave other bits";
    auto st = backend()->mla_attention_stamps();
    ASSERT_TRUE(st.is_ok()) << what;
    ASSERT_TRUE(backend()->set_mla_attention_stamps(0).is_ok()) << what;
    std::vector<unsigned long long> launches;
    for (int slot = 0; slot < 4; ++slot) {
      const unsigned long long* s0 = st->data() + static_cast<size_t>(slot) * G * kMlaAttnStamps;
      if (s0[0] == 0) continue;  // never written
      launches.push_back(s0[11]);
      for (int b = 0; b < G; ++b) {
        const unsigned long long* sb = s0 + static_cast<size_t>(b) * kMlaAttnStamps;
        EXPECT_EQ(sb[11], s0[11]) << what << " block " << b << ": another launch's stamps in the slot";
        EXPECT_EQ(sb[11] % 4, static_cast<unsigned long long>(slot)) << what << " block " << b;
        for (int i = 1; i <= 10; ++i) EXPECT_LE(sb[i - 1], sb[i]) << what << " block " << b << " stamp " << i;
      }
      for (int k = 0; k < 4; ++k) {
        unsigned long long last_arrival = 0, first_leaving = ~0ull;
        for (int b = 0; b < G; ++b) {
          last_arrival = std::max(last_arrival, s0[static_cast<size_t>(b) * kMlaAttnStamps + 2 + 2 * k]);
          first_leaving = std::min(first_leaving, s0[static_cast<size_t>(b) * kMlaAttnStamps + 3 + 2 * k]);
        }
        EXPECT_LE(last_arrival, first_leaving) << what << ": a block left barrier " << k + 1 << " before the last arrived";
      }
    }
    ASSERT_EQ(launches.size(), 3u) << what;
    std::sort(launches.begin(), launches.end());
    EXPECT_EQ(launches[1], launches[0] + 1) << what;
    EXPECT_EQ(launches[2], launches[0] + 2) << what;
    const MlaAttnStampSummary m = summarize_mla_attention_stamps(st->data(), 4, G);
    EXPECT_EQ(m.launches, 3) << what;
    double steps = 0;
    for (int k = 0; k < 5; ++k) steps += m.step[k] + (k < 4 ? m.barrier[k] : 0.0);
    EXPECT_GT(m.after_wait, 0.0) << what;
    EXPECT_NEAR(steps, m.after_wait, 1e-6 + 0.5 * m.after_wait) << what << ": the steps and barriers make up the time after the wait";
    std::printf("%s: after the wait %.2f us (steps %.2f / %.2f / %.2f / %.2f / %.2f us; timer step %.0f ns)\n", what.c_str(),
                m.after_wait, m.step[0], m.step[1], m.step[2], m.step[3], m.step[4], m.tick_ns);
  }
}

// SwiGLU's gate_up GEMV with silu_mul in its epilogue: the 7B MLP's k (3584) over 2 x 1000 rows
// (an odd number of 8-channel tiles), dense bf16 with a bias at m = 1 and the quantized GEMV's
// formats at m = 1..8. act.out must equal matmul then silu_mul bit for bit (mm.y is scratch: not compared).
TEST(CudaFused, MatmulSiluMulEqualsMatmulThenSiluMul) {
  const int64_t k = 3584, half = 1000, n = 2 * half;
  struct Fmt {
    const char* name;
    ops::WeightFormat f;
  };
  const Fmt fmts[] = {{"bf16", ops::dense_format(DType::kBF16)},
                      {"int4g128", ops::quant_format(ops::WeightScheme::kInt4, k, 128, true, 1)},
                      {"int8", ops::quant_format(ops::WeightScheme::kInt8, k, 0, false, 1)},
                      {"fp8b128", ops::quant_format(ops::WeightScheme::kFp8, k, 128, false, 128)}};
  for (const Fmt& fm : fmts)
    for (int64_t m : {1, 2, 5, 8}) {
      const std::string what = std::string("matmul_silu_mul w=") + fm.name + " m=" + std::to_string(m);
      std::mt19937 rng(static_cast<unsigned>(m * 7));
      const bool dense = fm.f.scheme == ops::WeightScheme::kDense;
      if (dense && m > 1) continue;  // dense m >= 2 may measure cuBLASLt faster (not fused); the harness covers it
      const int64_t row_bytes = dense ? 2 * k : ops::weight_row_bytes(fm.f, k);
      const int64_t n_scales = dense ? 1 : ops::weight_scale_rows(fm.f, n) * ops::weight_groups_k(fm.f, k);
      const int64_t n_zeros = !dense && fm.f.zero == ops::ZeroPoint::kOffset ? n * ops::weight_groups_k(fm.f, k) : 1;
      Tensor w(DType::kU8, n * row_bytes), scales(DType::kF32, n_scales), zeros(DType::kF32, n_zeros);
      Tensor x(DType::kBF16, m * k), bias(DType::kBF16, n), y(DType::kBF16, m * n), out(DType::kBF16, m * half);
      if (dense) {
        for (int64_t i = 0; i < n * k; ++i) ops::ref::store(DType::kBF16, w.host.data(), i, std::uniform_real_distribution<float>(-0.05f, 0.05f)(rng));
      } else {
        for (auto& c : w.host) {
          c = static_cast<uint8_t>(rng());
          if ((c & 0x7f) == 0x7f) c ^= 1;  // no fp8 NaN
        }
      }
      scales.fill_uniform(rng, 0.001f, 0.004f);
      zeros.fill_uniform(rng, -0.01f, 0.01f);
      x.fill_uniform(rng, -1, 1);
      bias.fill_uniform(rng, -1, 1);
      y.fill_nan();
      out.fill_nan();
      ops::WeightView wv = ops::dense_weight(w.dev, DType::kBF16);
      if (!dense) {
        wv.format = fm.f;
        wv.scales = scales.dev;
        wv.zeros = fm.f.zero == ops::ZeroPoint::kOffset ? zeros.dev : nullptr;
      }
      auto* yb = static_cast<uint8_t*>(y.dev);
      const ops::MatmulSiluMulParams p{
          .mm = {.x = x.dev, .x_dtype = DType::kBF16, .ld_x = k, .w = wv, .bias = dense ? bias.dev : nullptr,
                 .bias_dtype = DType::kBF16, .y = y.dev, .y_dtype = DType::kBF16, .ld_y = n, .m = m, .n = n, .k = k,
                 .accumulate = false},
          .act = {.gate = yb, .up = yb + 2 * half, .out = out.dev, .act_dtype = DType::kBF16, .n_tokens = m, .dim = half,
                  .ld_gate = n, .ld_up = n, .ld_out = half}};
      expect_fused_equals_sequence(
          {&w, &scales, &zeros, &x, &bias, &out}, [&] { return backend()->matmul_silu_mul(p); },
          [](bool on) { backend()->set_fuse_silu_mul(on); }, [] { return backend()->fused_silu_mul_calls(); }, what,
          backend()->fuse_silu_mul());
    }
}

// DeepSeekMoE's input norm, router GEMV and routing fused (the cluster kernel, with and without
// the norm inside; the grid kernel whose last block routes) against rms_norm, matmul, moe_route: V2-Lite (64 experts, softmax, greedy top-6 over 2048: the norm inside the
// kernel), V2 (160, group-limited greedy over 5120) and V3 (256, sigmoid with a score bias,
// noaux_tc in 8 groups, over 7168; both wider than the fused norm takes: its own kernel first), at
// 1 token (dense m >= 2 may measure cuBLASLt faster: not fused; the harness covers it). The norm's
// output, logits, choices, weights and the dense weights must be equal bit for bit.
TEST(CudaFused, MoeRouterEqualsNormMatmulRoute) {
  struct Case {
    const char* name;
    int64_t k;
    int32_t n_experts, top_k, n_group, topk_group;
    ops::MoeScoring scoring;
    ops::MoeTopk method;
    bool bias, norm;
    float scale;
  };
  const Case cases[] = {
      {"v2-lite", 2048, 64, 6, 1, 1, ops::MoeScoring::kSoftmax, ops::MoeTopk::kGreedy, false, false, 1.0f},
      {"v2", 5120, 160, 6, 8, 3, ops::MoeScoring::kSoftmax, ops::MoeTopk::kGroupLimitedGreedy, false, false, 16.0f},
      {"v3", 7168, 256, 8, 8, 4, ops::MoeScoring::kSigmoid, ops::MoeTopk::kNoauxTc, true, true, 2.5f}};
  for (const Case& c : cases) {
    const std::string what = std::string("moe_router ") + c.name;
    std::mt19937 rng(static_cast<unsigned>(c.k));
    const int64_t m = 1, E = c.n_experts, K = c.top_k;
    Tensor x(DType::kBF16, m * c.k), xn(DType::kBF16, m * c.k), nw(DType::kBF16, c.k), w(DType::kBF16, E * c.k);
    Tensor bias(DType::kF32, E), logits(DType::kF32, m * E);
    Tensor idx(DType::kI32, m * K), wt(DType::kF32, m * K), dense(DType::kF32, m * E);
    x.fill_uniform(rng, -4, 4);
    nw.fill_uniform(rng, 0.5f, 1.5f);
    xn.fill_nan();
    w.fill_uniform(rng, -0.05f, 0.05f);
    bias.fill_uniform(rng, -0.01f, 0.01f);
    for (Tensor* t : {&logits, &wt, &dense}) t->fill_nan();
    std::fill(idx.host.begin(), idx.host.end(), uint8_t{0xff});
    w.to_device();
    nw.to_device();
    bias.to_device();
    const ops::MoeRouterParams p{
        .norm = {.x = x.dev, .residual = nullptr, .y = xn.dev, .weight = nw.dev, .act_dtype = DType::kBF16,
                 .weight_dtype = DType::kBF16, .rows = m, .dim = c.k, .ld_x = c.k, .ld_res = c.k, .ld_y = c.k, .eps = 1e-6f},
        .mm = {.x = xn.dev, .x_dtype = DType::kBF16, .ld_x = c.k, .w = ops::dense_weight(w.dev, DType::kBF16),
               .bias = nullptr, .bias_dtype = DType::kF32, .y = logits.dev, .y_dtype = DType::kF32, .ld_y = E, .m = m,
               .n = E, .k = c.k, .accumulate = false},
        .route = {.logits = static_cast<const float*>(logits.dev), .ld_logits = E, .bias = c.bias ? bias.dev : nullptr,
                  .bias_dtype = DType::kF32, .n_tokens = m, .n_experts = c.n_experts, .top_k = c.top_k,
                  .n_group = c.n_group, .topk_group = c.topk_group, .scoring = c.scoring, .method = c.method,
                  .norm_topk_prob = c.norm, .routed_scaling_factor = c.scale, .topk_idx = static_cast<int32_t*>(idx.dev),
                  .topk_weight = static_cast<float*>(wt.dev), .dense_weight = static_cast<float*>(dense.dev)}};
    EXPECT_TRUE(moe_router_fusable(p)) << what;
    EXPECT_EQ(moe_router_norm_fusable(p), c.k <= 4096) << what;
    // Mode 1: the cluster kernel (the norm inside where it fits); 2: the cluster kernel after the
    // norm's; 3: the norm's kernel, then the grid kernel whose last block routes (its ticket
    // counter must be back at zero for the second launch, the graph replay).
    const int was = backend()->route_mode();
    for (int mode : {1, 2, 3})
      expect_fused_equals_sequence(
          {&x, &xn, &logits, &idx, &wt, &dense}, [&] { return backend()->moe_router(p); },
          [mode](bool on) { backend()->set_route_mode(on ? mode : 0); }, [] { return backend()->fused_route_calls(); },
          what + " mode " + std::to_string(mode), was != 0);
    backend()->set_route_mode(was);
  }
}

// A block's input norm in its first projection's GEMV at m = 1 against rms_norm then matmul: the
// 7B fused qkv (3584 -> 4608, bias), V2-Lite's fused q / kv_a (2048 -> 3648), a small odd n, and
// a 4096-wide norm (four vectors a thread; 3584: the fourth for half the threads; 136: 17
// vectors, one partial virtual warp).
// norm.y and mm.y must be equal bit for bit.
TEST(CudaFused, RmsNormMatmulEqualsNormThenMatmul) {
  struct Case {
    const char* name;
    int64_t dim, n;
    bool bias;
  };
  const Case cases[] = {{"7b-qkv", 3584, 4608, true}, {"v2-lite-q-kva", 2048, 3648, false}, {"small", 136, 13, false},
                        {"wide", 4096, 1000, false}};
  for (const Case& c : cases) {
    const std::string what = std::string("rms_norm_matmul ") + c.name;
    std::mt19937 rng(static_cast<unsigned>(c.dim + c.n));
    Tensor x(DType::kBF16, c.dim), nw(DType::kBF16, c.dim), xn(DType::kBF16, c.dim), w(DType::kBF16, c.n * c.dim);
    Tensor bias(DType::kBF16, c.n), y(DType::kBF16, c.n);
    x.fill_uniform(rng, -4, 4);
    nw.fill_uniform(rng, 0.5f, 1.5f);
    w.fill_uniform(rng, -0.05f, 0.05f);
    bias.fill_uniform(rng, -1, 1);
    xn.fill_nan();
    y.fill_nan();
    for (Tensor* t : {&nw, &w, &bias}) t->to_device();
    const ops::RmsNormMatmulParams p{
        .norm = {.x = x.dev, .residual = nullptr, .y = xn.dev, .weight = nw.dev, .act_dtype = DType::kBF16,
                 .weight_dtype = DType::kBF16, .rows = 1, .dim = c.dim, .ld_x = c.dim, .ld_res = c.dim, .ld_y = c.dim,
                 .eps = 1e-6f},
        .mm = {.x = xn.dev, .x_dtype = DType::kBF16, .ld_x = c.dim, .w = ops::dense_weight(w.dev, DType::kBF16),
               .bias = c.bias ? bias.dev : nullptr, .bias_dtype = DType::kBF16, .y = y.dev, .y_dtype = DType::kBF16,
               .ld_y = c.n, .m = 1, .n = c.n, .k = c.dim, .accumulate = false}};
    EXPECT_TRUE(rms_norm_gemv_fusable(p)) << what;
    expect_fused_equals_sequence(
        {&x, &xn, &y}, [&] { return backend()->rms_norm_matmul(p); }, [](bool on) { backend()->set_fuse_norm(on); },
        [] { return backend()->fused_norm_calls(); }, what, backend()->fuse_norm());
  }
}

// The split GEMM's epilogues (matmul_rms_norm, matmul_silu_mul over the slab GEMM's k slices: the
// op's kernel adds the f32 partials itself) against the slab GEMM, its reduce kernel, then the
// op's own kernel: int4 g128 with and without zero points and int8 per channel, 9 / 16 / 33
// tokens, the slab's own plan on a long k (the 7B down projection's 18,944: several slices) and
// many thin slices on a short one (set_quant_slab_limits: 8 KB a slice), the 7B o projection's
// 3,584 x 3,584 in 16 KB slices, bias, and the residual add the model makes (accumulate).
TEST(CudaFused, SplitEpiloguesEqualReduceThenOp) {
  const QFormat formats[] = {{"int4 g128", quant::CodeKind::kQ4, 128, 1, false},
                             {"int4 g128 zeros", quant::CodeKind::kQ4, 128, 1, true},
                             {"int8 channel", quant::CodeKind::kQ8, 0, 1, false}};
  struct Shape {
    int64_t n, k;
    int smem_kb;  // set_quant_slab_limits' slice cap (0: the plan's own)
  };
  const Shape shapes[] = {{512, 18944, 0}, {1024, 3584, 8}, {3584, 3584, 16}};
  const bool was = backend()->fuse_split();
  for (const QFormat& f : formats)
    for (const Shape& sh : shapes) {
      std::mt19937 rng(static_cast<unsigned>(sh.n + sh.k + f.offsets));
      const auto dw = device_weight(f, sh.n, sh.k, rng, /*dequantize=*/false);
      ASSERT_TRUE(dw != nullptr);
      set_quant_slab_limits(0, sh.smem_kb);
      for (int64_t m : {9, 16, 33}) {
        const std::string what = std::string(f.name) + " n=" + std::to_string(sh.n) + " k=" + std::to_string(sh.k) +
                                 " m=" + std::to_string(m) + (sh.smem_kb ? " thin slices" : "");
        const int64_t ld_x = sh.k + 8, ld_y = sh.n + 8, half = sh.n / 2;
        Tensor x(DType::kBF16, m * ld_x), bias(DType::kBF16, sh.n), y(DType::kBF16, m * ld_y);
        Tensor yn(DType::kBF16, m * sh.n), nw(DType::kBF16, sh.n), out(DType::kBF16, m * half);
        x.fill_uniform(rng, -1, 1);
        bias.fill_uniform(rng, -1, 1);
        y.fill_uniform(rng, -4, 4);
        nw.fill_uniform(rng, 0.5f, 1.5f);
        std::fill(yn.host.begin(), yn.host.end(), uint8_t{0x11});
        std::fill(out.host.begin(), out.host.end(), uint8_t{0x11});
        x.to_device();
        bias.to_device();
        nw.to_device();
        const ops::MatmulParams mm{.x = x.dev, .x_dtype = DType::kBF16, .ld_x = ld_x, .w = dw->view, .bias = bias.dev,
                                   .bias_dtype = DType::kBF16, .y = y.dev, .y_dtype = DType::kBF16, .ld_y = ld_y, .m = m,
                                   .n = sh.n, .k = sh.k, .accumulate = true};
        EXPECT_GT(quant_gemm_splits(mm, backend()->n_sms()), 1) << what << ": the slab GEMM runs one slice";
        const ops::MatmulRmsNormParams pn{
            .mm = mm,
            .norm = {.x = y.dev, .residual = nullptr, .y = yn.dev, .weight = nw.dev, .act_dtype = DType::kBF16,
                     .weight_dtype = DType::kBF16, .rows = m, .dim = sh.n, .ld_x = ld_y, .ld_res = sh.n, .ld_y = sh.n,
                     .eps = 1e-6f}};
        expect_fused_equals_sequence(
            {&y, &yn}, [&] { return backend()->matmul_rms_norm(pn); }, [](bool on) { backend()->set_fuse_split(on); },
            [] { return backend()->fused_split_calls(); }, "matmul_rms_norm " + what, was);
        // gate_up's shape: [gate | up] halves of y, no accumulate; y itself is not compared (the
        // fused op leaves it unwritten).
        ops::MatmulSiluMulParams ps{
            .mm = mm,
            .act = {.gate = y.dev, .up = static_cast<uint8_t*>(y.dev) + 2 * half, .out = out.dev, .act_dtype = DType::kBF16,
                    .n_tokens = m, .dim = half, .ld_gate = ld_y, .ld_up = ld_y, .ld_out = half}};
        ps.mm.accumulate = false;
        const bool silu_was = backend()->fuse_silu_mul();
        backend()->set_fuse_silu_mul(false);  // the GEMV epilogue (m <= 8) is not this path
        expect_fused_equals_sequence(
            {&out}, [&] { return backend()->matmul_silu_mul(ps); }, [](bool on) { backend()->set_fuse_split(on); },
            [] { return backend()->fused_split_calls(); }, "matmul_silu_mul " + what, was);
        backend()->set_fuse_silu_mul(silu_was);
      }
      set_quant_slab_limits(0, 0);
    }
  // The qkv projection's epilogue: 7B's heads (28 q, 4 kv of 128; [q | k | v] = 4,608 rows over
  // 3,584), bf16 and int8 caches, a padding token; the q rows of y (rotated) and the caches.
  const int n_head = 28, n_kv = 4, hd = 128, bs = 16, n_blocks = 80;
  const int64_t q_dim = int64_t{n_head} * hd, kv_dim = int64_t{n_kv} * hd, width = q_dim + 2 * kv_dim, hidden = 3584;
  const int64_t n_slots = int64_t{n_blocks} * bs;
  for (const QFormat& f : formats) {
    std::mt19937 rng(static_cast<unsigned>(7 + f.offsets));
    const auto dw = device_weight(f, width, hidden, rng, /*dequantize=*/false);
    ASSERT_TRUE(dw != nullptr);
    for (DType cache_t : {DType::kBF16, DType::kI8})
      for (int64_t m : {9, 16, 33}) {
        const std::string what = std::string("matmul_rope_kv_write ") + f.name + " cache=" + dtype_name(cache_t) +
                                 " m=" + std::to_string(m);
        Tensor x(DType::kBF16, m * hidden), bias(DType::kBF16, width), y(DType::kBF16, m * width);
        Tensor kc(cache_t, n_slots * kv_dim), vc(cache_t, n_slots * kv_dim), ks(DType::kF32, n_slots * n_kv),
            vs(DType::kF32, n_slots * n_kv);
        x.fill_uniform(rng, -1, 1);
        bias.fill_uniform(rng, -1, 1);
        std::fill(y.host.begin(), y.host.end(), uint8_t{0x11});
        for (Tensor* t : {&kc, &vc, &ks, &vs}) std::fill(t->host.begin(), t->host.end(), uint8_t{0x11});
        x.to_device();
        bias.to_device();
        std::vector<int32_t> pos, slots;
        for (int64_t t = 0; t < m; ++t) {
          pos.push_back(static_cast<int32_t>(300 + 97 * t));
          slots.push_back(t == 1 ? -1 : static_cast<int32_t>((37 * t + 5) % n_slots));
        }
        std::vector<float> inv(static_cast<size_t>(hd / 2));
        for (int i = 0; i < hd / 2; ++i) inv[static_cast<size_t>(i)] = std::pow(1e6f, -2.f * i / hd);
        DevInts di;
        auto* yq = static_cast<uint8_t*>(y.dev);
        const bool int8 = cache_t == DType::kI8;
        const ops::MatmulRopeKvWriteParams p{
            .mm = {.x = x.dev, .x_dtype = DType::kBF16, .ld_x = hidden, .w = dw->view, .bias = bias.dev,
                   .bias_dtype = DType::kBF16, .y = y.dev, .y_dtype = DType::kBF16, .ld_y = width, .m = m, .n = width,
                   .k = hidden, .accumulate = false},
            .rkv = {.rope = {.q = yq, .k = yq + 2 * q_dim, .act_dtype = DType::kBF16, .positions = di(pos),
                             .inv_freq = di.floats(inv), .n_tokens = m, .ld_q = width, .ld_k = width, .n_head = n_head,
                             .n_head_kv = n_kv, .head_dim = hd, .rotary_dim = hd, .attention_factor = 1.f},
                    .kv = {.cache = {.k_cache = kc.dev, .v_cache = vc.dev, .cache_dtype = cache_t, .n_blocks = n_blocks,
                                     .block_size = bs, .n_head_kv = n_kv, .head_dim = hd,
                                     .k_scales = int8 ? static_cast<float*>(ks.dev) : nullptr,
                                     .v_scales = int8 ? static_cast<float*>(vs.dev) : nullptr},
                           .k = yq + 2 * q_dim, .v = yq + 2 * (q_dim + kv_dim), .act_dtype = DType::kBF16, .ld_k = width,
                           .ld_v = width, .slot_mapping = di(slots), .n_tokens = m}}};
        EXPECT_GT(quant_gemm_splits(p.mm, backend()->n_sms()), 1) << what << ": the slab GEMM runs one slice";
        // y's k and v rows are scratch for the fused op: the op is followed by a copy of q's
        // columns (the rows attention reads), which is compared with the caches.
        Tensor yq_only(DType::kBF16, m * q_dim);
        expect_fused_equals_sequence(
            {&kc, &vc, &ks, &vs, &yq_only},
            [&] {
              FRUGAL_RETURN_IF_ERROR(backend()->matmul_rope_kv_write(p));
              const cudaError_t e = cudaMemcpy2DAsync(yq_only.dev, static_cast<size_t>(q_dim * 2), y.dev,
                                                      static_cast<size_t>(width * 2), static_cast<size_t>(q_dim * 2),
                                                      static_cast<size_t>(m), cudaMemcpyDeviceToDevice, backend()->stream());
              return e == cudaSuccess ? Status::ok() : internal_error("copy q rows: " + std::string(cudaGetErrorString(e)));
            },
            [](bool on) { backend()->set_fuse_split(on); }, [] { return backend()->fused_split_calls(); }, what, was);
      }
  }
}

}  // namespace
}  // namespace frugal::cuda::testing
