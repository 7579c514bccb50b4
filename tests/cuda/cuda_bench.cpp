// cuda_kernel_bench: what the CUDA backend's kernels achieve on this GPU against its measured
// ceilings. Measures device time only (CUDA events), excluding host launch gaps where kernels
// run back to back. Weights rotate through enough copies to defeat the L2 cache, as the layers
// of a real model do. Usage: cuda_kernel_bench [--quick | --mixed (the mixed-step part only) |
// --quant (the quantized GEMV / GEMM part only) | --decode-attn (decode attention: tensor-core
// against CUDA-core kernel) | --attn (the paged attention rows: decode, prefill per kernel) |
// --decode-splits (decode attention's split count against the batch) | --gemv (the dense GEMV
// rows, with the split-k / early-load A/B "gemv-ab") | --moe (the routed
// experts at DeepSeek-V2-Lite's shape: mma.sync against WMMA)]
#include "cuda_bench.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>

#include "backend/cuda/gemm_lt.h"
#include "backend/cuda/kernels.h"

namespace frugal::cuda::bench {

void* random_buffer(CudaBackend* b, DType t, int64_t n, uint64_t seed, float lo, float hi) {
  void* p = b->alloc(static_cast<size_t>(dtype_bytes(t, n))).value();
  if (launch_fill_uniform(p, t, n, seed, lo, hi, b->stream()) != cudaSuccess) std::abort();
  return p;
}

namespace {

double measure_copy_ceiling(CudaBackend* b, Table* table) {
  const size_t bytes = size_t{1} << 30;
  void* src = random_buffer(b, DType::kBF16, static_cast<int64_t>(bytes / 2), 1);
  void* dst = b->alloc(bytes).value();
  Timing t = time_op(b->stream(), 20, 5, [&](int) { cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, b->stream()); });
  const double gbs = 2.0 * bytes / (t.median_us * 1e3);  // read + written
  table->add({"ceiling: d2d copy 1 GiB (read+write)", t, gbs, "GB/s", -1});
  b->free(src);
  b->free(dst);
  return gbs;
}

struct Shape {
  const char* name;
  int64_t n, k;
};
constexpr Shape kShapes[] = {{"qkv 4608x3584", 4608, 3584},     {"o 3584x3584", 3584, 3584},
                             {"gate_up 37888x3584", 37888, 3584}, {"down 3584x18944", 3584, 18944},
                             {"lm_head 152064x3584", 152064, 3584}};
// DeepSeek-V2-Lite's attention projections at decode (MLA, q_lora_rank 0): q | kv_a and o (the
// GEMV benchmark only).
constexpr Shape kV2LiteShapes[] = {{"v2-lite q|kv_a 3648x2048", 3648, 2048}, {"v2-lite o 2048x2048", 2048, 2048}};

// The dense GEMV's A/B (launch_gemv directly: the backend may take cuBLASLt at m >= 2): today's
// default against the unsplit kernel without early weight loads ("old", FRUGAL_GEMV_SPLITK=0
// FRUGAL_GEMV_EARLY=0), and at m = 1 the default without early loads and each split forced. Back
// to back, each launch's early loads overlap the previous GEMV's tail (in a decode step: the
// rms_norm or attention before qkv / o).
void bench_gemv_ab(CudaBackend* b, const Shape& s, ops::MatmulParams p, const std::vector<void*>& ws, double bytes,
                   double ceiling, Table* table) {
  struct Variant {
    std::string name;
    int split, early;
  };
  const Variant variants[] = {{"old", 1, 0},
                              {"new (split " + std::to_string(gemv_split_k(s.n, s.k)) + ")", -1, -1},
                              {"new, no early loads", -1, 0},
                              {"new, early loads on qkv / o only", -1, 1},
                              {"split 2", 2, -1},
                              {"split 4", 4, -1}};
  for (const Variant& v : variants) {
    if (p.m != 1 && (v.split >= 2 || v.early == 0 || v.early == 1)) continue;
    set_gemv_tuning(v.split, v.early);
    Timing t = time_op(b->stream(), 30, 10, [&](int i) {
      p.w.data = ws[static_cast<size_t>(i) % ws.size()];
      (void)launch_gemv(p, b->stream());
    });
    const double gbs = bytes / (t.median_us * 1e3);
    table->add({"gemv-ab m=" + std::to_string(p.m) + " " + s.name + " " + v.name, t, gbs, "GB/s", 100 * gbs / ceiling});
  }
  set_gemv_tuning(-1, -1);
}

// MLA's two absorbed per-head projections at DeepSeek-V2-Lite's decode shapes (16 heads; the
// batched GEMV, mla.cu): q -> [q_abs | q_pe] against W_abs [16, 576, 192] (3.5 MB) and the latent
// output -> v against W_UV (16 heads of [128, 512] rows inside kv_b, 2 MB), in the default
// variant and the one-row-a-warp one (FRUGAL_BATCHED_GEMV=orig); weights rotate through 256 MB
// of copies (HBM, not L2). GB/s of weight read.
void bench_mla_gemv(CudaBackend* b, double ceiling, Table* table) {
  constexpr int64_t kH = 16, kLat = 576, kQk = 192, kNope = 128, kV = 128, kRank = 512;
  struct Proj {
    const char* name;
    int64_t n, k, w_elems, stride_w, w_skip, ld_x, stride_x, ld_y, stride_y;
  };
  const Proj projs[] = {
      {"W_abs (16 x 576 x 192)", kLat, kQk, kH * kLat * kQk, kLat * kQk, 0, kH * kQk, kQk, kH * kLat, kLat},
      {"W_UV (16 x 128 x 512 in kv_b)", kV, kRank, kH * (kNope + kV) * kRank, (kNope + kV) * kRank, kNope * kRank,
       kH * kLat, kLat, kH * kV, kV}};
  const int mode_was = batched_gemv_mode();
  for (const Proj& pr : projs) {
    const int copies = static_cast<int>(std::max<int64_t>(1, (int64_t{256} << 20) / (pr.w_elems * 2)));
    std::vector<void*> ws;
    for (int c = 0; c < copies; ++c) ws.push_back(random_buffer(b, DType::kBF16, pr.w_elems, 300 + c));
    void* x = random_buffer(b, DType::kBF16, 16 * pr.ld_x, 9);
    void* y = b->alloc(static_cast<size_t>(16 * pr.ld_y * 2)).value();
    for (int64_t m : {1, 4, 16})
      for (int mode : {1, 0}) {
        set_batched_gemv_mode(mode);
        ops::BatchedMatmulParams p{.x = x, .x_dtype = DType::kBF16, .ld_x = pr.ld_x, .stride_x = pr.stride_x,
                                   .w = ws[0], .w_dtype = DType::kBF16, .stride_w = pr.stride_w, .y = y,
                                   .y_dtype = DType::kBF16, .ld_y = pr.ld_y, .stride_y = pr.stride_y, .batch = kH,
                                   .m = m, .n = pr.n, .k = pr.k};
        Timing t = time_op(b->stream(), 30, 10, [&](int i) {
          p.w = static_cast<const uint8_t*>(ws[static_cast<size_t>(i % copies)]) + 2 * pr.w_skip;
          (void)launch_batched_gemv(p, b->stream());
        });
        const double gbs = 2.0 * kH * pr.n * pr.k / (t.median_us * 1e3);
        table->add({std::string("mla batched gemv m=") + std::to_string(m) + " " + pr.name +
                        (mode == 0 ? " one row a warp" : " default"),
                    t, gbs, "GB/s", 100 * gbs / ceiling});
      }
    for (void* w : ws) b->free(w);
    b->free(x);
    b->free(y);
  }
  set_batched_gemv_mode(mode_was);
}

// The dense GEMV on one shape at m = 1, 2, 4, 8 (m = 1 only when quick): the backend's matmul,
// its A/B variants at m = 1 and 4, the silu epilogue on gate_up, and cuBLASLt at m = 1; weights
// rotate through 512 MB of copies (HBM, not L2). GB/s of everything read and written.
void bench_gemv_shape(CudaBackend* b, LtGemm* lt, double ceiling, Table* table, bool quick, const Shape& s) {
  const int64_t w_elems = s.n * s.k;
  const int copies = static_cast<int>(std::max<int64_t>(1, (int64_t{512} << 20) / (w_elems * 2)));
  std::vector<void*> ws;
  for (int c = 0; c < copies; ++c) ws.push_back(random_buffer(b, DType::kBF16, w_elems, 100 + c));
  void* x = random_buffer(b, DType::kBF16, 8 * s.k, 7);
  void* y = b->alloc(static_cast<size_t>(8 * s.n * 2)).value();
  for (int64_t m : {1, 2, 4, 8}) {
    if (quick && m != 1) continue;
    ops::MatmulParams p{x, DType::kBF16, s.k, ops::dense_weight(ws[0], DType::kBF16), nullptr, DType::kBF16, y, DType::kBF16, s.n, m, s.n, s.k, false};
    Timing t = time_op(b->stream(), 30, 10, [&](int i) {
      p.w.data = ws[static_cast<size_t>(i % copies)];
      (void)b->matmul(p);
    });
    const double bytes = 2.0 * (w_elems + m * s.k + m * s.n);
    const double gbs = bytes / (t.median_us * 1e3);
    table->add({std::string("gemv m=") + std::to_string(m) + " " + s.name, t, gbs, "GB/s", 100 * gbs / ceiling});
    if (m == 1 || m == 4) bench_gemv_ab(b, s, p, ws, bytes, ceiling, table);
    if (s.n == 37888) {  // SwiGLU's gate_up with the silu epilogue (matmul_silu_mul): against the row above
      const SiluMulOut silu{.out = y, .ld_out = s.n / 2};
      Timing ts = time_op(b->stream(), 30, 10, [&](int i) {
        p.w.data = ws[static_cast<size_t>(i % copies)];
        (void)launch_gemv(p, b->stream(), &silu);
      });
      const double gs = (bytes - m * s.n) / (ts.median_us * 1e3);  // half the outputs
      table->add({std::string("gemv m=") + std::to_string(m) + " " + s.name + " +silu epilogue", ts, gs, "GB/s",
                  100 * gs / ceiling});
    }
    if (m == 1) {  // the same product through cuBLASLt, for comparison
      Timing tl = time_op(b->stream(), 30, 10, [&](int i) {
        p.w.data = ws[static_cast<size_t>(i % copies)];
        (void)lt->run(p, b->stream());
      });
      const double gl = bytes / (tl.median_us * 1e3);
      table->add({std::string("cublasLt m=1 ") + s.name, tl, gl, "GB/s", 100 * gl / ceiling});
    }
  }
  for (void* w : ws) b->free(w);
  b->free(x);
  b->free(y);
}

void bench_gemv(CudaBackend* b, LtGemm* lt, double ceiling, Table* table, bool quick) {
  bench_mla_gemv(b, ceiling, table);
  for (const Shape& s : kShapes) bench_gemv_shape(b, lt, ceiling, table, quick, s);
  for (const Shape& s : kV2LiteShapes) bench_gemv_shape(b, lt, ceiling, table, quick, s);
}

void bench_gemm(CudaBackend* b, Table* table) {
  const int64_t m = 2048;
  for (const Shape& s : kShapes) {
    if (s.n > 100000) continue;  // lm_head runs on the last token only
    void* w = random_buffer(b, DType::kBF16, s.n * s.k, 3);
    void* x = random_buffer(b, DType::kBF16, m * s.k, 4);
    void* y = b->alloc(static_cast<size_t>(m * s.n * 2)).value();
    ops::MatmulParams p{x, DType::kBF16, s.k, ops::dense_weight(w, DType::kBF16), nullptr, DType::kBF16, y, DType::kBF16, s.n, m, s.n, s.k, false};
    Timing t = time_op(b->stream(), 20, 5, [&](int) { (void)b->matmul(p); });
    const double tflops = 2.0 * m * s.n * s.k / (t.median_us * 1e6);
    table->add({std::string("gemm m=2048 ") + s.name, t, tflops, "TFLOP/s", 100 * tflops / 790.0});
    b->free(w);
    b->free(x);
    b->free(y);
  }
}

// Attention heads of a paged-cache row: 7B (4 kv heads x 128, 28 query heads), or
// DeepSeek-V2-Lite's MLA (one latent kv head 576 wide that is both K and V, 16 query heads).
struct AttnShape {
  int n_kv = 4, hd = 128, n_head = 28;
  bool shared_kv = false;
};
constexpr AttnShape kMlaV2Lite{1, 576, 16, true};

// A paged cache of n_seqs sequences of ctx tokens each; with copies > 1 the K and V buffers hold
// that many caches back to back (cache_bytes apart), for runs that rotate through them to keep
// the cache out of L2 as the layers of a real model do.
struct PagedSetup {
  std::vector<void*> owned;
  ops::AttentionParams p{};
  int64_t cache_bytes = 0;
  void free_all(CudaBackend* b) {
    for (void* q : owned) b->free(q);
  }
};

PagedSetup make_paged(CudaBackend* b, int n_seqs, int n_new, int ctx, AttnShape sh = {}, int copies = 1) {
  const int bs = 16, n_kv = sh.n_kv, hd = sh.hd, n_head = sh.n_head;
  const int blocks_per_seq = (ctx + bs - 1) / bs, n_blocks = blocks_per_seq * n_seqs;
  PagedSetup s;
  const int64_t cache_elems = int64_t{n_blocks} * bs * n_kv * hd;
  s.cache_bytes = 2 * cache_elems;
  void* kc = random_buffer(b, DType::kBF16, copies * cache_elems, 11);
  void* vc = sh.shared_kv ? kc : random_buffer(b, DType::kBF16, copies * cache_elems, 12);
  const int n_tok = n_seqs * n_new;
  void* q = random_buffer(b, DType::kBF16, int64_t{n_tok} * n_head * hd, 13);
  void* out = b->alloc(static_cast<size_t>(n_tok) * n_head * hd * 2).value();
  std::vector<int32_t> q_start(1, 0), ctx_len(static_cast<size_t>(n_seqs), ctx), tables(static_cast<size_t>(n_blocks));
  for (int i = 0; i < n_seqs; ++i) q_start.push_back(q_start.back() + n_new);
  for (int i = 0; i < n_blocks; ++i) tables[static_cast<size_t>(i)] = (i * 7919) % n_blocks;  // scattered
  auto up = [&](const std::vector<int32_t>& v) {
    void* d = b->alloc(v.size() * 4).value();
    (void)b->upload(d, v.data(), v.size() * 4);
    s.owned.push_back(d);
    return static_cast<const int32_t*>(d);
  };
  s.owned.insert(s.owned.end(), {kc, q, out});
  if (!sh.shared_kv) s.owned.push_back(vc);
  s.p = {{kc, vc, DType::kBF16, n_blocks, bs, n_kv, hd}, q, out, DType::kBF16, int64_t{n_head} * hd, int64_t{n_head} * hd,
         n_seqs, n_tok, up(q_start), up(ctx_len), up(tables), blocks_per_seq, ctx, n_head, 0,
         1.f / std::sqrt(static_cast<float>(hd))};
  return s;
}

// FRUGAL_ABENCH_ONLY=<text> keeps the rows whose name contains it (e.g. "wgmma seqs=1 len=8192
// ctx=32768" for one kernel under a profiler: `ncu -k regex:attention_prefill_kernel -c 1`).
bool attn_row_wanted(const std::string& name) {
  const char* only = std::getenv("FRUGAL_ABENCH_ONLY");
  return only == nullptr || name.find(only) != std::string::npos;
}

void bench_attention(CudaBackend* b, double ceiling, Table* table) {
  // max_ctx > ctx: a captured graph's sizing (the 7B step passes 2560 at ctx 256).
  struct Dec { int n_seqs, ctx, max_ctx; };
  for (Dec d : {Dec{1, 256, 256}, Dec{1, 256, 2560}, Dec{1, 1024, 1024}, Dec{1, 4096, 4096}, Dec{1, 32768, 32768},
                Dec{32, 2048, 2048}}) {
    const std::string name = "attn decode seqs=" + std::to_string(d.n_seqs) + " ctx=" + std::to_string(d.ctx) +
                             (d.max_ctx != d.ctx ? " max_ctx=" + std::to_string(d.max_ctx) : "");
    if (!attn_row_wanted(name)) continue;
    PagedSetup s = make_paged(b, d.n_seqs, 1, d.ctx);
    s.p.max_ctx_len = d.max_ctx;
    (void)b->reserve_scratch(64u << 20);
    Timing t = time_op(b->stream(), 30, 10, [&](int) { (void)b->attention(s.p); });
    const double bytes = 2.0 * 2 * double(d.n_seqs) * d.ctx * 4 * 128;
    const double gbs = bytes / (t.median_us * 1e3);
    table->add({name, t, gbs, "GB/s", 100 * gbs / ceiling});
    s.free_all(b);
  }
  // MLA decode at DeepSeek-V2-Lite's shape (issue 19): a 256-sequence step at ~200 tokens and
  // one long sequence, the tensor-core kernel against the CUDA-core one (FRUGAL_MLA_MMA's A/B);
  // GB/s of latent cache read (each 576-wide bf16 row once); the calls rotate through copies of
  // the cache (512 MB in all), so the rows come from HBM, not L2. A single sequence's splits are
  // merged by the last blocks (MlaMerge::kFused, whatever their size; the default fuses up to
  // kMlaFusedMergeMaxBytes) and by the combine kernel (FRUGAL_MLA_FUSED_COMBINE=0): ctx 384 is
  // batch-1 decode of V2-Lite's bench runs (ctx 128..384), 4096 the threshold's other side.
  for (Dec d : {Dec{256, 200, 200}, Dec{1, 384, 384}, Dec{1, 4096, 4096}}) {
    auto row_name = [&](bool mma, bool fused) {
      return std::string("attn mla ") + (mma ? "mma" : "cuda-core") + " seqs=" + std::to_string(d.n_seqs) +
             " ctx=" + std::to_string(d.ctx) + (d.n_seqs > 1 ? "" : fused ? " fused-merge" : " combine-kernel");
    };
    if (!attn_row_wanted(row_name(true, true)) && !attn_row_wanted(row_name(false, true)) &&
        !attn_row_wanted(row_name(true, false)) && !attn_row_wanted(row_name(false, false)))
      continue;
    const double bytes = 2.0 * double(d.n_seqs) * d.ctx * kMlaV2Lite.hd;
    const int copies = std::max(1, static_cast<int>((512 << 20) / bytes));
    PagedSetup s = make_paged(b, d.n_seqs, 1, d.ctx, kMlaV2Lite, copies);
    (void)b->reserve_scratch(64u << 20);
    char* const cache0 = static_cast<char*>(s.p.cache.k_cache);
    const bool was = mla_mma_enabled();
    const MlaMerge merge_was = mla_merge_mode();
    for (bool mma : {true, false})
      for (bool fused : {true, false}) {
        if (!attn_row_wanted(row_name(mma, fused)) || (d.n_seqs > 1 && !fused)) continue;
        set_mla_mma_enabled(mma);
        set_mla_merge_mode(fused ? MlaMerge::kFused : MlaMerge::kCombineKernel);
        Timing t = time_op(b->stream(), 30, 10, [&](int i) {
          s.p.cache.k_cache = s.p.cache.v_cache = cache0 + (i % copies) * s.cache_bytes;
          (void)b->attention(s.p);
        });
        const double gbs = bytes / (t.median_us * 1e3);
        table->add({row_name(mma, fused) + " splits=" + std::to_string(mla_decode_splits(s.p, b->n_sms())), t, gbs,
                    "GB/s", 100 * gbs / ceiling});
      }
    set_mla_mma_enabled(was);
    set_mla_merge_mode(merge_was);
    s.free_all(b);
  }
  // Prefill: whole prompts, and the last 8k chunk of a 32k prompt (the long-context case of
  // issue 20), on the wgmma kernel (where available), the mma.sync one, and the FA3 kernel
  // (attention_prefill_fa3.cu, sm_90a) without and with the consumers' ping-pong.
  struct Kernel {
    const char* name;
    int wg, fa3;  // set_prefill_wgmma_enabled, set_prefill_fa3_mode
  };
  const Kernel kernels[] = {{"wgmma", 1, 0}, {"mma.sync", 0, 0}, {"fa3", 1, 1}, {"fa3-pingpong", 1, 2}};
  struct Pre { int n_seqs, n, ctx; };
  for (Pre pr : {Pre{1, 2048, 2048}, Pre{8, 512, 512}, Pre{1, 8192, 8192}, Pre{1, 8192, 32768}}) {
    auto row_name = [&](const Kernel& k) {
      return std::string("attn prefill ") + k.name + " seqs=" + std::to_string(pr.n_seqs) + " len=" + std::to_string(pr.n) +
             (pr.ctx != pr.n ? " ctx=" + std::to_string(pr.ctx) : "");
    };
    if (std::none_of(std::begin(kernels), std::end(kernels), [&](const Kernel& k) { return attn_row_wanted(row_name(k)); }))
      continue;
    PagedSetup s = make_paged(b, pr.n_seqs, pr.n, pr.ctx);
    (void)b->reserve_scratch(64u << 20);
    // Causal QK^T + PV: query i of a chunk sees ctx - n + i + 1 keys.
    const double keys = double(pr.n) * (pr.ctx - pr.n) + double(pr.n) * (pr.n + 1) / 2;
    const double flops = 4.0 * 128 * 28 * pr.n_seqs * keys;
    const int fa3_was = prefill_fa3_mode();
    const bool wg_available = prefill_wgmma_enabled();
    for (const Kernel& k : kernels) {
      set_prefill_fa3_mode(k.fa3);
      // The wgmma-based rows run only where that kernel can (and the FA3 ones where it takes
      // the shape), so no row measures a fallback under its name.
      const bool runs = k.wg == 0 || (wg_available &&
                                      (k.fa3 == 0 || attention_prefill_fa3_applies(s.p, attention_prefill_splits(s.p, b->n_sms()))));
      if (!runs || !attn_row_wanted(row_name(k))) continue;
      set_prefill_wgmma_enabled(k.wg == 1);
      Timing t = time_op(b->stream(), pr.n > 4096 ? 5 : 20, 3, [&](int) { (void)b->attention(s.p); });
      const double tf = flops / (t.median_us * 1e6);
      table->add({row_name(k), t, tf, "TFLOP/s", 100 * tf / 790.0});
    }
    set_prefill_fa3_mode(fa3_was);
    set_prefill_wgmma_enabled(true);
    s.free_all(b);
  }
}

// A mixed step of the ITL probe (issue 5): 64 decoders plus one chunk late in a 10k prompt.
// Per layer: the four 7B GEMMs at the step's m (against m = 64, decode alone), and the
// attention through the prefill kernel alone, with the key split, and with the decoders
// handed to the decode kernel (n_decode_seqs).
void bench_mixed(CudaBackend* b, Table* table) {
  for (int64_t m : {64, 128, 192, 320}) {
    double total_us = 0;
    Timing sum{};
    for (const Shape& s : kShapes) {
      if (s.n > 100000) continue;
      const int64_t w_elems = s.n * s.k;
      const int copies = static_cast<int>(std::max<int64_t>(1, (int64_t{512} << 20) / (w_elems * 2)));
      std::vector<void*> ws;
      for (int c = 0; c < copies; ++c) ws.push_back(random_buffer(b, DType::kBF16, w_elems, 300 + c));
      void* x = random_buffer(b, DType::kBF16, m * s.k, 8);
      void* y = b->alloc(static_cast<size_t>(m * s.n * 2)).value();
      ops::MatmulParams p{x, DType::kBF16, s.k, ops::dense_weight(ws[0], DType::kBF16), nullptr, DType::kBF16, y, DType::kBF16, s.n, m, s.n, s.k, false};
      Timing t = time_op(b->stream(), 20, 10, [&](int i) {
        p.w.data = ws[static_cast<size_t>(i % copies)];
        (void)b->matmul(p);
      });
      total_us += t.median_us;
      sum.median_us += t.median_us;
      sum.lo_us += t.lo_us;
      sum.hi_us += t.hi_us;
      for (void* w : ws) b->free(w);
      b->free(x);
      b->free(y);
    }
    const double gbs = 2.0 * 233.0e6 / (total_us * 1e3);
    table->add({"mixed: layer GEMMs m=" + std::to_string(m) + " (x28 = " + std::to_string(static_cast<int>(28 * total_us / 1000 + 0.5)) + " ms)",
                sum, gbs, "GB/s", -1});
  }
  const int n_dec = 64, bs = 16, n_kv = 4, hd = 128, n_head = 28, long_ctx = 10000;
  for (int chunk : {64, 128, 256}) {
    std::vector<int> n_new, ctx;
    for (int i = 0; i < n_dec; ++i) {
      n_new.push_back(1);
      ctx.push_back(150 + 2 * i);
    }
    n_new.push_back(chunk);
    ctx.push_back(long_ctx);
    const int n_seqs = n_dec + 1, max_blocks = (long_ctx + bs - 1) / bs, n_blocks = n_seqs * max_blocks;
    const int64_t cache_elems = int64_t{n_blocks} * bs * n_kv * hd;
    void* kc = random_buffer(b, DType::kBF16, cache_elems, 21);
    void* vc = random_buffer(b, DType::kBF16, cache_elems, 22);
    const int n_tok = n_dec + chunk;
    void* q = random_buffer(b, DType::kBF16, int64_t{n_tok} * n_head * hd, 23);
    void* out = b->alloc(static_cast<size_t>(n_tok) * n_head * hd * 2).value();
    std::vector<int32_t> q_start(1, 0), tables(static_cast<size_t>(n_blocks));
    for (int x : n_new) q_start.push_back(q_start.back() + x);
    for (int i = 0; i < n_blocks; ++i) tables[static_cast<size_t>(i)] = (i * 7919) % n_blocks;
    std::vector<void*> owned{kc, vc, q, out};
    auto up = [&](const std::vector<int32_t>& v) {
      void* d = b->alloc(v.size() * 4).value();
      (void)b->upload(d, v.data(), v.size() * 4);
      owned.push_back(d);
      return static_cast<const int32_t*>(d);
    };
    ops::AttentionParams p{{kc, vc, DType::kBF16, n_blocks, bs, n_kv, hd}, q, out, DType::kBF16, int64_t{n_head} * hd,
                           int64_t{n_head} * hd, n_seqs, n_tok, up(q_start), up(ctx), up(tables), max_blocks, long_ctx,
                           n_head, 0, 1.f / std::sqrt(128.f)};
    (void)b->reserve_scratch(256u << 20);
    struct Variant { const char* name; bool split; bool hint; };
    for (Variant v : {Variant{"prefill kernel", false, false}, Variant{"+ key split", true, false},
                      Variant{"+ decoders to decode kernel", true, true}}) {
      set_prefill_split_enabled(v.split);
      p.n_decode_seqs = v.hint ? n_dec : 0;
      p.decode_max_ctx_len = v.hint ? 150 + 2 * (n_dec - 1) : 0;
      Timing t = time_op(b->stream(), 20, 5, [&](int) { (void)b->attention(p); });
      const double flops = 4.0 * hd * n_head * (double(chunk) * (long_ctx - chunk) + double(chunk) * chunk / 2);
      table->add({"mixed: attn 64 dec + chunk " + std::to_string(chunk) + "@10k " + v.name, t,
                  flops / (t.median_us * 1e6), "TFLOP/s", -1});
    }
    set_prefill_split_enabled(true);
    for (void* d : owned) b->free(d);
  }
}

}  // namespace
}  // namespace frugal::cuda::bench

int main(int argc, char** argv) {
  using namespace frugal::cuda;
  using namespace frugal::cuda::bench;
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const bool mixed_only = argc > 1 && std::strcmp(argv[1], "--mixed") == 0;
  const bool quant_only = argc > 1 && std::strcmp(argv[1], "--quant") == 0;
  const bool decode_attn_only = argc > 1 && std::strcmp(argv[1], "--decode-attn") == 0;
  const bool attn_only = argc > 1 && std::strcmp(argv[1], "--attn") == 0;
  const bool gemv_only = argc > 1 && std::strcmp(argv[1], "--gemv") == 0;
  const bool moe_only = argc > 1 && std::strcmp(argv[1], "--moe") == 0;
  const bool splits_only = argc > 1 && std::strcmp(argv[1], "--decode-splits") == 0;
  auto b = CudaBackend::create(0);
  if (!b.is_ok()) {
    std::fprintf(stderr, "%s\n", b.status().to_string().c_str());
    return 1;
  }
  auto lt = LtGemm::create(32u << 20);
  Table table;
  if (mixed_only) {
    bench_mixed(b->get(), &table);
    table.print();
    return 0;
  }
  const double ceiling = measure_copy_ceiling(b->get(), &table);
  if (quant_only) {
    bench_quant(b->get(), ceiling, &table);
    table.print();
    return 0;
  }
  if (decode_attn_only) {
    bench_decode_attention(b->get(), ceiling, &table);
    table.print();
    return 0;
  }
  if (splits_only) {
    bench_decode_splits(b->get(), ceiling, &table);
    table.print();
    return 0;
  }
  if (attn_only) {
    bench_attention(b->get(), ceiling, &table);
    table.print();
    return 0;
  }
  if (gemv_only) {
    bench_gemv(b->get(), lt->get(), ceiling, &table, false);
    table.print();
    return 0;
  }
  if (moe_only) {
    bench_moe(b->get(), ceiling, &table);
    table.print();
    return 0;
  }
  bench_gemv(b->get(), lt->get(), ceiling, &table, quick);
  bench_gemm(b->get(), &table);
  bench_attention(b->get(), ceiling, &table);
  bench_decode_attention(b->get(), ceiling, &table);
  bench_moe(b->get(), ceiling, &table);
  bench_model_7b(b->get(), ceiling, &table);
  bench_mixed(b->get(), &table);
  table.print();
  return 0;
}
