// Attention over the paged KV cache: several sequences per call mixing decode, fresh prefill and
// prefill after a cached prefix, and a step of decodes alone; block tables scattered over the cache; GQA groups 1, 2 and 7;
// head_dim 64 and 128; sliding window on and off; f32, bf16, fp8 e4m3 and int8 caches (the
// quantized ones hold random codes and scales; both sides read the same dequantized cache). Cache slots no sequence
// owns hold NaN, so a kernel that reads past a context (or through an unused table entry) fails.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "harness.h"
#include "ops/reference.h"

namespace frugal::testing {

int g_op_harness_attention_anchor = 0;

namespace {

struct SeqSpec {
  int32_t n_q;  // new tokens this step
  int32_t ctx;  // tokens in the cache after this step
};

struct AttnCase {
  std::vector<SeqSpec> seqs;
  int32_t n_head, n_head_kv, head_dim, block_size, window;
  int32_t sinks;  // attention sinks (with window > 0)
  DType cache_dtype;
  int64_t gap;  // extra elements per q/out row
  bool shared_kv = false;   // MLA's latent cache: one buffer is both K and V
  int32_t n_decode = 0;     // AttentionParams::n_decode_seqs (leading one-token sequences)
  // > 0: attention_batched_matmul, each head's output row (its first uv_k values) times its own
  // [uv_n, uv_k] matrix (MLA's W_UV), checked on the matmul's result.
  int32_t uv_n = 0, uv_k = 0;

  std::string describe() const {
    std::string s = "attention seqs=";
    for (const auto& q : seqs) s += "(" + std::to_string(q.n_q) + "/" + std::to_string(q.ctx) + ")";
    return s + " heads=" + std::to_string(n_head) + "/" + std::to_string(n_head_kv) + " head_dim=" +
           std::to_string(head_dim) + " block=" + std::to_string(block_size) + " window=" + std::to_string(window) + " sinks=" + std::to_string(sinks) +
           " cache=" + dtype_name(cache_dtype) + " gap=" + std::to_string(gap) + (shared_kv ? " shared_kv" : "") +
           " n_decode=" + std::to_string(n_decode) +
           (uv_n > 0 ? " then per head " + std::to_string(uv_n) + "x" + std::to_string(uv_k) : "");
  }
};

}  // namespace

class AttentionRunner {
 public:
  AttentionRunner(OpCases* h, ops::Backend* backend, DType act, double tol, std::mt19937* rng)
      : h_(h), backend_(backend), act_(act), tol_(tol), rng_(rng) {}

  // Returns false when the backend did not run the case (see OpCases::ran).
  bool run(const AttnCase& c);

 private:
  OpCases* h_;
  ops::Backend* backend_;
  DType act_;
  double tol_;
  std::mt19937* rng_;
};

bool AttentionRunner::run(const AttnCase& c) {
  const std::string what = c.describe();
  const int32_t n_seqs = static_cast<int32_t>(c.seqs.size());
  // Block tables: every sequence's blocks drawn from a shuffled pool, plus spare blocks nobody uses.
  int32_t max_blocks = 0, needed = 0;
  for (const auto& s : c.seqs) {
    const int32_t nb = (s.ctx + c.block_size - 1) / c.block_size;
    max_blocks = std::max(max_blocks, nb);
    needed += nb;
  }
  max_blocks += 1;  // one unused (-1) entry per row
  const int32_t n_blocks = needed + 3;
  std::vector<int32_t> pool(static_cast<size_t>(n_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), *rng_);
  std::vector<int32_t> tables(static_cast<size_t>(n_seqs) * max_blocks, -1), q_start{0}, ctx_len;
  const int64_t kv_row = int64_t{c.n_head_kv} * c.head_dim;
  HostMat kc(c.cache_dtype, int64_t{n_blocks} * c.block_size, kv_row, kv_row), vc = kc;
  const bool int8 = c.cache_dtype == DType::kI8, fp8 = c.cache_dtype == DType::kF8E4M3;
  kc.fill_random(*rng_, int8 ? 127.0f : 1.0f);
  vc.fill_random(*rng_, int8 ? 127.0f : 1.0f);
  // int8: per (slot, kv head) scales around 1/127, so values stay in [-1, 1]; unused slots' are NaN.
  HostMat ks(DType::kF32, kc.rows, c.n_head_kv, c.n_head_kv), vs = ks;
  for (int64_t r = 0; r < ks.rows; ++r)
    for (int64_t h = 0; h < c.n_head_kv; ++h) {
      std::uniform_real_distribution<float> dist(0.5f / 127, 1.5f / 127);
      ks.set(r, h, dist(*rng_)), vs.set(r, h, dist(*rng_));
    }
  std::vector<bool> owned(static_cast<size_t>(kc.rows), false);
  size_t next = 0;
  for (int32_t s = 0; s < n_seqs; ++s) {
    const auto& sp = c.seqs[static_cast<size_t>(s)];
    for (int32_t j = 0; j < sp.ctx; ++j) {
      if (j % c.block_size == 0) tables[static_cast<size_t>(s * max_blocks + j / c.block_size)] = pool[next++];
      owned[static_cast<size_t>(tables[static_cast<size_t>(s * max_blocks + j / c.block_size)] * c.block_size +
                                j % c.block_size)] = true;
    }
    q_start.push_back(q_start.back() + sp.n_q);
    ctx_len.push_back(sp.ctx);
  }
  for (int64_t slot = 0; slot < kc.rows; ++slot)
    if (!owned[static_cast<size_t>(slot)])
      for (int64_t e = 0; e < kv_row; ++e) kc.set(slot, e, NAN), vc.set(slot, e, NAN);
  for (int64_t slot = 0; slot < kc.rows; ++slot)
    if (!owned[static_cast<size_t>(slot)])
      for (int64_t h = 0; h < c.n_head_kv; ++h) ks.set(slot, h, NAN), vs.set(slot, h, NAN);
  const int32_t n_tokens = q_start.back();
  const int64_t width = int64_t{c.n_head} * c.head_dim;
  HostMat q(act_, n_tokens, width, width + c.gap), out0(act_, n_tokens, width, width + c.gap);
  q.fill_random(*rng_, 2.0f);  // scores of a few units: peaked but not one-hot softmax
  out0.fill_random(*rng_, 1.0f);

  auto dq = h_->upload(q.data(), q.bytes.size()), dout = h_->upload(out0.data(), out0.bytes.size());
  auto dkc = h_->upload(kc.data(), kc.bytes.size()), dvc = h_->upload(vc.data(), vc.bytes.size());
  auto dqs = h_->upload(q_start.data(), q_start.size() * 4), dctx = h_->upload(ctx_len.data(), ctx_len.size() * 4);
  auto dtab = h_->upload(tables.data(), tables.size() * 4);
  auto dks = h_->upload(ks.data(), ks.bytes.size()), dvs = h_->upload(vs.data(), vs.bytes.size());
  ops::AttentionParams p{
      .cache = {.k_cache = dkc->ptr(), .v_cache = dvc->ptr(), .cache_dtype = c.cache_dtype, .n_blocks = n_blocks,
                .block_size = c.block_size, .n_head_kv = c.n_head_kv, .head_dim = c.head_dim,
                .k_scales = int8 ? static_cast<float*>(dks->ptr()) : nullptr,
                .v_scales = int8 ? static_cast<float*>(dvs->ptr()) : nullptr,
                .k_scale = fp8 ? 0.75f : 1.0f, .v_scale = fp8 ? 1.25f : 1.0f},
      .q = dq->ptr(), .out = dout->ptr(), .act_dtype = act_, .ld_q = q.ld, .ld_out = out0.ld, .n_seqs = n_seqs,
      .n_tokens = n_tokens, .q_start = static_cast<const int32_t*>(dqs->ptr()),
      .ctx_len = static_cast<const int32_t*>(dctx->ptr()), .block_tables = static_cast<const int32_t*>(dtab->ptr()),
      .max_blocks_per_seq = max_blocks,
      .max_ctx_len = *std::max_element(ctx_len.begin(), ctx_len.end()), .n_head = c.n_head,
      .sliding_window = c.window, .scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
      .sink_tokens = c.sinks};
  if (c.shared_kv) p.cache.v_cache = p.cache.k_cache;
  if (c.n_decode > 0) {
    p.n_decode_seqs = c.n_decode;
    for (int32_t s = 0; s < c.n_decode; ++s) p.decode_max_ctx_len = std::max(p.decode_max_ctx_len, ctx_len[static_cast<size_t>(s)]);
  }
  // The same Params on the host copies, for the reference.
  auto on_host = [&](ops::AttentionParams r, void* out) {
    r.cache.k_cache = kc.data(), r.cache.v_cache = c.shared_kv ? kc.data() : vc.data(), r.q = q.data(), r.out = out;
    if (int8) r.cache.k_scales = static_cast<float*>(ks.data()), r.cache.v_scales = static_cast<float*>(vs.data());
    r.q_start = q_start.data(), r.ctx_len = ctx_len.data(), r.block_tables = tables.data();
    return r;
  };
  if (c.uv_n > 0) {
    // W_UV-like weights: head b's [uv_n, uv_k] rows start 2 rows into a (uv_n + 2)-row block (the
    // kv_b layout's nope rows before them); y rows have a gap like out's.
    const int64_t stride_w = int64_t{c.uv_n + 2} * c.uv_k, y_w = int64_t{c.n_head} * c.uv_n;
    HostMat w(act_, c.n_head, stride_w, stride_w), y0(act_, n_tokens, y_w, y_w + c.gap);
    w.fill_random(*rng_, 1.0f);
    y0.fill_random(*rng_, 1.0f);
    auto dw = h_->upload(w.data(), w.bytes.size()), dy = h_->upload(y0.data(), y0.bytes.size());
    const int64_t w_off = 2 * int64_t{c.uv_k};
    ops::AttentionBatchedMatmulParams f{
        .attn = p,
        .mm = {.x = p.out, .x_dtype = act_, .ld_x = p.ld_out, .stride_x = c.head_dim,
               .w = static_cast<const uint8_t*>(dw->ptr()) + dtype_bytes(act_, w_off), .w_dtype = act_,
               .stride_w = stride_w, .y = dy->ptr(), .y_dtype = act_, .ld_y = y0.ld, .stride_y = c.uv_n,
               .batch = c.n_head, .m = n_tokens, .n = c.uv_n, .k = c.uv_k}};
    if (!h_->ran(backend_->attention_batched_matmul(f), ops::OpKind::kAttentionBatchedMatmul,
                 std::string("cache=") + dtype_name(c.cache_dtype), what))
      return false;
    HostMat got = y0, want = y0, want_out = out0;
    got.bytes = dy->download();
    f.attn = on_host(f.attn, want_out.data());
    f.mm.x = want_out.data(), f.mm.w = static_cast<const uint8_t*>(w.data()) + dtype_bytes(act_, w_off), f.mm.y = want.data();
    ops::ref::attention_batched_matmul(f);
    EXPECT_TRUE(compare_mats(got, want, y0, tol_, what));
    for (auto* b : {dq.get(), dout.get(), dkc.get(), dvc.get(), dqs.get(), dctx.get(), dtab.get(), dks.get(), dvs.get(),
                    dw.get(), dy.get()})
      EXPECT_TRUE(b->check_guards(what));
    return true;
  }
  if (!h_->ran(backend_->attention(p), ops::OpKind::kAttention,
               std::string("cache=") + dtype_name(c.cache_dtype) + (c.sinks > 0 ? " sinks" : ""), what))
    return false;
  HostMat got = out0, want = out0;
  got.bytes = dout->download();
  ops::ref::attention(on_host(p, want.data()));
  EXPECT_TRUE(compare_mats(got, want, out0, tol_, what));
  for (auto* b : {dq.get(), dout.get(), dkc.get(), dvc.get(), dqs.get(), dctx.get(), dtab.get(), dks.get(), dvs.get()})
    EXPECT_TRUE(b->check_guards(what));
  return true;
}

void OpCases::attention() {
  const std::vector<std::vector<SeqSpec>> batches = {
      {{1, 1}, {1, 37}, {5, 5}, {7, 40}, {3, 70}},  // decode, fresh prefill, prefill after a prefix
      {{33, 33}},                                   // one long prefill: many query tiles
      {{1, 300}, {2, 129}},                         // long decodes: many key chunks
      {{1, 1}, {1, 17}, {1, 100}, {1, 1030}},       // decodes alone (CUDA: the decode kernels), split
  };
  int variant = 0;
  for (int32_t group : {1, 2, 7})
    for (int32_t head_dim : {64, 128})
      for (int32_t window : {0, 8})
        for (DType cache_t : {DType::kF32, DType::kBF16, DType::kF8E4M3, DType::kI8})
          for (const auto& seqs : batches) {
            const AttnCase c{.seqs = seqs, .n_head = 2 * group, .n_head_kv = 2, .head_dim = head_dim,
                             .block_size = variant % 3 == 1 ? 5 : 16, .window = window,
                             .sinks = window > 0 && variant % 4 < 2 ? (variant % 4 == 0 ? 3 : 40) : 0,
                             .cache_dtype = cache_t,
                             .gap = variant++ % 2 ? 8 : 0};
            AttentionRunner runner(this, backend(), act(), act_tol(), &rng_);
            runner.run(c);
          }
  // MLA's latent cache (DeepSeek): one KV head that is both K and V, 576 wide (kv_lora_rank 512
  // + rope 64) and an odd 136; 3 and 17 query heads (a partial group of 16); decodes alone
  // (CUDA's MLA kernel, split over the context for the long ones), a mixed step (two leading
  // decodes, then prefill chunks: every token causal over its own prefix in the same kernel),
  // and prefill chunks alone (a whole prompt, a chunk after a cached prefix, a 1-token chunk).
  const std::vector<std::pair<std::vector<SeqSpec>, int32_t>> mla_batches = {
      {{{1, 1}, {1, 37}, {1, 300}}, 0},
      {{{1, 37}, {1, 300}, {5, 5}, {7, 40}}, 2},
      {{{70, 70}, {33, 120}, {1, 9}}, 0},
  };
  for (int32_t head_dim : {576, 136})
    for (int32_t n_head : {3, 17})
      for (DType cache_t : {DType::kF32, DType::kBF16})
        for (const auto& [seqs, n_decode] : mla_batches) {
          const AttnCase c{.seqs = seqs, .n_head = n_head, .n_head_kv = 1, .head_dim = head_dim,
                           .block_size = variant % 3 == 1 ? 5 : 16, .window = 0, .sinks = 0, .cache_dtype = cache_t,
                           .gap = variant++ % 2 ? 8 : 0, .shared_kv = true, .n_decode = n_decode};
          AttentionRunner runner(this, backend(), act(), act_tol(), &rng_);
          runner.run(c);
        }
}

// attention then a per-head matmul of its output (MLA's W_UV): the latent cache's shapes (576 wide,
// W_UV on its first 512; an odd 136 on 128), 16 heads (V2-Lite) and a partial group of 17,
// decodes alone short and long (CUDA: the MLA kernel split over the context, its splits merged
// straight into the matmul), a mixed step and prefill chunks (the sequence); and a GQA cache
// (the sequence everywhere).
void OpCases::attention_batched_matmul() {
  const std::vector<std::pair<std::vector<SeqSpec>, int32_t>> batches = {
      {{{1, 300}}, 1},                          // one decode, long: many splits
      {{{1, 37}, {1, 300}, {1, 1}}, 3},         // decodes alone
      {{{1, 37}, {1, 300}, {5, 5}, {7, 40}}, 2},  // a mixed step
  };
  int variant = 0;
  for (int32_t head_dim : {576, 136})
    for (int32_t n_head : {16, 17})
      for (DType cache_t : {DType::kF32, DType::kBF16})
        for (const auto& [seqs, n_decode] : batches) {
          const int32_t uv_k = head_dim == 576 ? 512 : 128, uv_n = head_dim == 576 ? 128 : 32;
          const AttnCase c{.seqs = seqs, .n_head = n_head, .n_head_kv = 1, .head_dim = head_dim,
                           .block_size = variant % 3 == 1 ? 5 : 16, .window = 0, .sinks = 0, .cache_dtype = cache_t,
                           .gap = variant++ % 2 ? 8 : 0, .shared_kv = true, .n_decode = n_decode, .uv_n = uv_n,
                           .uv_k = uv_k};
          AttentionRunner runner(this, backend(), act(), act_tol(), &rng_);
          runner.run(c);
        }
  const AttnCase gqa{.seqs = {{1, 40}, {3, 9}}, .n_head = 4, .n_head_kv = 2, .head_dim = 64, .block_size = 16,
                     .window = 0, .sinks = 0, .cache_dtype = DType::kBF16, .gap = 0, .uv_n = 16, .uv_k = 64};
  AttentionRunner runner(this, backend(), act(), act_tol(), &rng_);
  runner.run(gqa);
}

}  // namespace frugal::testing
